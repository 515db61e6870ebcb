# rdmawatch: `make run` runs the main job on the embedded default, `make test`
# runs every test with the services they need (it starts ClickHouse itself).
GO      ?= go
BIN     := bin/rdmawatch
CH      := deploy/clickhouse/local.sh
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
PKGS    := ./...

.PHONY: all build build-fleet run test test-modern tools test-unit test-chaos test-cluster fuzz bench bench-e2e bench-trends lint fmt clickhouse stop clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/rdmawatch

# The fleet build: the roles and the operators' commands, without the lab
# (replay, run, simulate, eval, collector --source sim) and so without
# nats-server and the simulator; what the container image ships.
build-fleet:
	$(GO) build -tags fleet -ldflags "$(LDFLAGS)" -o bin/rdmawatch-fleet ./cmd/rdmawatch

# Starts (or reuses) the throwaway ClickHouse, then the pipeline over a live
# simulated fleet in accelerated time. ClickHouse keeps running until `make stop`.
run: build
	@dsn=$$($(CH) up | tail -n 1) && dsn="$${dsn%/*}/rdmawatch" && echo "ClickHouse: $$dsn" && \
	  RDMAWATCH_CLICKHOUSE="$$dsn" $(BIN) run

# Unit, integration (real embedded NATS, real ClickHouse, Alertmanager,
# promtool) and end-to-end tests. deploy/tools.sh installs the tools when
# missing (Debian, as root); the REQUIRE variables turn a missing one into a
# failure instead of a skip.
test: build tools
	@dsn=$$($(CH) up | tail -n 1) && echo "ClickHouse: $$dsn" && \
	  RDMAWATCH_CLICKHOUSE="$$dsn" RDMAWATCH_REQUIRE_CLICKHOUSE=1 RDMAWATCH_BIN="$(CURDIR)/$(BIN)" \
	  RDMAWATCH_REQUIRE_ALERTMANAGER=1 RDMAWATCH_REQUIRE_PROMTOOL=1 \
	  $(GO) test -count=1 -timeout 14m $(PKGS)

tools:
	@deploy/tools.sh

# The modern-ClickHouse tier: the project's own code (migrations, rollups,
# retention, topology, every shipped query, the postmortem's reads, the
# Grafana dashboard's SQL, the sink's rows) on ClickHouse 26.x through the
# chDB library, and every answer compared with 18.16's on the same replayed
# fabric. deploy/chdb/fetch.sh fetches the library once into .cache/chdb; a
# failed fetch fails the target. The chdb build tag keeps the library out of
# the product binary. About 30 s once fetched.
CHDB_VERSION ?= 26.7.3-stable.1
test-modern:
	@lib=$$(CHDB_VERSION=$(CHDB_VERSION) deploy/chdb/fetch.sh) && dsn=$$($(CH) up | tail -n 1) && \
	  echo "chDB: $$lib" && echo "ClickHouse: $$dsn" && \
	  RDMAWATCH_CHDB_LIB="$$lib" RDMAWATCH_REQUIRE_CHDB=1 RDMAWATCH_CLICKHOUSE="$$dsn" RDMAWATCH_REQUIRE_CLICKHOUSE=1 \
	  $(GO) test -tags chdb -count=1 -timeout 10m -v ./internal/chdb/chdblib/
	$(GO) vet -tags chdb ./internal/chdb/chdblib/

# Real clusters started by deploy/cluster (a 3-node NATS cluster on
# 127.0.0.1:14950-14952, ZooKeeper on 15000 and two ClickHouse 18.16 replicas
# on 15010/15020, shared by the ClickHouse tests), nodes, a sink and a
# processor killed with SIGKILL mid-stream and restarted. The first run
# installs Debian's zookeeper (root). About 4 minutes. CLUSTER_SKIP leaves
# tests out (a go test -skip pattern).
CLUSTER_SKIP ?=
test-cluster: build
	RDMAWATCH_CLUSTER_TEST=1 RDMAWATCH_BIN="$(CURDIR)/$(BIN)" $(GO) test -count=1 -timeout 8m -v $(if $(CLUSTER_SKIP),-skip '$(CLUSTER_SKIP)') ./test/cluster/

# Without services: what runs anywhere in seconds.
test-unit:
	$(GO) test -count=1 -short $(PKGS)

# Kill -9 of every role and of NATS, ClickHouse down, a long processor
# outage: real processes on a standalone nats-server (deploy/nats/server.sh)
# and a private ClickHouse on ports 14600-14699 (about 3 min on 2 cores).
test-chaos: build
	RDMAWATCH_BIN="$(CURDIR)/$(BIN)" RDMAWATCH_REQUIRE_CLICKHOUSE=1 \
	  $(GO) test -count=1 -tags chaos -run '^TestChaos' -timeout 15m -v ./test/chaos/

# Every Fuzz* target of the module for FUZZTIME each (default 10s); fails on a crash.
FUZZTIME ?= 10s
fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) test/chaos/fuzz.sh

bench: build
	@dsn=$$($(CH) up | tail -n 1) && \
	  RDMAWATCH_CLICKHOUSE="$$dsn" $(GO) test -run '^$$' -bench . -benchmem -count=1 -timeout 10m $(PKGS)

# The end-to-end benchmark (e2e-max-ports in BENCHMARKS.md), its own program out of
# the product binary: PORTS ports at a 1 s interval for DURATION, published
# from memory into nats-server, rdmawatch processor(s) and sink(s) as separate
# processes, a private database of the local ClickHouse. BENCH_E2E_FLAGS adds
# flags (--processors 2, --profile DIR, ...).
PORTS    ?= 50000
DURATION ?= 5m
bench-e2e: build
	@dsn=$$($(CH) up | tail -n 1) && \
	  $(GO) run ./test/bench/cmd/bench-e2e --ports $(PORTS) --interval 1s --duration $(DURATION) --clickhouse "$$dsn" --rdmawatch $(BIN) $(BENCH_E2E_FLAGS)

# Trends over months of rollups (the trends-* rows of BENCHMARKS.md): TRENDS=PORTSxDAYS
# of hourly and daily rollups generated into a private database of the
# local ClickHouse, then `trends --by leaf --bucket day` over 30, 90 and 365
# days. Not part of `make test` or `make bench` (generation takes minutes).
TRENDS ?= 2000x365
bench-trends:
	@dsn=$$($(CH) up | tail -n 1) && \
	  RDMAWATCH_CLICKHOUSE="$$dsn" RDMAWATCH_BENCH_TRENDS=$(TRENDS) $(GO) test -run '^$$' -bench '^BenchmarkTrends$$' -benchtime 1x -v -timeout 60m ./report/

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) build -tags fleet -o /dev/null ./cmd/rdmawatch
	$(GO) vet -tags fleet ./cmd/rdmawatch
	@if $(GO) list -tags fleet -deps ./cmd/rdmawatch | grep -qE 'nats-server|rdmawatch/sim$$|internal/pipeline$$'; then echo "the fleet build links the lab (nats-server, sim or pipeline)"; exit 1; fi
	@if command -v staticcheck >/dev/null 2>&1; then staticcheck $(PKGS); else echo "staticcheck not installed: skipped"; fi

fmt:
	gofmt -w $$(git ls-files '*.go')

clickhouse:
	@$(CH) up

stop:
	@$(CH) down

clean: stop
	rm -rf bin .clickhouse .run
