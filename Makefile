# anysched — build, test, demo, bench, proto.
GO      ?= go
BIN     := bin
CMDS    := central-scheduler regional-scheduler schedctl healthcheck
# Each fuzz target's budget in make test and make fuzz: the one place it is
# set (35 targets; scripts/test.sh reports what each took).
FUZZTIME ?= 10s
# The version every binary reports (schedctl version, status's VERSION,
# anysched_build_info): git describe of the work tree; outside a git
# checkout (a tarball) nothing is stamped and the binaries fall back to the
# VCS information the toolchain embeds, then "devel". VERSION=... overrides.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
LDFLAGS := $(if $(VERSION),-X github.com/anysched/anysched/internal/wiring/version.stamped=$(VERSION))

.PHONY: all build test unit fuzz lint demo demo-loopback bench bench-province proto deps clean screenshots package FORCE

all: build

deps:
	@scripts/install-deps.sh

# The binaries are built again only when a file they are built from (Go
# sources, embedded assets, go.mod) is newer than the last build, or the
# version to stamp changed: make demo on a current tree starts at once.
SOURCES := $(shell find . -type f -not -path './.git/*' -not -path './$(BIN)/*' -not -path './docs/*' \
	-not -path '*/testdata/*' -not -name '*_test.go' -not -name '*.md' 2>/dev/null | grep -v '[[:space:]:#$$%]')

build: $(BIN)/.built

$(BIN)/.built: $(SOURCES) $(BIN)/.version
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ $(addprefix ./,$(CMDS)) ./bench/stbload ./deploy/lab
	@touch $@

# Rewritten (and so newer than .built) only when VERSION differs from the
# one recorded: a new commit restamps the binaries.
$(BIN)/.version: FORCE
	@mkdir -p $(BIN); echo '$(VERSION)' | cmp -s - $@ || echo '$(VERSION)' > $@

FORCE:

# Debian packages in bin/deb/ (deploy/debian/README.md): the binaries of
# make build, with its version stamp, and the units and configuration
# examples of deploy/. nfpm, pinned in the script, is installed on first use.
package: build
	@VERSION='$(VERSION)' GO=$(GO) scripts/package.sh

# Everything: unit and integration tests (real etcd embedded on
# loopback), the race detector on every package that starts goroutines,
# every fuzz target for FUZZTIME and golangci-lint (go vet's analyzers
# among its checks); privileged tests (the lab in network namespaces)
# when this runs as root. scripts/test.sh runs
# the CPU-bound stages beside the lab and prints where the time went.
test: deps build
	@FUZZTIME=$(FUZZTIME) GO=$(GO) scripts/test.sh

# golangci-lint with .golangci.yml (installs the pinned version on first use).
lint:
	@GO=$(GO) scripts/lint.sh

# Each fuzz target for FUZZTIME, starting from its committed seed corpus.
fuzz:
	@scripts/fuzz-all.sh $(FUZZTIME)

# As root with BIRD and iproute2: the province in network namespaces (real
# routing, STB load, a failover drill). Otherwise: the loopback province.
demo: deps build
	@if [ "$$(id -u)" = 0 ] && command -v bird >/dev/null && command -v ip >/dev/null; then \
		bin/lab demo; \
	else \
		deploy/examples/loopback/demo.sh; \
	fi

demo-loopback: deps build
	@deploy/examples/loopback/demo.sh

bench:
	@scripts/bench.sh

# The whole province on one machine (root: the namespace lab): the etcd
# cluster, the center and the 16 city schedulers under synthetic sessions,
# sampled over time; writes its section and plot in docs/benchmarks.md.
# Never part of make test. ARGS=... passes flags (-sessions 3000000
# -duration 30m for the design's prime time).
bench-province: build
	$(GO) run ./bench/province -doc docs/benchmarks.md $(ARGS)

# Regenerate the protobuf code (protoc from Debian's protobuf-compiler; the
# plugins are pinned in go.mod as tools).
proto: deps
	@scripts/genproto.sh proto

# The operator console's screenshots in docs/img (console-*.png): the
# browser test, in headless Chromium, writes each page as it drives it.
screenshots: deps
	ANYSCHED_CONSOLE_SCREENSHOTS=$(CURDIR)/docs/img $(GO) test -count=1 -run 'TestConsoleInBrowser' ./internal/wiring/app/

clean:
	rm -rf $(BIN)

# CI's proof that scripts/install-deps.sh is complete: install-deps and make
# test in a fresh minimal Debian root made with debootstrap, which sees nothing
# installed on this machine by hand (as root; .ci/run runs it).
ci-cleanroot:
	@scripts/ci-cleanroot.sh
.PHONY: ci-cleanroot
