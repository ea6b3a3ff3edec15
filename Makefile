# torchclad — developer entry points.  `make demo`, `make test`; see README.md.
#
# `make install` is idempotent: it re-runs pip only when the packaging, a kernel, the runtime,
# the engine or the build code changed (stamp file in .venv/). The build compiles its
# extensions and their sources in parallel (TORCHCLAD_BUILD_JOBS=1: one at a time).

SHELL        := /bin/bash
PYTHON       ?= python3
VENV         := .venv
PY           := $(VENV)/bin/python
PIP          := $(PY) -m pip
TORCH_VERSION := 2.13.0

DEPS_STAMP    := $(VENV)/.torchclad-deps.stamp
INSTALL_STAMP := $(VENV)/.torchclad-install.stamp

# Everything torchclad._C is generated or compiled from.
BUILD_INPUTS := pyproject.toml setup.py torchclad/builtin/registry.py \
  $(shell find csrc torchclad/engine torchclad/toolchain -type f \
      \( -name '*.py' -o -name '*.cpp' -o -name '*.cc' -o -name '*.h' -o -name '*.hpp' \) \
      -not -path '*/__pycache__/*' 2>/dev/null | LC_ALL=C sort)

.PHONY: install test demo bench clean distclean FORCE

install: $(INSTALL_STAMP)

$(PY):
	$(PYTHON) -m venv $(VENV)

# torch first, pinned, so that pip never picks a torch itself; then the build dependencies
# (the package is installed without build isolation).
$(DEPS_STAMP): | $(PY)
	$(PIP) install "torch==$(TORCH_VERSION)"
	$(PIP) install setuptools wheel pybind11 libclang numpy
	touch $@

# Rebuild if the extension went missing (e.g. deleted by hand) while the engine is present.
ifneq ($(wildcard torchclad/engine/__init__.py),)
ifeq ($(wildcard torchclad/_C*.so),)
$(INSTALL_STAMP): FORCE
endif
endif

$(INSTALL_STAMP): $(DEPS_STAMP) $(BUILD_INPUTS)
	$(PIP) install --no-build-isolation -e ".[test,bench]"
	touch $@

# One pytest worker per core (pytest-xdist), each test file whole on one worker: its
# module-level fixtures (compiled kernels) are built once. TEST_JOBS=0 runs in this process.
TEST_JOBS ?= $(shell nproc 2>/dev/null || echo 1)

test: install
	$(PY) -m pytest -q -n $(TEST_JOBS) --dist loadfile tests

demo: install
	$(PY) -m torchclad.demo

# pytest exits 5 when it collects nothing: tolerated here only (benchmarks/ may be empty).
bench: install
	@if [ ! -d benchmarks ]; then echo "make bench: no benchmarks/ directory, nothing to run"; exit 0; fi; \
	rc=0; $(PY) -m pytest -q benchmarks --benchmark-only || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make bench: no benchmarks collected"; exit 0; fi; \
	exit $$rc

clean:
	rm -rf build dist *.egg-info torchclad/_generated torchclad/include .pytest_cache
	rm -f torchclad/_C*.so $(INSTALL_STAMP)
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) .hypothesis .benchmarks

FORCE:
