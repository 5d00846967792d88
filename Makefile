# gpuforge: `make demo` runs the whole job on the built-in lab; `make test` runs every test.
SHELL := /bin/bash
.ONESHELL:
.SHELLFLAGS := -eu -o pipefail -c

VENV := $(CURDIR)/.venv
# The oldest ansible-core gpuforge.cluster supports (meta/runtime.yml; requirements/ansible-oldest.txt); .venv holds
# the project's pin. The newest (requirements/ansible-newest.txt) needs Python >= 3.12: its venv is in a Debian 13
# userland (scripts/setup_newest_ansible.sh), where scripts/in_newest.sh runs make unit-newest and make sanity-newest.
OLDEST_VENV := $(CURDIR)/.venv-ansible-oldest
NEWEST_VENV := $(CURDIR)/.gpuforge/ansible-newest/venv
VERSION := $(shell sed -n 's/^version = "\([^"]*\)"/\1/p' pyproject.toml)
export PATH := $(VENV)/bin:$(PATH)
export CONTAINERS_CONF := $(CURDIR)/.gpuforge/containers.conf
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export PYTHONUNBUFFERED := 1

SCENARIOS ?= $(shell grep -v "^\#" molecule/ci-scenarios.txt)
PY_PATHS := src module_utils library doc_fragments action_plugins lookup_plugins callback_plugins filter_plugins lab/sim lab/image/overlay/usr/local/lib benchmarks tests molecule roles/node_health/files

.PHONY: setup setup-extra demo test lint unit unit-torch unit-oldest unit-newest collection sanity sanity-oldest sanity-newest ee molecule smoke \
	lab-prepare bench-toolkit clean help

help:
	@echo "make setup | demo | test (lint unit-torch unit-newest unit-oldest sanity-oldest sanity-newest ee molecule smoke) | lint | unit | unit-torch | unit-oldest | unit-newest | collection | sanity | sanity-oldest | sanity-newest | ee | molecule [SCENARIOS='a b'] | smoke | bench-toolkit | clean"

# make test's stages run setup once (the doctor starts containers): the stages it starts skip it.
setup:
	@if [[ -n "$${GPUFORGE_SETUP_DONE:-}" ]]; then exit 0; fi
	bash scripts/setup.sh
	gpuforge doctor

# In make test: the oldest and newest ansible-core's environments and Python 3.9 (scripts/setup.sh extra), installed
# beside lab-prepare; the stages that use them wait for it (EXTRA_AFTER=setup-extra).
setup-extra:
	bash scripts/setup.sh extra
EXTRA_AFTER ?=

demo: setup
	gpuforge demo

# The critical path is the lab image and mirror (lab-prepare), then the Molecule lanes: mostly waiting on podman,
# systemd and apt, but slowed by every process that competes with their ansible-playbook runs for the two cores (a
# run of 2026-12-02 at CPU load 12: lanes 1.5x their quiet times). Everything else runs beside them from the start,
# at a lower CPU priority (BACKGROUND: scripts/background.sh, a control group with nice 10's CPU weight, since nice
# alone does not reach across the lab containers' control groups): the lint, the unit suites and ansible-test sanity
# take the CPU the lanes leave idle, and the lanes no longer wait for the lint. The unit suite runs on the newest and
# on the oldest supported ansible-core side by side (each 7-8 min alone on 2 cores, one process each): beside the
# lanes they get little CPU, and once the lanes are done the two use both cores (one after the other, the second
# left one core idle for 7 min at the end of the CI run of 2026-12-05). The project's own pin (.venv, between those
# two) runs the lint, Molecule, the smoke test and the one test file the other two leave out (unit-torch); a third
# whole suite does not fit CI's 60 minutes. ansible-test sanity runs on the oldest and the newest, not on the pin
# between them too: the whole CI is CPU-bound, and a fresh-clone run took 91 minutes on the slower 2-core machine of
# 2026-12-05. Sanity on the newest queues behind the oldest (their caches are apart, but two sanity runs at once would slow
# the lanes). The smoke test waits for the lanes (SMOKE_AFTER, below) and fills the cores the unit suites leave then.
test:
	@if [[ -z "$${GPUFORGE_SETUP_DONE:-}" ]]; then bash scripts/setup.sh core && gpuforge doctor; fi
	export GPUFORGE_SETUP_DONE=1
	$(MAKE) --no-print-directory -j 8 setup-extra lab-prepare molecule lint unit-torch unit-newest unit-oldest \
		ee sanity-oldest sanity-newest smoke BACKGROUND="bash scripts/background.sh" \
		SANITY_NEWEST_AFTER=sanity-oldest SMOKE_AFTER=molecule EXTRA_AFTER=setup-extra
	@echo "make test: all stages passed"

# What `make test` runs beside the Molecule lanes gets BACKGROUND (scripts/background.sh there) before its commands (not
# vermin's: a few seconds, and tests/unit/test_target_python.py reads that line as it is).
BACKGROUND ?=

lint: setup
	$(BACKGROUND) ruff check $(PY_PATHS)
	$(BACKGROUND) ruff format --check $(PY_PATHS)
	vermin --no-config-file --no-tips --violations --target=3.8- module_utils library roles/node_health/files
	$(BACKGROUND) yamllint --strict .
	$(BACKGROUND) ansible-lint --profile production -q

# The whole unit suite on the project's pin (.venv): what a developer runs.
unit: setup
	$(BACKGROUND) pytest -q -m "not lab" tests

# The ResNet-50 trainer's tests: they need the project venv's torch and no ansible-core, so unit-oldest and unit-newest
# leave them out and make test runs them here.
unit-torch: setup
	$(BACKGROUND) pytest -q -m "not lab" -p no:cacheprovider tests/unit/benchmarks/test_resnet50_bench.py

# The unit suite on the oldest supported ansible-core (.venv-ansible-oldest first on PATH: its ansible-playbook,
# ansible-doc and ansible-galaxy too), on the control machine with all of its tools. The ResNet-50 trainer's tests
# need torch and no ansible-core: unit and unit-torch run them. 7 min alone on 2 cores (2026-12-03). UNIT_OLDEST_AFTER
# queues it behind another target.
UNIT_OLDEST_AFTER ?=
unit-oldest: setup $(UNIT_OLDEST_AFTER) $(EXTRA_AFTER)
	export PATH=$(OLDEST_VENV)/bin:$$PATH
	$(BACKGROUND) pytest -q -m "not lab" -p no:cacheprovider --ignore=tests/unit/benchmarks/test_resnet50_bench.py tests

# The same selection on the newest supported ansible-core, in its Debian 13 userland (Python 3.13; NEWEST_VENV first
# on PATH there). make test starts it beside the Molecule lanes and unit-oldest. 7 min alone on 2 cores
# (2026-12-04; 13 min beside another make test). Tools the userland lacks (chromium, rpmbuild, fio, runc, ssh-keygen,
# the SELinux and MPI tool chains) skip their tests there (45 skipped); unit-oldest runs them on the control machine.
unit-newest: setup $(EXTRA_AFTER)
	$(BACKGROUND) bash scripts/in_newest.sh unit \
		pytest -q -m "not lab" -p no:cacheprovider --ignore=tests/unit/benchmarks/test_resnet50_bench.py tests

# The gpuforge.cluster collection tarball in dist/, installed in build/installed (docs/development.md).
collection: setup
	$(BACKGROUND) bash scripts/build_collection.sh

# ansible-test sanity on the built collection, no ignore file, on the project's pin (a developer's run; make test runs
# sanity-oldest and sanity-newest).
sanity: collection
	$(BACKGROUND) bash scripts/sanity.sh

# The same tarball installed by the oldest ansible-core's ansible-galaxy, and its ansible-test sanity. It shares
# ansible-test's cached virtual environments (~/.ansible/test/venv) with make sanity: run the two one after the other.
sanity-oldest: collection $(EXTRA_AFTER)
	rm -rf build/installed-oldest
	$(BACKGROUND) $(OLDEST_VENV)/bin/ansible-galaxy collection install dist/gpuforge-cluster-$(VERSION).tar.gz -p build/installed-oldest --no-deps --force
	GPUFORGE_ANSIBLE_VENV=$(OLDEST_VENV) GPUFORGE_INSTALLED=$(CURDIR)/build/installed-oldest $(BACKGROUND) bash scripts/sanity.sh

# The tarball installed by the newest supported ansible-core's ansible-galaxy (2.21 refuses a collection whose
# requires_ansible leaves it out) and its ansible-test sanity, in the Debian 13 userland on its Python 3.13. Its
# ansible-test environments are cached apart from the host's (HOME in .gpuforge/ansible-newest/home).
SANITY_NEWEST_AFTER ?=
sanity-newest: collection $(SANITY_NEWEST_AFTER) $(EXTRA_AFTER)
	rm -rf build/installed-newest
	$(BACKGROUND) bash scripts/in_newest.sh sanity \
		ansible-galaxy collection install dist/gpuforge-cluster-$(VERSION).tar.gz -p build/installed-newest --no-deps --force
	$(BACKGROUND) bash scripts/in_newest.sh sanity env GPUFORGE_ANSIBLE_VENV=$(NEWEST_VENV) \
		GPUFORGE_INSTALLED=$(CURDIR)/build/installed-newest bash scripts/sanity.sh

# The AWX/AAP execution environment's build context (checks execution-environment.yml against ansible-builder).
ee: collection
	$(BACKGROUND) ansible-builder create -f execution-environment.yml --context build/ee

lab-prepare: setup
	gpuforge lab prepare > .gpuforge/lab-image-tag

molecule: lab-prepare
	export GPUFORGE_LAB_IMAGE=$$(tail -n 1 .gpuforge/lab-image-tag)
	bash scripts/molecule_lanes.sh $(SCENARIOS)

# In make test it runs after the Molecule lanes (SMOKE_AFTER=molecule). Beside them, at the background's CPU weight,
# its workload image build (nvcc inside podman build) ran past its 30-minute limit and the lab's doctor checks failed
# under the load (fresh-clone run of 2026-12-05 07:46); before, the smoke test spent the lanes rebuilding the lab
# image (da42558) and so ran its own tests after them by accident.
SMOKE_AFTER ?=
smoke: setup $(SMOKE_AFTER)
	$(BACKGROUND) pytest -q -m lab tests/lab

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
