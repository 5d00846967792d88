#!/usr/bin/env bash
# The newest ansible-core gpuforge.cluster supports (meta/runtime.yml's requires_ansible), for make unit-newest and
# make sanity-newest. ansible-core 2.20 and later declare Requires-Python >=3.12; the control machine is Debian 12
# (Python 3.11), so that release runs in a Debian 13 (trixie) userland with trixie's Python 3.13:
# - .gpuforge/ansible-newest/rootfs, a link to the machine's shared copy (cache_dir below): debootstrap
#   --variant=minbase of trixie from deb.debian.org (signatures checked against the Debian archive keyring) with
#   python3, python3-venv, git (ansible-test lists a collection's files with git), ca-certificates and the tools named
#   below; nothing is installed into the host system. packages.txt beside it lists what it holds (trixie's current
#   point release: the suite is not frozen, the Python line is checked).
# - .gpuforge/ansible-newest/venv: made by that Python inside the userland (scripts/in_newest.sh runs commands there
#   in a podman container, this checkout mounted at its own path): every package pinned in
#   requirements/ansible-newest.txt, gpuforge itself from the checkout.
# Each part is rebuilt only when its inputs change (the stamp files beside them); a run with nothing to do takes a
# second. Usage: setup_newest_ansible.sh (scripts/setup.sh runs it).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STATE=$ROOT/.gpuforge/ansible-newest
ROOTFS=$STATE/rootfs
VENV=$STATE/venv
REQUIREMENTS=$ROOT/requirements/ansible-newest.txt
SUITE=trixie
MIRROR=http://deb.debian.org/debian
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
PACKAGES=python3,python3-venv,git,ca-certificates
# What tests of the unit suite need and fail without (they do not skip): gcc and the C library headers (the lab
# mirror's CUDA link stubs, tests/unit/lab/test_toolchain.py) and promtool (prometheus: the alert rules and metrics
# of tests/unit/roles/gpu_monitoring and tests/unit/node_health). The other tools of scripts/setup.sh (chromium,
# rpmbuild, fio, the SELinux and MPI tool chains, runc) are left out: their tests skip here, and make unit and
# make unit-oldest run them on the control machine.
PACKAGES+=,gcc,libc6-dev,prometheus
# trixie's python3 is CPython 3.13; the check below fails the set-up if the suite ever brings another one.
PYTHON_VERSION=3.13
export CONTAINERS_CONF=${CONTAINERS_CONF:-$ROOT/.gpuforge/containers.conf}

die() { echo "gpuforge setup (newest ansible-core): $*" >&2; exit 1; }

# The userland is shared by every checkout on the machine (CI's fresh clones too): it is built once per input hash
# in GPUFORGE_CACHE_DIR (default /var/cache/gpuforge, or ~/.cache/gpuforge for a user who cannot write there) and
# .gpuforge/ansible-newest/rootfs links to it. It is read-only to its users (scripts/in_newest.sh mounts it so).
cache_dir() {
  if [[ -n ${GPUFORGE_CACHE_DIR:-} ]]; then echo "$GPUFORGE_CACHE_DIR"
  elif [[ -w /var/cache ]]; then echo /var/cache/gpuforge
  else echo "${XDG_CACHE_HOME:-$HOME/.cache}/gpuforge"; fi
}

build_rootfs() {
  local want shared new
  want=$(echo "$SUITE $MIRROR $PACKAGES $PYTHON_VERSION" | sha256sum | cut -d' ' -f1)
  shared=$(cache_dir)/ansible-newest-rootfs-${want:0:16}
  if [[ -x $ROOTFS/usr/bin/python3 && -f $STATE/rootfs.stamp && $(cat "$STATE/rootfs.stamp") == "$want" ]]; then
    return 0
  fi
  mkdir -p "$STATE" "$(dirname "$shared")"
  # One builder at a time per machine: a second checkout waits, then finds the userland built.
  exec 9>"$shared.lock"
  flock 9
  if [[ ! -x $shared/usr/bin/python3 ]]; then
    command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
    [[ -f $KEYRING ]] || die "$KEYRING is missing (apt-get install debian-archive-keyring)"
    echo "gpuforge setup: building a Debian 13 ($SUITE) userland in $shared for the newest ansible-core"
    new=$shared.new
    rm -rf "$new"
    debootstrap --variant=minbase --keyring="$KEYRING" --include="$PACKAGES" "$SUITE" "$new" "$MIRROR" \
      >"$STATE/debootstrap.log" 2>&1 || die "debootstrap failed: $(tail -n 5 "$STATE/debootstrap.log")"
    chroot "$new" python3 -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$PYTHON_VERSION'.split('.'))))" \
      || die "$SUITE's python3 is not $PYTHON_VERSION"
    chroot "$new" dpkg-query -W -f '${Package} ${Version}\n' >"$shared.packages.txt"
    # The package cache and lists are not needed to run: the userland is never upgraded in place, only rebuilt.
    rm -rf "$new"/var/cache/apt/archives/*.deb "$new"/var/lib/apt/lists/*
    mv "$new" "$shared"
  fi
  flock -u 9
  cp "$shared.packages.txt" "$STATE/packages.txt"
  rm -rf "$ROOTFS"
  ln -s "$shared" "$ROOTFS"
  echo "$want" >"$STATE/rootfs.stamp"
}

install_venv() {
  local want
  # Keyed on the Python line, not on the whole userland: another tool in it leaves the venv as it is.
  want=$( (echo "$PYTHON_VERSION"; cat "$REQUIREMENTS" "$ROOT/pyproject.toml") | sha256sum | cut -d' ' -f1)
  if [[ -x $VENV/bin/python && -f $STATE/venv.stamp && $(cat "$STATE/venv.stamp") == "$want" ]]; then
    return 0
  fi
  echo "gpuforge setup: installing the newest supported ansible-core into .gpuforge/ansible-newest/venv"
  rm -rf "$VENV"
  # pyproject.toml's requires-python (3.11, the project venv's) is the CLI package's support statement with its
  # exact pins; here it is installed without them (--no-deps) beside the newest ansible-core, for the unit suite.
  # shellcheck disable=SC2016
  bash "$ROOT/scripts/in_newest.sh" setup sh -euc '
    python3 -m venv "$1"
    "$1/bin/pip" install -q --disable-pip-version-check --no-compile --no-deps -r "$2"
    "$1/bin/pip" install -q --disable-pip-version-check --no-compile --no-deps --ignore-requires-python -e "$3"
  ' sh "$VENV" "$REQUIREMENTS" "$ROOT" || die "pip could not install requirements/ansible-newest.txt in $VENV"
  # pip check: the pins satisfy each other, except the ansible-core pins of ansible 12.3.0 (~=2.19.5) and of gpuforge
  # (pyproject.toml), which this venv leaves out on purpose.
  bash "$ROOT/scripts/in_newest.sh" setup "$VENV/bin/python" - "$REQUIREMENTS" <<'PY' \
    || die "the newest ansible-core did not install in $VENV"
import re, subprocess, sys
from ansible.release import __version__
import ansible_collections.community.general, gpuforge, pytest  # noqa: F401
pinned = re.search(r"^ansible-core==(\S+)$", open(sys.argv[1]).read(), re.M).group(1)
if __version__ != pinned:
    sys.exit(f"ansible-core {__version__} in {sys.prefix}, {pinned} pinned")
check = subprocess.run([sys.executable, "-m", "pip", "check", "--disable-pip-version-check"], capture_output=True, text=True)
unmet = [line for line in check.stdout.splitlines() if not re.match(r"(ansible|gpuforge) \S+ has requirement ansible-core", line)]
sys.exit("pip check: " + "; ".join(unmet) if unmet else 0)
PY
  echo "$want" >"$STATE/venv.stamp"
}

mkdir -p "$STATE"
build_rootfs
install_venv
