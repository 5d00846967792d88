# gpuforge: `make demo` runs the whole job on the built-in lab; `make test` runs every test.
SHELL := /bin/bash
.ONESHELL:
.SHELLFLAGS := -eu -o pipefail -c

VENV := $(CURDIR)/.venv
export PATH := $(VENV)/bin:$(PATH)
export CONTAINERS_CONF := $(CURDIR)/.gpuforge/containers.conf
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export PYTHONUNBUFFERED := 1

SCENARIOS ?= $(shell grep -v "^\#" molecule/ci-scenarios.txt)
PY_PATHS := src module_utils library filter_plugins lab/sim lab/image/overlay/usr/local/lib benchmarks tests molecule

.PHONY: setup demo test lint unit molecule smoke lab-prepare clean help

help:
	@echo "make setup | demo | test (lint unit molecule smoke) | lint | unit | molecule [SCENARIOS='a b'] | smoke | clean"

setup:
	@bash scripts/setup.sh
	gpuforge doctor

demo: setup
	gpuforge demo

test: setup lint unit molecule smoke
	@echo "make test: all stages passed"

lint: setup
	ruff check $(PY_PATHS)
	ruff format --check $(PY_PATHS)
	vermin --no-config-file --no-tips --violations --target=3.8- module_utils library
	yamllint --strict .
	ansible-lint --profile production -q

unit: setup
	pytest -q -m "not lab" tests

lab-prepare: setup
	gpuforge lab prepare > .gpuforge/lab-image-tag

molecule: lab-prepare
	export GPUFORGE_LAB_IMAGE=$$(tail -n 1 .gpuforge/lab-image-tag)
	bash scripts/molecule_lanes.sh $(SCENARIOS)

smoke: setup
	pytest -q -m lab tests/lab

clean:
	-gpuforge lab down
	rm -rf .gpuforge/lab/build artifacts
