# MoteDB — the two user-facing commands:
#   make test    build everything from a fresh clone and run every test
#   make bench   run the default benchmarks and print the tables
# Other targets: build, test-c, test-asan, test-python, bench-engine, clean.

PYTHON ?= python3
VENV   := .venv
VPY    := $(VENV)/bin/python
MESON  := $(VENV)/bin/meson
NINJA  := $(VENV)/bin/ninja
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: all test build test-c test-asan test-python bench bench-engine clean venv

all: build

$(VENV)/.ok:
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet meson ninja pytest hypothesis
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
	./build/tests/c/mote-tests

test-asan: build-asan/build.ninja
	$(NINJA) -C build-asan
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	    MOTE_TEST_ASAN=1 ./build-asan/tests/c/mote-tests

test-python: $(VENV)/.ok
	@if ls tests/python/test_*.py >/dev/null 2>&1; then \
	    $(VPY) -m pytest -q tests/python; \
	else echo "no Python tests yet"; fi

test: test-c test-asan test-python

bench: bench-engine

bench-engine: $(VENV)/.ok
	bash bench/engine/run.sh

clean:
	rm -rf build build-asan build-bench
