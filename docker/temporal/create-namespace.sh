#!/bin/sh
# Registers the namespace the Locker Network Service uses (TEMPORAL_NAMESPACE of the
# services; "default" in compose.yaml) unless it exists. Runs in temporalio/admin-tools.
set -eu
ns=${LOCKERNET_NAMESPACE:-default}
until temporal operator cluster health --address "$TEMPORAL_ADDRESS" >/dev/null 2>&1; do
	echo "waiting for temporal at $TEMPORAL_ADDRESS"
	sleep 2
done
temporal operator namespace describe --namespace "$ns" --address "$TEMPORAL_ADDRESS" >/dev/null 2>&1 ||
	temporal operator namespace create --namespace "$ns" --retention 72h --address "$TEMPORAL_ADDRESS"
echo "namespace $ns ready"
