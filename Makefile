# MoteDB — the two user-facing commands:
#   make test    build everything from a fresh clone and run every test
#   make bench   run the default benchmarks and print the tables
# Other targets: deps, build, test-c, test-asan, test-fuzz, test-python, test-python-asan,
# bench-engine, bench-procs, bench-orm, bench-stores, bench-vectors, bench-text, bench-agents,
# bench-replication, bench-full, clean.

PYTHON ?= python3
VENV   := .venv
VPY    := $(VENV)/bin/python
MESON  := $(VENV)/bin/meson
NINJA  := $(VENV)/bin/ninja
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: all test deps build test-c test-asan test-fuzz test-python test-python-asan bench \
        bench-engine bench-procs bench-orm bench-stores bench-vectors bench-text bench-agents bench-replication \
        bench-full clean venv

FUZZ_TIME  ?= 20
# The Python suites on two workers (pytest-xdist), a test file per worker at a time:
# a file's tests share its fixtures and scratch directories.
PYTEST_JOBS ?= -n 2 --dist loadfile

all: build

$(VENV)/.ok:
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet meson meson-python ninja pytest pytest-asyncio hypothesis
	touch $@

venv: $(VENV)/.ok

# The frameworks motedb.integrations plugs into, for their tests (pinned).
INTEGRATIONS_REQ := tests/python/requirements-integrations.txt
$(VENV)/.integrations-ok: $(VENV)/.ok $(INTEGRATIONS_REQ)
	$(VPY) -m pip install --quiet -r $(INTEGRATIONS_REQ)
	touch $@

# pytest-xdist, for PYTEST_JOBS (its own stamp: a venv made before it was added gets it too)
$(VENV)/.xdist-ok: $(VENV)/.ok
	$(VPY) -m pip install --quiet pytest-xdist
	touch $@

build/build.ninja: $(VENV)/.ok
	$(MESON) setup build --buildtype=debugoptimized -Dwerror=true

build-asan/build.ninja: $(VENV)/.ok
	$(MESON) setup build-asan --buildtype=debug -Dwerror=true \
	    -Db_sanitize=address,undefined -Db_lundef=false

build: build/build.ninja
	$(NINJA) -C build

test-c: build
	$(PYTHON) tests/layers.py
	./build/tests/c/mote-tests
	bash tests/cli/run.sh build

test-asan: build-asan/build.ninja
	$(NINJA) -C build-asan
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	    MOTE_TEST_ASAN=1 ./build-asan/tests/c/mote-tests
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	    bash tests/cli/run.sh build-asan

# Builds and installs the motedb package into .venv (meson-python), then pytest.
test-python: $(VENV)/.integrations-ok $(VENV)/.xdist-ok
	$(VPY) -m pip install --quiet .
	$(VPY) -m pytest -q $(PYTEST_JOBS) tests/python

# The Python tests (all but those marked no_asan: the benchmark smoke tests and
# the million-object interrupt tests) against the extension built with ASan and UBSan, loaded into the ordinary interpreter (the sanitizer
# runtimes are preloaded; CPython's own allocations at exit are not leak-checked).
# --capture=sys leaves file descriptor 2 alone, so a sanitizer report is shown.
PYASAN_PKG := build-pyasan/pkg
test-python-asan: $(VENV)/.integrations-ok $(VENV)/.xdist-ok
	test -f build-pyasan/build.ninja || $(MESON) setup build-pyasan -Dpython=true -Dtools=false \
	    --buildtype=debug -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false
	$(NINJA) -C build-pyasan
	rm -rf $(PYASAN_PKG) && mkdir -p $(PYASAN_PKG)/motedb/integrations
	cp python/motedb/*.py python/motedb/py.typed build-pyasan/python/_core*.so $(PYASAN_PKG)/motedb/
	cp python/motedb/integrations/*.py $(PYASAN_PKG)/motedb/integrations/
	cd $(PYASAN_PKG) && PYTHONPATH=. PYTHONFAULTHANDLER=1 ASAN_OPTIONS=detect_leaks=0 \
	    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	    LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libubsan.so)" \
	    $(CURDIR)/$(VPY) -m pytest -q -p no:cacheprovider --capture=sys --rootdir=$(CURDIR) \
	    -m 'not no_asan' $(PYTEST_JOBS) $(CURDIR)/tests/python

# What make test needs besides a C compiler and Python (which make it run at
# all): clang and its libFuzzer runtime for the fuzzers. Debian's packages.
deps:
	@echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { return 0; }' | \
	    clang -fsanitize=fuzzer -x c - -o /dev/null 2>/dev/null || { \
	    echo "make: installing clang and libclang-rt-14-dev (the fuzzers need clang's libFuzzer)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang libclang-rt-14-dev; }

# The libFuzzer targets (tests/fuzz/meson.build), built by meson with clang;
# the library's code is instrumented for coverage (fuzzer-no-link) and ASan/UBSan.
build-fuzz/build.ninja: $(VENV)/.ok | deps
	CC=clang $(MESON) setup build-fuzz -Dfuzz=true -Dtools=false --buildtype=debug \
	    -Doptimization=1 -Db_sanitize=address,undefined -Db_lundef=false \
	    -Dc_args='-fsanitize=fuzzer-no-link -fno-sanitize-recover=undefined'

# A short run of each fuzzer on a scratch copy of the committed corpus.
test-fuzz: build-fuzz/build.ninja
	$(NINJA) -C build-fuzz
	rm -rf build-fuzz/corpus && cp -r tests/fuzz/corpus build-fuzz/corpus
	@for f in file api json match delta; do \
	    ./build-fuzz/tests/fuzz/fuzz_$$f -max_total_time=$(FUZZ_TIME) -timeout=10 -rss_limit_mb=2048 \
	        -artifact_prefix=build-fuzz/ build-fuzz/corpus/$$f > build-fuzz/fuzz_$$f.log 2>&1 \
	    || { tail -60 build-fuzz/fuzz_$$f.log; echo "fuzz_$$f FAILED"; exit 1; }; \
	    echo "fuzz_$$f: $$(grep -E '^Done' build-fuzz/fuzz_$$f.log), no crash"; \
	done

test: deps test-c test-asan test-fuzz test-python test-python-asan

# Quick benchmarks (a few minutes on 2 cores); bench-full runs everything.
bench: bench-engine bench-procs bench-orm bench-stores bench-vectors bench-text bench-agents bench-replication

bench-engine: $(VENV)/.ok
	bash bench/engine/run.sh

bench-procs: $(VENV)/.ok
	bash bench/engine/run.sh --procs

bench-orm:
	$(PYTHON) -m bench.orm --profile quick

bench-stores:
	$(PYTHON) -m bench.stores --workload small
	$(PYTHON) -m bench.stores --workload large

bench-vectors:
	$(PYTHON) -m bench.vectors --quick

bench-text:
	$(PYTHON) -m bench.text --quick

bench-agents:
	$(PYTHON) -m bench.agents --quick

bench-replication:
	$(PYTHON) -m bench.replication --quick

bench-full: bench-engine bench-procs
	$(PYTHON) -m bench.orm --profile full
	$(PYTHON) -m bench.stores --workload small --full
	$(PYTHON) -m bench.stores --workload large --full
	$(PYTHON) -m bench.vectors --full
	$(PYTHON) -m bench.text --full
	$(PYTHON) -m bench.agents --full
	$(PYTHON) -m bench.replication --full

clean:
	rm -rf build build-asan build-bench build-fuzz build-pyasan
