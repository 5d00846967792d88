#!/usr/bin/env bash
# Older CPython for tests/unit/test_target_python.py: Debian 11 (bullseye) CPython 3.9 from deb.debian.org,
# unpacked into a private prefix (nothing is installed into the system), plus pytest for it from PyPI.
# Usage: setup_old_python.sh [DEST]   (default: <repo>/.gpuforge/python3.9; the test looks there)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=${1:-$ROOT/.gpuforge/python3.9}
PIP=${PIP:-$ROOT/.venv/bin/pip}
[ -x "$DEST/bin/python3.9" ] && "$DEST/bin/python3.9" -c 'import pytest' 2>/dev/null && exit 0
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/debs"
cat >"$work/sources.list" <<'LIST'
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bullseye main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security bullseye-security main
LIST
apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o APT::Sandbox::User=root)
apt-get -qq "${apt_opts[@]}" update
(cd "$work/debs" && apt-get -qq "${apt_opts[@]}" download python3.9-minimal libpython3.9-minimal libpython3.9-stdlib)
rm -rf "$DEST"; mkdir -p "$DEST/bin"
for deb in "$work"/debs/*.deb; do dpkg-deb -x "$deb" "$DEST/root"; done
# pytest 8.4 is the last line for 3.9; its dependencies pinned to releases that still run there.
"$PIP" install -q --disable-pip-version-check --no-deps --target "$DEST/site" --python-version 3.9 \
  --implementation cp --abi cp39 --platform manylinux2014_x86_64 --only-binary=:all: \
  pytest==8.4.2 pluggy==1.6.0 iniconfig==2.1.0 packaging==25.0 exceptiongroup==1.3.1 tomli==2.2.1 \
  typing_extensions==4.15.0 pygments==2.19.2
cat >"$DEST/bin/python3.9" <<WRAP
#!/bin/sh
PYTHONHOME="$DEST/root/usr" PYTHONPATH="$DEST/site" exec "$DEST/root/usr/bin/python3.9" -s "\$@"
WRAP
chmod +x "$DEST/bin/python3.9"
"$DEST/bin/python3.9" -c 'import sys, pytest; print("older Python for the target check:", sys.version.split()[0], "pytest", pytest.__version__)'
