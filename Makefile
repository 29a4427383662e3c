# floodgate — `make help` lists the targets.
GO       ?= go
BUF      := $(GO) tool -modfile=tools/buf/go.mod buf
STATICCHECK := $(GO) tool -modfile=$(CURDIR)/tools/staticcheck/go.mod staticcheck
# deploy/ and bench/ are modules of their own (their heavy test dependencies
# stay out of the product's go.mod); each points back here with a replace.
SUBMODULES := deploy bench
BIN      := bin/floodgate
PKG      := ./...
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)

.DEFAULT_GOAL := help
.PHONY: help run image build test test-short check-generate generate lint fmt bench loadtest redis-cost soak charts lines clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

RULES ?= examples/rules

run: build ## build, then serve gRPC on 127.0.0.1:8081 and HTTP on 127.0.0.1:8080 with the embedded store and $(RULES) (no Redis needed); flags: make run ARGS='--log-level debug'; Ctrl-C stops it (floodgate drains and exits 0; make reports the interrupt, exit 130)
	@$(BIN) serve --config $(RULES) $(ARGS)

build: ## build bin/floodgate (static, no cgo)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/floodgate

test: ## run every test (installs and starts the Redis it needs), race detector on
	bash scripts/ensure-test-deps.sh
	@# The lint and the submodules' tests run beside the product's tests,
	@# whose last minutes (the e2e package's tests, one after another) leave
	@# a core idle; their output follows the product's, and any failure fails
	@# the target.
	@tmp=$$(mktemp -d); \
	( $(MAKE) --no-print-directory lint check-generate >$$tmp/lint.log 2>&1; echo $$? >$$tmp/lint.rc ) & \
	for m in $(SUBMODULES); do ( cd $$m && $(GO) test -race -count=1 -timeout 15m ./... >$$tmp/$$m.log 2>&1; echo $$? >$$tmp/$$m.rc ) & done; \
	echo "go test -race -count=1 -timeout 15m $(PKG)"; \
	$(GO) test -race -count=1 -timeout 15m $(PKG); rc=$$?; wait; \
	for j in lint $(SUBMODULES); do echo "== $$j"; cat $$tmp/$$j.log; [ "$$(cat $$tmp/$$j.rc)" = 0 ] || { echo "== $$j failed"; rc=1; }; done; \
	rm -rf $$tmp; exit $$rc

test-short: ## the inner loop: go test -short (pure and in-process tests; no Redis, no binaries built), under a minute
	$(GO) test -short -count=1 $(PKG)
	@set -e; for m in $(SUBMODULES); do (cd $$m && $(GO) test -short -count=1 ./...); done

generate: ## regenerate gen/ from proto/ with buf and the pinned protoc-gen-go plugins
	$(BUF) generate

check-generate: ## fail if `make generate` would change gen/
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && \
	$(BUF) generate --output $$tmp && \
	diff -r $$tmp/gen gen && echo "gen/ is up to date"

lint: ## go vet, staticcheck, gofmt, goimports -local (project imports in their own group) and buf lint
	$(GO) vet $(PKG)
	$(STATICCHECK) $(PKG)
	@set -e; for m in $(SUBMODULES); do echo "$$m: go vet, staticcheck"; (cd $$m && $(GO) vet ./... && $(STATICCHECK) ./...); done
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/')); \
	if [ -n "$$out" ]; then echo "gofmt needed (make fmt):"; echo "$$out"; exit 1; fi
	bash scripts/check-imports.sh $$(git ls-files '*.go' | grep -v '^gen/')
	$(BUF) lint

fmt: ## gofmt the tree and group imports (standard library, others, github.com/floodgate/floodgate)
	gofmt -w $$(git ls-files '*.go' | grep -v '^gen/')
	bash scripts/check-imports.sh -w $$(git ls-files '*.go' | grep -v '^gen/')

bench: ## run the Go benchmarks (algorithms, stores, matching, handlers)
	bash scripts/ensure-test-deps.sh
	$(GO) test -run '^$$' -bench . -benchmem -count 1 ./algorithms/ ./store/... ./server/...

loadtest: build ## whole-service load tests (embedded store, a redis-server and a 3-master cluster it starts) -> tables for bench/RESULTS.md and docs/capacity.md
	bash scripts/ensure-test-deps.sh
	cd bench && $(GO) run ./loadtest -binary ../$(BIN) $(LOADTEST_ARGS)

redis-cost: ## Redis instructions per decision under callgrind (needs valgrind), each algorithm at 1 and 8 a call, beside a minimal GCRA and the INCRBY + EXPIRE pattern; then Redis CPU per decision -> bench/RESULTS.md
	bash scripts/ensure-test-deps.sh
	cd bench && $(GO) run ./rediscost $(REDISCOST_ARGS)

soak: ## bounded soak: 60s of load on a binary with Redis, then no growth in goroutines, heap or open fds
	bash scripts/ensure-test-deps.sh
	FLOODGATE_SOAK=60s $(GO) test -run TestSoak -count=1 -v ./e2e/

charts: ## redraw the README's algorithm charts in docs/img/ (floodgate simulate; a test fails while they are stale)
	$(GO) test -count=1 -run '^TestChartsUpToDate$$' ./cmd/floodgate -update

lines: ## the product's lines per package (non-test, non-generated Go linked into the binary or the client, and the Lua it embeds), then the test-support packages apart
	@bash scripts/lines.sh

IMAGE ?= ghcr.io/floodgate/floodgate:$(VERSION)

image: ## build the container image $(IMAGE) (docker build; the manifests use ghcr.io/floodgate/floodgate:0.1.0: make image VERSION=0.1.0)
	docker build -t $(IMAGE) --build-arg VERSION=$(VERSION) .

clean: ## remove build output
	rm -rf bin
