# Every tool this project needs is built from the Go module proxy: nothing is
# downloaded as a binary. Tool modules live apart from go.mod (see tools/).

GO        ?= go
BIN       := $(CURDIR)/bin
TEMPORAL  := $(BIN)/temporal
PKGS      := ./...
# Suites that need a real dev server and the binaries above build only with
# this tag; `make test` and `make check` set it, `make unit` does not.
TAGS      := realserver
# Fuzz targets get a short bounded run in CI; override FUZZTIME for longer.
FUZZTIME  ?= 10s

.PHONY: all build tools temporal jaeger test unit check lint fuzz run run-many bench soak clean \
	cluster cluster-build cluster-stop cluster-test

all: build

build:
	$(GO) build -o $(BIN)/worker ./worker
	$(GO) build -o $(BIN)/starter ./starter
	$(GO) build -o $(BIN)/eddasim ./cmd/eddasim
	$(GO) build -o $(BIN)/karvifake ./cmd/karvifake

# The temporal CLI (dev server + Web UI), from its own module.
temporal: $(TEMPORAL)
$(TEMPORAL): tools/temporal/go.mod tools/temporal/go.sum
	$(GO) build -modfile=tools/temporal/go.mod -o $(TEMPORAL) github.com/temporalio/cli/cmd/temporal

# Jaeger (v2) with its in-memory store, from its own module: the backend
# the trace test and `make run TRACE=1` send traces to (docs/traces.md).
# A cold build takes several minutes.
JAEGER := $(BIN)/jaeger
jaeger: $(JAEGER)
$(JAEGER): tools/jaeger/go.mod tools/jaeger/go.sum
	$(GO) build -modfile=tools/jaeger/go.mod -o $(JAEGER) github.com/jaegertracing/jaeger/cmd/jaeger

tools: temporal

# gofmt, go vet, staticcheck and the SDK's workflowcheck; vet and
# staticcheck with the tag, so they see the real-server suites too.
check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet -tags $(TAGS) $(PKGS)
	$(GO) tool -modfile=tools/lint/go.mod staticcheck -tags $(TAGS) $(PKGS)
	$(GO) tool -modfile=tools/lint/go.mod workflowcheck -config workflows/workflowcheck.yaml ./workflows/...

lint: check

# Unit, workflow (testsuite and replay), end-to-end and fault tests; the
# last two, behind the tag, run against a real dev server that they start
# and stop themselves on 127.0.0.1, and fail if a binary is missing.
test: temporal jaeger build check
	TEMPORAL_CLI=$(TEMPORAL) KARVI_EDDA_BIN=$(BIN) $(GO) test -race -count=1 -tags $(TAGS) -timeout 30m $(PKGS)
	$(MAKE) --no-print-directory fuzz

# The quick run: no tag, so nothing needs a server or a prebuilt binary.
unit:
	$(GO) test -race -count=1 -short $(PKGS)

# Every fuzz target for FUZZTIME (scripts/fuzz.sh says how an engine
# timeout is told from a finding).
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) ./scripts/fuzz.sh ./mapping/ ./mapping/redact/ ./runplan/ ./runstatus/ \
	  ./canonical/ ./jobview/ ./slots/ ./intent/ ./limits/ ./intake/ ./soak/ ./traces/

# The main job end to end: a local dev server, the worker with the conductor
# simulator and the file brief sink, the sample dispatch followed to its end.
# TRACE=1 also starts Jaeger beside them and prints the task's trace.
run: temporal build $(if $(filter 1,$(TRACE)),jaeger)
	TRACE=$(TRACE) ./scripts/run-main.sh

# The run of many dependent tasks (testdata/runs/sample.json) on the same
# embedded default.
run-many: temporal build
	./scripts/run-many.sh

# Benchmarks (BENCHMARKS.md): a dev server, the worker, the simulator and
# karvi fakes on 127.0.0.1; prints a report and writes results.json,
# report.md, profiles and logs to BENCHOUT. Figures never fail the build.
# BENCHFLAGS=-quick is a smoke run; -only picks scenarios.
BENCHOUT   ?= .run/bench
BENCHFLAGS ?=
bench: temporal build
	$(GO) build -o $(BIN)/benchrun ./cmd/benchrun
	TEMPORAL_CLI=$(TEMPORAL) KARVI_EDDA_BIN=$(BIN) $(BIN)/benchrun -out $(BENCHOUT) $(BENCHFLAGS)

# The soak (docs/soak.md): a seeded mix of tasks, runs, board tasks,
# people's actions and faults over SOAK_DURATION on a dev server, the
# karvi fake at karvi's default rate limit and two worker hosts, every
# period compressed by SOAK_SCALE; the invariants checked all along and at
# the end. SOAK_SEED replays a mix (random when unset; printed first). The
# report, journal and logs go to SOAK_OUT. Exits non-zero on a violation.
SOAK_DURATION ?= 10m
SOAK_SCALE    ?= 60
SOAK_OUT      ?= .run/soak
soak: temporal build
	$(GO) build -o $(BIN)/soak ./cmd/soak
	TEMPORAL_CLI=$(TEMPORAL) KARVI_EDDA_BIN=$(BIN) SOAK_DURATION=$(SOAK_DURATION) SOAK_SCALE=$(SOAK_SCALE) \
	  SOAK_OUT=$(SOAK_OUT) SOAK_SEED=$(SOAK_SEED) $(BIN)/soak

# A PostgreSQL-backed Temporal server on 127.0.0.1 (docs/deploy.md):
# PostgreSQL from Debian's packages, the server and its SQL schema tool
# built from tools/cluster/go.mod (the same server version as the dev
# server; a cold build takes about 5 minutes on 2 cores). `make cluster`
# starts it (frontend 127.0.0.1:17233, namespace default), `make
# cluster-stop` stops it; its data stays in .run/cluster.
cluster-build:
	$(GO) build -modfile=tools/cluster/go.mod -o $(BIN)/temporal-server go.temporal.io/server/cmd/server
	$(GO) build -modfile=tools/cluster/go.mod -o $(BIN)/temporal-sql-tool go.temporal.io/server/cmd/tools/sql
	$(BIN)/temporal-server validate-dynamic-config tools/cluster/dynamicconfig.yaml >/dev/null
	bash -n scripts/cluster.sh && bash -n scripts/cluster-test.sh

cluster: temporal cluster-build
	TEMPORAL_CLI=$(TEMPORAL) KARVI_EDDA_BIN=$(BIN) ./scripts/cluster.sh start

cluster-stop:
	./scripts/cluster.sh stop

# The fleet, chaos and run suites and the server-restart test against the
# cluster (started if it is not running, and then stopped again).
cluster-test: temporal build cluster-build
	TEMPORAL_CLI=$(TEMPORAL) KARVI_EDDA_BIN=$(BIN) GO=$(GO) ./scripts/cluster-test.sh

clean:
	rm -rf $(BIN) .run
