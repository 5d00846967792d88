#!/usr/bin/env bash
# Runs a command in the Debian 13 userland of the newest supported ansible-core (scripts/setup_newest_ansible.sh):
# a podman container (name gpuforge-newest-NAME) on .gpuforge/ansible-newest/rootfs (resolved: it links to the
# machine's shared copy, and runc takes no link), read-only, with this checkout mounted at its own path (so the paths
# in the venv, in the tests and in ansible-test's output are the host's), the venv first on PATH and root's home,
# /root, from .gpuforge/ansible-newest/home (ansible's remote_tmp, pip's and ansible-test's caches: kept between runs
# and apart from the host's ~/.ansible). The host's network and CA bundle: pip and ansible-test reach PyPI as the
# control machine does, through the same TLS trust (a site's proxy CA too).
# Usage: in_newest.sh NAME COMMAND [ARG...]   (make unit-newest, make sanity-newest; the working directory is kept)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STATE=$ROOT/.gpuforge/ansible-newest
export CONTAINERS_CONF=${CONTAINERS_CONF:-$ROOT/.gpuforge/containers.conf}
name=gpuforge-newest-$1
shift
[[ -x $STATE/rootfs/usr/bin/python3 ]] || { echo "in_newest: no Debian 13 userland in $STATE/rootfs: run make setup" >&2; exit 2; }
[[ $name == gpuforge-newest-setup || -f $STATE/venv.stamp ]] \
  || { echo "in_newest: $STATE/venv is not ready: run make setup" >&2; exit 2; }

# The container's /tmp is a folder of its own on disk (pytest's tmp_path, ansible's temporary files), emptied after.
tmp=$STATE/tmp/$name
rm -rf "$tmp"
mkdir -p "$tmp" "$STATE/home"
args=(--rm --replace --name "$name" --read-only --network host --ulimit host
  -v "$ROOT:$ROOT" -v "$tmp:/tmp" -v "$STATE/home:/root"
  -v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro
  -e HOME=/root -e PATH="$STATE/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
  -e LANG=C.UTF-8 -e PYTHONUNBUFFERED=1 -e ANSIBLE_CONFIG="${ANSIBLE_CONFIG:-$ROOT/ansible.cfg}")
# The working directory is kept when it is in the checkout (mounted), else the command starts in the checkout.
[[ $PWD/ == "$ROOT"/* ]] && args+=(-w "$PWD") || args+=(-w "$ROOT")
# The CI inputs tests/conftest.py looks for beside the checkout (SHARED), read-only, where they exist.
inputs=$(dirname "$ROOT")/shared
[[ -d $inputs ]] && args+=(-v "$inputs:$inputs:ro")
# A command reading its standard input (a here-document) gets it; a terminal is not passed.
[[ -t 0 ]] || args+=(-i)
# Run in the caller's control group when that is make test's background group (scripts/background.sh): podman would
# otherwise put the container in its own group beside the lab's node containers, at the full CPU weight.
cpu_cgroup=$(awk -F: '$2 ~ /(^|,)cpu(,|$)/ { print $3 }' /proc/self/cgroup)
[[ -n $cpu_cgroup ]] || cpu_cgroup=$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup)
[[ $cpu_cgroup == */gpuforge-background ]] && args+=(--cgroup-parent "$cpu_cgroup")
rc=0
podman run "${args[@]}" --rootfs "$(readlink -f "$STATE/rootfs")" "$@" || rc=$?
rm -rf "$tmp"
exit "$rc"
