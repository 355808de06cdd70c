# MoteDB — the two user-facing commands:
#   make test    build everything from a fresh clone and run every test
#   make bench   run the default benchmarks and print the tables
# Other targets: build, test-c, test-asan, test-fuzz, test-python, test-python-asan,
# bench-engine, bench-orm, bench-stores, bench-full, clean.

PYTHON ?= python3
VENV   := .venv
VPY    := $(VENV)/bin/python
MESON  := $(VENV)/bin/meson
NINJA  := $(VENV)/bin/ninja
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: all test build test-c test-asan test-fuzz test-python test-python-asan bench \
        bench-engine bench-orm bench-stores bench-full clean venv

# libFuzzer targets, built with clang (Debian's clang + libclang-rt-14-dev).
FUZZ_FLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
              -D_GNU_SOURCE -Iinclude -Isrc -Itests/c
FUZZ_LIB   := $(wildcard src/*.c) tests/c/memio.c
FUZZ_TIME  ?= 20

all: build

$(VENV)/.ok:
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet meson meson-python ninja pytest hypothesis
	touch $@

venv: $(VENV)/.ok

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
test-python: $(VENV)/.ok
	$(VPY) -m pip install --quiet .
	$(VPY) -m pytest -q tests/python

# The Python tests (not the benchmark smoke tests) against the extension built
# with ASan and UBSan, loaded into the ordinary interpreter (the sanitizer
# runtimes are preloaded; CPython's own allocations at exit are not leak-checked).
# --capture=sys leaves file descriptor 2 alone, so a sanitizer report is shown.
PYASAN_PKG := build-pyasan/pkg
test-python-asan: $(VENV)/.ok
	test -f build-pyasan/build.ninja || $(MESON) setup build-pyasan -Dpython=true -Dtools=false \
	    --buildtype=debug -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false
	$(NINJA) -C build-pyasan
	rm -rf $(PYASAN_PKG) && mkdir -p $(PYASAN_PKG)/motedb
	cp python/motedb/*.py python/motedb/py.typed build-pyasan/python/_core*.so $(PYASAN_PKG)/motedb/
	cd $(PYASAN_PKG) && PYTHONPATH=. PYTHONFAULTHANDLER=1 ASAN_OPTIONS=detect_leaks=0 \
	    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	    LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libubsan.so)" \
	    $(CURDIR)/$(VPY) -m pytest -q -p no:cacheprovider --capture=sys --rootdir=$(CURDIR) \
	    $(CURDIR)/tests/python/test_motedb_api.py $(CURDIR)/tests/python/test_motedb_threads.py \
	    $(CURDIR)/tests/python/test_motedb_relations.py $(CURDIR)/tests/python/test_motedb_model.py \
	    $(CURDIR)/tests/python/test_motedb_docs.py $(CURDIR)/tests/python/test_motedb_asan.py \
	    $(CURDIR)/tests/python/test_motedb_json.py $(CURDIR)/tests/python/test_motedb_errors.py \
	    $(CURDIR)/tests/python/test_motedb_schema.py $(CURDIR)/tests/python/test_motedb_trial.py

build-fuzz/%: tests/fuzz/%.c $(FUZZ_LIB) $(wildcard src/*.h) tests/c/memio.h
	@command -v clang >/dev/null || { apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang libclang-rt-14-dev; }
	@mkdir -p build-fuzz
	clang $(FUZZ_FLAGS) $(FUZZ_LIB) $< -lpthread -o $@

# A short run of each fuzzer on a scratch copy of the committed corpus.
test-fuzz: build-fuzz/fuzz_file build-fuzz/fuzz_api
	rm -rf build-fuzz/corpus && cp -r tests/fuzz/corpus build-fuzz/corpus
	@for f in file api; do \
	    ./build-fuzz/fuzz_$$f -max_total_time=$(FUZZ_TIME) -timeout=10 -rss_limit_mb=2048 \
	        -artifact_prefix=build-fuzz/ build-fuzz/corpus/$$f > build-fuzz/fuzz_$$f.log 2>&1 \
	    || { tail -60 build-fuzz/fuzz_$$f.log; echo "fuzz_$$f FAILED"; exit 1; }; \
	    echo "fuzz_$$f: $$(grep -E '^Done' build-fuzz/fuzz_$$f.log), no crash"; \
	done

test: test-c test-asan test-fuzz test-python test-python-asan

# Quick benchmarks (a few minutes on 2 cores); bench-full runs everything.
bench: bench-engine bench-orm bench-stores

bench-engine: $(VENV)/.ok
	bash bench/engine/run.sh

bench-orm:
	$(PYTHON) -m bench.orm --profile quick

bench-stores:
	$(PYTHON) -m bench.stores --workload small
	$(PYTHON) -m bench.stores --workload large

bench-full: bench-engine
	$(PYTHON) -m bench.orm --profile full
	$(PYTHON) -m bench.stores --workload small --full
	$(PYTHON) -m bench.stores --workload large --full

clean:
	rm -rf build build-asan build-bench build-fuzz build-pyasan
