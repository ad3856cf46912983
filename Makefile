# Mooring — the two commands: `make run` and `make test`. Each installs the missing Debian packages
# it needs first (scripts/install-deps.sh: build and run; test adds the test extras, bench the
# load tools), so a fresh Debian 12 machine needs nothing else.
BUILD_TEST    ?= build/test
BUILD_RELEASE ?= build/release
JOBS          ?= $(shell nproc)
CTEST_JOBS    ?= 2
MOORING_DATA  ?= $(CURDIR)/.mooring

CMAKE_COMMON := -G Ninja -DCMAKE_EXPORT_COMPILE_COMMANDS=ON

# ccache: paths under this checkout are hashed relative to it and the build directory is not
# hashed, so a clean clone (the CI check) or a worktree anywhere reuses what another compiled
# (Debug objects carry -g1; without these every other directory missed the cache).
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := true

.PHONY: all deps test-deps lint-deps bench-deps build test run run-ha bench compose-test chaos config-docs format format-check lint clean

all: build

deps:
	@./scripts/install-deps.sh build run

test-deps:
	@./scripts/install-deps.sh build run test

lint-deps:
	@./scripts/install-deps.sh build run test lint

bench-deps:
	@./scripts/install-deps.sh build run bench

# Release binaries: the local stack and the benchmarks.
build: deps
	@cmake -S . -B $(BUILD_RELEASE) $(CMAKE_COMMON) -DCMAKE_BUILD_TYPE=Release -DMOORING_TESTS=OFF >/dev/null
	@cmake --build $(BUILD_RELEASE) -j $(JOBS)

# Debug + ASan/UBSan, warnings as errors, then the whole suite; ends in ctest's summary line. With
# the chaos checker's deliberate claim bugs (docs/chaos.md), which its chaos_switch_* tests turn on.
test: test-deps
	@cmake -S . -B $(BUILD_TEST) $(CMAKE_COMMON) -DCMAKE_BUILD_TYPE=Debug -DMOORING_SANITIZE=ON -DMOORING_TESTS=ON \
	  -DMOORING_FAULT_SWITCHES=ON >/dev/null
	@cmake --build $(BUILD_TEST) -j $(JOBS)
	@# handle_sigill: GCC's trap for a coroutine resumed in an invalid state is ud2 (SIGILL), which
	@# ASan otherwise lets kill a process without a word.
	@cd $(BUILD_TEST) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:handle_sigill=1 \
	  ctest --output-on-failure -j $(CTEST_JOBS) --timeout 300

run: build
	@MOORING_BIN=$(CURDIR)/$(BUILD_RELEASE) MOORING_DATA=$(MOORING_DATA) ./scripts/run-local.sh

# Three etcd members, three control planes (one leader), one node agent: scripts/run-ha.sh.
run-ha: build
	@MOORING_BIN=$(CURDIR)/$(BUILD_RELEASE) MOORING_DATA=$${MOORING_DATA:-$(CURDIR)/.mooring-ha} ./scripts/run-ha.sh

bench: bench-deps
	@cmake -S . -B $(BUILD_RELEASE) $(CMAKE_COMMON) -DCMAKE_BUILD_TYPE=Release -DMOORING_TESTS=OFF -DMOORING_BENCH=ON >/dev/null
	@cmake --build $(BUILD_RELEASE) -j $(JOBS)
	@MOORING_BIN=$(CURDIR)/$(BUILD_RELEASE) ./scripts/run-bench.sh

# The compose stack for real under dockerd (tests/compose/run.sh): images built, the walkthrough,
# an agent and an HA leader kill -9'd, `down` leaving nothing. Not in `make test`: the images' own
# Release build alone takes most of an hour on 2 cores (docker/README.md has the times).
compose-test:
	@./tests/compose/run.sh

# Claim safety under partitions (docs/chaos.md): the Release binaries in network namespaces under a
# seeded fault schedule, then the checker. Needs root and etcd. Replay a run with its SEED.
DURATION ?= 600
SEED      ?= $(shell date +%s)
chaos: test-deps build
	@/usr/bin/python3 tests/chaos/chaos.py --build $(BUILD_RELEASE) --duration $(DURATION) --seed $(SEED)

# docs/configuration/*.md from the binaries' own flag tables (--help-markdown); the ctest
# configuration_pages fails while a page and its binary disagree.
config-docs: build
	@/usr/bin/python3 tests/docs/config_pages.py --root . --bin $(BUILD_RELEASE) --write

# Style by the tool (.clang-format, clang-format 14): `format` rewrites the product files,
# `format-check` only reports (the ctest format_check runs the same check in `make test`).
format: test-deps
	@./scripts/source-files.sh | xargs clang-format -i

format-check: test-deps
	@./tests/format/check_format.sh .

# clang-tidy (.clang-tidy) over the product files with the test build's compile commands (it
# needs the generated protobuf headers, so the test build is configured and its protos built
# first). Not part of `make test`: on two cores it takes far longer than the build's other
# checks (docs/engineering-notes.md, "Format and lint").
lint: lint-deps
	@cmake -S . -B $(BUILD_TEST) $(CMAKE_COMMON) -DCMAKE_BUILD_TYPE=Debug -DMOORING_SANITIZE=ON -DMOORING_TESTS=ON >/dev/null
	@cmake --build $(BUILD_TEST) -j $(JOBS) --target mooring_proto
	@./scripts/source-files.sh | grep '\.cpp$$' | xargs -P $(JOBS) -n 8 clang-tidy -p $(BUILD_TEST) --quiet

clean:
	rm -rf build
