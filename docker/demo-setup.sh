#!/bin/sh
# Demo data for the compose stack (runs in the admin image, as the dev stack does for
# make run): the demo organization, towers and gateway locations; the two simulated
# gateways registered with the cloud at their seeded locations; the tower simulator's
# provisioning file with the towers' secrets. Safe to run again.
set -eu
creds=$LOCKERNET_DATA_DIR/demo-credentials.json
lockernet-admin seed-demo -api-url "$DEMO_API_URL" -towersim-config "$LOCKERNET_DATA_DIR/towersim.json"

register() { # serial, base URL of its local API, its bearer secret
	location=$(jq -er --arg s "$1" '.gateways[] | select(.serial == $s) | .location_id' "$creds")
	secret_file=$(mktemp)
	printf '%s' "$3" >"$secret_file"
	lockernet-admin register-gateway -serial "$1" -location-id "$location" -url "$2" -secret-file "$secret_file"
	rm -f "$secret_file"
}
register GW-0001 "${GW1_URL:-http://gateway-1:8101}" "$GW1_SECRET"
register GW-0002 "${GW2_URL:-http://gateway-2:8102}" "$GW2_SECRET"
echo "demo ready: credentials in the volume 'demo' ($creds)"
