# Locker Network Service. The two front doors: `make run` and `make test`.
SHELL := /bin/bash
export GOTOOLCHAIN := local
GO ?= go
BIN := bin
# cmd/ holds what ships (PROD_CMDS); the dev tools (devstack, lockernet-drill, lockernet-bench) are
# under internal/dev/cmd and build into bin/dev.
PROD_CMDS := apiserver worker gateway towersim lockernet-admin
DEV_CMD_DIR := ./internal/dev/cmd
PKGS := ./...

.PHONY: help run run-cluster deploy-cluster temporal-build build dev-build test test-short replay lint fmt openapi clean bench test-faults docs-ui

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

run: dev-build ## Build and start the whole system (embedded Temporal, Postgres, apiserver, worker, gateways, tower simulator)
	@exec $(BIN)/dev/devstack

run-cluster: dev-build temporal-build ## The production shape as processes: Temporal server on Postgres, 2 apiservers + 2 workers behind nginx, supervised (docs/scaling.md)
	@exec $(BIN)/dev/devstack -cluster

# make deploy-cluster builds the apiserver and worker into bin/dev/releases/<UTC time>-<commit>
# and rolls the running `make run-cluster` (same LOCKERNET_DATA_DIR) to them, one process at a
# time; RELEASE=<name> rolls to a build already in bin/dev/releases instead (a rollback);
# DEPLOY_ARGS="-drain 35s -stop-grace 30s -ready-timeout 90s" sets its bounds. docs/runbook.md.
RELEASES := $(BIN)/dev/releases
deploy-cluster: ## Roll the running cluster shape's workers and apiservers to a new build, one at a time (RELEASE=name: to a kept build; docs/runbook.md)
	@set -e; \
	if [ -n "$(RELEASE)" ]; then dir=$(RELEASES)/$(RELEASE); \
	else dir=$(RELEASES)/$$(date -u +%Y%m%dT%H%M%SZ)-$$(git rev-parse --short HEAD 2>/dev/null || echo local)$$(git diff --quiet HEAD -- 2>/dev/null || echo -dirty); \
		echo "building $$dir"; $(GO) build -o $$dir/ ./cmd/apiserver ./cmd/worker; fi; \
	$(BIN)/dev/devstack -deploy $$dir $(DEPLOY_ARGS)

# The official Temporal server and its SQL schema tool at the version go.mod pins, built once
# into bin/dev (heavy: `make clean` to rebuild), with the server's PostgreSQL schema files.
TEMPORAL_MOD_DIR = $(shell $(GO) list -m -f '{{.Dir}}' go.temporal.io/server)
temporal-build: $(BIN)/dev/temporal-server $(BIN)/dev/temporal-sql-tool $(BIN)/dev/temporal-schema/postgresql/v12 ## Build the official Temporal server and its SQL tool into bin/dev (once)

$(BIN)/dev/temporal-server: go.mod
	$(GO) build -o $@ go.temporal.io/server/cmd/server

$(BIN)/dev/temporal-sql-tool: go.mod
	$(GO) build -o $@ go.temporal.io/server/cmd/tools/sql

$(BIN)/dev/temporal-schema/postgresql/v12: go.mod
	rm -rf $@ && mkdir -p $(dir $@) && cp -r $(TEMPORAL_MOD_DIR)/schema/postgresql/v12 $@ && chmod -R u+w $@

dev-build: ## Build the dev stack binaries into bin/dev (gateway with the simulator controls)
	$(GO) build -o $(BIN)/dev/ $(DEV_CMD_DIR)/devstack ./cmd/apiserver ./cmd/worker ./cmd/towersim ./cmd/lockernet-admin
	$(GO) build -tags simcontrol -o $(BIN)/dev/gateway ./cmd/gateway

build: ## Build the production binaries into bin/ (none links the Temporal server)
	$(GO) build -o $(BIN)/ $(addprefix ./cmd/,$(PROD_CMDS))

test: ## Run every test against real Postgres and an embedded Temporal server
	$(GO) test -count=1 -timeout 45m $(PKGS)

test-short: ## Unit tests only (no database, no Temporal)
	$(GO) test -count=1 -short $(PKGS)

# make replay HISTORIES=dir replays a folder that `lockernet-admin histories export` wrote (docs/runbook.md).
HISTORIES ?= workflows/testdata/exported
replay: ## Replay exported workflow histories against this build's workflows (HISTORIES=dir; default the committed sample); fails on non-determinism
	$(GO) run ./cmd/lockernet-admin histories replay -dir $(HISTORIES)

lint: ## gofmt, go vet, staticcheck and workflowcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) $(PKGS)
	$(GO) run go.temporal.io/sdk/contrib/tools/workflowcheck@$(WORKFLOWCHECK_VERSION) ./workflows/...

# make test-faults DRILLS=kill-worker runs one drill (or a comma-separated list) and prints its report;
# FAULTS_REPORT= prints the report of all the drills instead of writing it (CI). bin/dev/drill-build-b is
# cluster-deploy's build B: the apiserver, worker and lockernet-admin with the drill's fixture (-tags drill_build_b).
FAULTS_REPORT ?= docs/reliability.md
test-faults: dev-build temporal-build ## Fault drills on real processes, on make run's shape and on the cluster shape (workers, apiservers, Temporal killed; Postgres restarted; gateway hang/down); writes docs/reliability.md
	$(GO) build -o $(BIN)/dev/ $(DEV_CMD_DIR)/lockernet-drill
	$(GO) build -tags drill_build_b -o $(BIN)/dev/drill-build-b/ ./cmd/apiserver ./cmd/worker ./cmd/lockernet-admin
	$(BIN)/dev/lockernet-drill -command "make test-faults$(if $(DRILLS), DRILLS=$(DRILLS))" \
		$(if $(DRILLS),-drills $(DRILLS),$(if $(FAULTS_REPORT),-out $(FAULTS_REPORT))) $(DRILL_ARGS)

# make bench BENCH_ARGS="-shapes run" measures one shape only; -step sets each rate step (60s by default).
# make bench BENCH_ARGS='-shapes "" -engine stock,ours -out /tmp/engine.md' measures Temporal's own dev server alone, stock settings against ours, a fresh server per step.
bench: dev-build temporal-build ## Measure the running `make run` stack and a cluster shape it starts itself (flow sustained, Temporal alone and with the card's delivery and flow shapes, proxy, search, expiry, webhooks at rising rates, memory); write docs/benchmarks.md
	$(GO) build -o $(BIN)/dev/ $(DEV_CMD_DIR)/lockernet-bench
	$(BIN)/dev/lockernet-bench $(BENCH_ARGS)

openapi: ## Regenerate the committed docs/openapi.yaml (apiserver) and docs/openapi-gateway.yaml (gateway local API) from the code
	LOCKERNET_UPDATE_OPENAPI=1 $(GO) test -count=1 -run TestOpenAPISpecIsCurrent ./apiserver ./hardware/gateway

# The API reference UI served at /docs, vendored from npm and embedded in the apiserver (apiserver/docsui/README.md).
ELEMENTS_VERSION ?= 9.0.25
docs-ui: ## Re-fetch the vendored API reference UI (@stoplight/elements) into apiserver/docsui
	tmp=$$(mktemp -d) && (cd $$tmp && npm pack --silent @stoplight/elements@$(ELEMENTS_VERSION) >/dev/null && tar xzf *.tgz) && \
	cp $$tmp/package/web-components.min.js $$tmp/package/styles.min.css $$tmp/package/web-components.min.js.LICENSE.txt \
	   $$tmp/package/LICENSE apiserver/docsui/ && rm -rf $$tmp

fmt: ## Format the code
	gofmt -w $$(git ls-files '*.go')

clean: ## Remove built binaries (keeps .data)
	rm -rf $(BIN)

STATICCHECK_VERSION ?= v0.8.2
WORKFLOWCHECK_VERSION ?= v0.6.0
