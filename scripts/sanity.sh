#!/usr/bin/env bash
# make sanity: `ansible-test sanity` on the built gpuforge.cluster collection (scripts/build_collection.sh), with
# no ignore file. Runs in its own virtual environments (--venv), which ansible-test fills from PyPI; its pip
# bootstrap (a download from ci-files.testing.ansible.com, not reachable here) is served from the project
# venv's pip (scripts/sanity/get_pip_standin.py).
set -euo pipefail
# GPUFORGE_ANSIBLE_VENV / GPUFORGE_INSTALLED: the venv whose ansible-test runs and the folder the collection is
# installed in (make sanity-oldest: .venv-ansible-oldest and build/installed-oldest; make sanity-newest, in the
# Debian 13 userland: .gpuforge/ansible-newest/venv and build/installed-newest); by default the project's.
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${GPUFORGE_ANSIBLE_VENV:-$root/.venv}
collection=${GPUFORGE_INSTALLED:-$root/build/installed}/ansible_collections/gpuforge/cluster
python=$venv/bin/python
export PATH=$venv/bin:$PATH
[[ -d $collection ]] || { echo "sanity: $collection is missing: run make collection first" >&2; exit 2; }

# The pip release ansible-test bootstraps (ansible_test/_internal/python_requirements.py) names the cache file.
pip_version=$("$python" - <<'PY'
import pathlib, re, ansible_test
text = (pathlib.Path(ansible_test.__file__).parent / "_internal" / "python_requirements.py").read_text()
print(re.search(r"pip='([0-9.]+)'", text).group(1))
PY
)
pip_dir=$root/.gpuforge/sanity/$(basename "$venv")/pip
mkdir -p "$pip_dir" "$HOME/.ansible/test/cache"
ln -sfn "$("$python" -c 'import os, pip; print(os.path.dirname(pip.__file__))')" "$pip_dir/pip"
sed "s|@PIP_DIR@|$pip_dir|" "$root/scripts/sanity/get_pip_standin.py" \
  > "$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py"

# ansible-test lists a collection's files with git when it sits in a git work tree; build/ is ignored by the
# project's, so the installed collection gets a repository of its own (all files untracked, none ignored).
# ansible-test's own output (tests/output: its virtual environments) is excluded from that repository.
[[ -d $collection/.git ]] || git -C "$collection" init -q
echo "/tests/output/" > "$collection/.git/info/exclude"
cd "$collection"
# ansible-test's environments use the venv's own Python: 3.11 for the project's and the oldest ansible-core, the
# Debian 13 userland's 3.13 for the newest (make sanity-newest, scripts/in_newest.sh).
python_version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
echo "sanity: $(ansible-test --version) on Python $python_version, $collection"
ansible-test sanity --venv --python "$python_version" --color no "$@"
