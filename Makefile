# gpuforge: `make demo` runs the whole job on the built-in lab; `make test` runs every test.
SHELL := /bin/bash
.ONESHELL:
.SHELLFLAGS := -eu -o pipefail -c

VENV := $(CURDIR)/.venv
# The oldest ansible-core gpuforge.cluster supports (meta/runtime.yml; requirements/ansible-oldest.txt); .venv holds
# the newest (the project's pin).
OLDEST_VENV := $(CURDIR)/.venv-ansible-oldest
VERSION := $(shell sed -n 's/^version = "\([^"]*\)"/\1/p' pyproject.toml)
export PATH := $(VENV)/bin:$(PATH)
export CONTAINERS_CONF := $(CURDIR)/.gpuforge/containers.conf
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export PYTHONUNBUFFERED := 1

SCENARIOS ?= $(shell grep -v "^\#" molecule/ci-scenarios.txt)
PY_PATHS := src module_utils library doc_fragments action_plugins lookup_plugins callback_plugins filter_plugins lab/sim lab/image/overlay/usr/local/lib benchmarks tests molecule

.PHONY: setup demo test lint unit unit-oldest collection sanity sanity-oldest ee molecule smoke lab-prepare bench-toolkit clean help

help:
	@echo "make setup | demo | test (lint unit sanity ee molecule unit-oldest sanity-oldest smoke) | lint | unit | unit-oldest | collection | sanity | sanity-oldest | ee | molecule [SCENARIOS='a b'] | smoke | bench-toolkit | clean"

setup:
	@bash scripts/setup.sh
	gpuforge doctor

demo: setup
	gpuforge demo

# The lab image and mirror build (mostly downloads) beside the lint; the unit tests and ansible-test sanity
# (CPU-bound) beside the Molecule lanes (mostly waiting on podman, systemd and apt): CI stays under an hour on
# two cores. Sanity on the oldest supported ansible-core queues behind them (4 at a time), beside the lanes too.
# The unit suite on the oldest (make unit-oldest, 13 min alone; it no longer hangs since the floor is 2.19.4) is
# left out: beside the unit suite and the 21 Molecule lanes it took CI past an hour (a run of 2026-12-02: CPU load
# 12 on the two cores, lanes 1.5x their quiet times). Run it by hand before changing the ansible-core range.
test: setup
	$(MAKE) --no-print-directory -j 2 lint lab-prepare
	$(MAKE) --no-print-directory -j 4 unit sanity ee molecule sanity-oldest
	$(MAKE) --no-print-directory smoke
	@echo "make test: all stages passed"

lint: setup
	ruff check $(PY_PATHS)
	ruff format --check $(PY_PATHS)
	vermin --no-config-file --no-tips --violations --target=3.8- module_utils library
	yamllint --strict .
	ansible-lint --profile production -q

unit: setup
	pytest -q -m "not lab" tests

# The unit suite on the oldest supported ansible-core (.venv-ansible-oldest first on PATH: its ansible-playbook,
# ansible-doc and ansible-galaxy too). The ResNet-50 trainer's tests need torch and no ansible-core: unit runs them.
unit-oldest: setup
	export PATH=$(OLDEST_VENV)/bin:$$PATH
	pytest -q -m "not lab" -p no:cacheprovider --ignore=tests/unit/benchmarks/test_resnet50_bench.py tests

# The gpuforge.cluster collection tarball in dist/, installed in build/installed (docs/development.md).
collection: setup
	bash scripts/build_collection.sh

# ansible-test sanity on the built collection, no ignore file.
sanity: collection
	bash scripts/sanity.sh

# The same tarball installed by the oldest ansible-core's ansible-galaxy, and its ansible-test sanity. After sanity:
# both create ansible-test's cached virtual environments (~/.ansible/test/venv), which two runs must not build at once.
sanity-oldest: collection sanity
	rm -rf build/installed-oldest
	$(OLDEST_VENV)/bin/ansible-galaxy collection install dist/gpuforge-cluster-$(VERSION).tar.gz -p build/installed-oldest --no-deps --force
	GPUFORGE_ANSIBLE_VENV=$(OLDEST_VENV) GPUFORGE_INSTALLED=$(CURDIR)/build/installed-oldest bash scripts/sanity.sh

# The AWX/AAP execution environment's build context (checks execution-environment.yml against ansible-builder).
ee: collection
	ansible-builder create -f execution-environment.yml --context build/ee

lab-prepare: setup
	gpuforge lab prepare > .gpuforge/lab-image-tag

molecule: lab-prepare
	export GPUFORGE_LAB_IMAGE=$$(tail -n 1 .gpuforge/lab-image-tag)
	bash scripts/molecule_lanes.sh $(SCENARIOS)

smoke: setup
	pytest -q -m lab tests/lab

# The toolkit's own speed on fresh labs (takes the lab down and rebuilds it; not part of make test):
# make bench-toolkit [BENCH_GPUS="1 4 8 16"] [BENCH_RUNS=3] [BENCH_REPEATS=1]. Results: docs/performance.md.
BENCH_GPUS ?= 1 4
BENCH_RUNS ?= 3
BENCH_REPEATS ?= 1
bench-toolkit: setup
	python benchmarks/toolkit/bench_toolkit.py --gpus $(BENCH_GPUS) --runs $(BENCH_RUNS) --repeats $(BENCH_REPEATS) --docs

clean:
	-gpuforge lab down
	rm -rf .gpuforge/lab/build artifacts build dist
