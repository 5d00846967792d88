#!/usr/bin/env bash
# One-shot, idempotent set-up of a Debian 12 control machine for gpuforge:
# system packages (apt), the Python virtual environment, and the project-local
# containers.conf that makes podman use runc with ulimits the host can grant.
# A second run with nothing to do finishes in a few seconds.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
STATE="$ROOT/.gpuforge"
VENV="$ROOT/.venv"
PYTHON=${GPUFORGE_PYTHON:-python3}

# Control-machine packages: podman + runc run the lab, debootstrap builds its image,
# apt-utils (apt-ftparchive), dpkg-dev and gnupg build and sign the lab's vendor mirror.
SYSTEM_PACKAGES=(podman runc netavark aardvark-dns iptables debootstrap apt-utils dpkg-dev gnupg iproute2 ca-certificates make git)
# The Debian archive keys (Debian 13's among them) that debootstrap checks the newest ansible-core's userland with.
SYSTEM_PACKAGES+=(debian-archive-keyring)
# Headless browser for the report test; Open MPI + mpi4py + NumPy for the nccl-tests stand-in's tests.
SYSTEM_PACKAGES+=(chromium openmpi-bin python3-mpi4py python3-numpy)
# SELinux policy toolchain for the gpu_selinux compile test (Debian refpolicy and a RHEL-like tree).
SYSTEM_PACKAGES+=(selinux-policy-dev checkpolicy semodule-utils policycoreutils m4)
# promtool (in Debian's prometheus package) for the gpu_monitoring alert-rule unit tests.
SYSTEM_PACKAGES+=(prometheus)
# fio for the fio_benchmark module test that runs it on a temporary directory.
SYSTEM_PACKAGES+=(fio)
# gcc and the C library headers: the lab mirror builds the CUDA toolkit's link stubs (src/gpuforge/lab/toolchain.py).
SYSTEM_PACKAGES+=(gcc libc6-dev)
# RPM tooling for the lab's RHEL-shaped nodes: rpmbuild and rpmsign build and sign the stand-in RPMs, createrepo_c
# and modifyrepo_c index them with their module streams (docs/lab.md, "OS shapes").
SYSTEM_PACKAGES+=(rpm createrepo-c)

die() { echo "gpuforge setup: $*" >&2; exit 1; }

missing_packages() {
  local pkg
  for pkg in "${SYSTEM_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || echo "$pkg"
  done
}

install_system_packages() {
  local missing
  missing=$(missing_packages | tr '\n' ' ')
  [ -z "${missing// /}" ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    die "missing system packages: ${missing}; run 'make setup' as root, or install them with: apt-get install ${missing}"
  fi
  command -v apt-get >/dev/null || die "apt-get not found: gpuforge's control machine must be Debian 12 (missing: ${missing})"
  echo "gpuforge setup: installing ${missing}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ${missing} >/dev/null
}

write_containers_conf() {
  # podman's default OCI runtime (crun) fails on this host class; runc works.
  # default_ulimits must not exceed the host's hard limits or every container start fails.
  local nofile nproc conf="$STATE/containers.conf" tmp
  nofile=$(ulimit -Hn); nproc=$(ulimit -Hu)
  [ "$nofile" = unlimited ] || [ "$nofile" -gt 1024 ] && nofile=1024
  [ "$nproc" = unlimited ] || [ "$nproc" -gt 1024 ] && nproc=1024
  mkdir -p "$STATE"
  tmp=$(mktemp)
  cat >"$tmp" <<CONF
# Written by scripts/setup.sh; used through CONTAINERS_CONF (see Makefile).
[containers]
default_ulimits = ["nofile=${nofile}:${nofile}", "nproc=${nproc}:${nproc}"]
log_driver = "k8s-file"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
  if cmp -s "$tmp" "$conf"; then rm -f "$tmp"; else mv "$tmp" "$conf"; echo "gpuforge setup: wrote $conf"; fi
}

# Every lab node runs systemd, which with journald, logind and dbus holds about six inotify instances (measured: 32
# for five Molecule nodes), and all of them count against root's fs.inotify.max_user_instances, 128 by default:
# make test's four lanes hold up to about 16 nodes at once. Past the limit a node's systemd logs "Failed to create
# inotify object: Too many open files" and its boot stops with every job waiting, so the next `systemctl start`
# on it never returns (a CI run of 2026-12-05 hung there). Raised, and kept across reboots in /etc/sysctl.d.
raise_inotify_instances() {
  local want=1024 have file=/etc/sysctl.d/60-gpuforge-lab-inotify.conf
  have=$(cat /proc/sys/fs/inotify/max_user_instances 2>/dev/null || echo 0)
  [ "$have" -ge "$want" ] && return 0
  echo "fs.inotify.max_user_instances = $want" >"$file" 2>/dev/null || true
  echo "$want" 2>/dev/null >/proc/sys/fs/inotify/max_user_instances \
    || die "fs.inotify.max_user_instances is $have and cannot be raised to $want here (as root: echo $want > /proc/sys/fs/inotify/max_user_instances): lab nodes stop booting past the limit"
  echo "gpuforge setup: fs.inotify.max_user_instances $have -> $want (lab nodes run systemd)"
}

check_podman() {
  command -v podman >/dev/null || die "podman is not installed (apt-get install podman runc)"
  command -v runc >/dev/null || die "runc is not installed (apt-get install runc)"
  CONTAINERS_CONF="$STATE/containers.conf" podman info --format '{{.Host.OCIRuntime.Name}}' >/dev/null 2>"$STATE/podman-info.err" \
    || die "podman is not usable here: $(tail -n 3 "$STATE/podman-info.err"). The lab needs rootful podman with runc."
}

install_python() {
  local stamp="$STATE/venv.stamp" want
  want=$(cat "$ROOT/pyproject.toml" "$ROOT/requirements/constraints.txt" | sha256sum | cut -d' ' -f1)
  if [ -x "$VENV/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    return 0
  fi
  "$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
    || die "$PYTHON is not Python 3.11 (ansible 12 / ansible-core 2.19 are pinned for 3.11); set GPUFORGE_PYTHON"
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
  echo "gpuforge setup: installing Python dependencies into .venv"
  # --no-compile here and in the other environments: pip would byte-compile every file it installs (the ansible
  # package alone is 15,000 modules, 20,000 files in each environment), while Python compiles, and caches, only what
  # is imported, when it is first imported.
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-compile -c "$ROOT/requirements/constraints.txt" -e "$ROOT[dev,bench]" 2>&1 \
    | grep -v '^WARNING: Location' || true
  "$VENV/bin/python" -c 'import ansible, ansible_runner, molecule, testinfra, kubernetes_validate' \
    || die "Python dependencies did not install; see the pip output above"
  echo "$want" >"$stamp"
}

# The oldest ansible-core gpuforge.cluster supports (meta/runtime.yml), in a venv of its own for make unit-oldest and
# make sanity-oldest: every package pinned in requirements/ansible-oldest.txt, gpuforge itself from the checkout.
install_oldest_ansible() {
  local venv="$ROOT/.venv-ansible-oldest" stamp="$STATE/venv-ansible-oldest.stamp" want
  want=$(cat "$ROOT/requirements/ansible-oldest.txt" "$ROOT/pyproject.toml" | sha256sum | cut -d' ' -f1)
  if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    return 0
  fi
  [ -x "$venv/bin/python" ] || "$PYTHON" -m venv "$venv"
  echo "gpuforge setup: installing the oldest supported ansible-core into .venv-ansible-oldest"
  { "$venv/bin/pip" install -q --disable-pip-version-check --no-compile --no-deps -r "$ROOT/requirements/ansible-oldest.txt" \
      && "$venv/bin/pip" install -q --disable-pip-version-check --no-compile --no-deps -e "$ROOT"; } 2>&1 \
    | grep -v '^WARNING: Location' || true
  "$venv/bin/python" - "$ROOT/requirements/ansible-oldest.txt" <<'PY' || die "the oldest ansible-core did not install in .venv-ansible-oldest; see the pip output above"
import re, sys
from ansible.release import __version__
import ansible_collections.community.general, gpuforge, pytest  # noqa: F401
pinned = re.search(r"^ansible-core==(\S+)$", open(sys.argv[1]).read(), re.M).group(1)
sys.exit(0 if __version__ == pinned else f"ansible-core {__version__} in .venv-ansible-oldest, {pinned} pinned")
PY
  echo "$want" >"$stamp"
}

# `setup.sh` sets up everything; `setup.sh core` only what the lab and the lint need (system packages, podman,
# .venv), `setup.sh extra` the other interpreters' environments: make test starts the lab beside the latter.
part=${1:-all}
case $part in all | core | extra) ;; *) die "unknown part '$part': all, core or extra" ;; esac
mkdir -p "$STATE"
if [[ $part != extra ]]; then
  install_system_packages
  write_containers_conf
  raise_inotify_instances
  check_podman
  install_python
fi
if [[ $part == core ]]; then
  echo "gpuforge setup: core ready (venv: .venv, CONTAINERS_CONF=$STATE/containers.conf)"
  exit 0
fi
[[ -x $VENV/bin/python ]] || die ".venv is missing: run 'bash scripts/setup.sh core' first"
install_oldest_ansible
# The newest ansible-core gpuforge.cluster supports needs Python >= 3.12: a Debian 13 userland with its venv, for
# make unit-newest and make sanity-newest (run there by scripts/in_newest.sh).
bash "$ROOT/scripts/setup_newest_ansible.sh" || die "could not set up the newest ansible-core (scripts/setup_newest_ansible.sh)"
# An older CPython (3.9, from Debian 11) for the managed-node Python check of module_utils (modules run on
# the node's Python; ansible-core 2.19 supports targets from 3.8, RHEL 9's python3 is 3.9).
bash "$ROOT/scripts/setup_old_python.sh" || die "could not set up Python 3.9 for the target-Python tests (scripts/setup_old_python.sh)"
echo "gpuforge setup: ready (venv: .venv, CONTAINERS_CONF=$STATE/containers.conf)"
