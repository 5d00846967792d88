#!/usr/bin/env bash
# make collection: build the gpuforge.cluster collection tarball from this checkout.
#
# collection/ansible_collections/gpuforge/cluster is the checkout seen as the collection: meta/ and README.md are
# its own files; plugins/modules, plugins/module_utils, plugins/filter, plugins/action, plugins/lookup,
# plugins/callback, roles, playbooks, benchmarks/resnet50, vendor_facts and LICENSES are links to the project's
# top-level folders. ansible-galaxy skips links to folders outside the collection, so the tree is first copied
# with the links resolved (build/collection), given its galaxy.yml (collection/galaxy.yml.in with pyproject.toml's
# version), then built into dist/ and installed from the tarball into build/installed, where `make sanity` runs
# ansible-test.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source_tree=$root/collection/ansible_collections/gpuforge/cluster
# GPUFORGE_BUILD_DIR / GPUFORGE_DIST_DIR move the work and the tarball elsewhere (the unit tests build in a temp dir).
build=${GPUFORGE_BUILD_DIR:-$root/build}
dist=${GPUFORGE_DIST_DIR:-$root/dist}
stage=$build/collection/ansible_collections/gpuforge/cluster
installed=$build/installed
rm -rf "$build/collection" "$installed"
mkdir -p "$(dirname "$stage")" "$dist"
# -L: copy what the links point to; caches and byte code stay out.
cp -rL "$source_tree" "$stage"
find "$stage" \( -name __pycache__ -o -name '*.pyc' \) -prune -exec rm -rf {} +
version=$(python3 -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' \
  "$root/pyproject.toml")
sed "s/@VERSION@/$version/" "$root/collection/galaxy.yml.in" > "$stage/galaxy.yml"
tarball=$dist/gpuforge-cluster-$version.tar.gz
ansible-galaxy collection build "$stage" --output-path "$dist" --force
# --no-deps: the dependencies (galaxy.yml) come from the pinned ansible package here; Galaxy is not reachable.
ansible-galaxy collection install "$tarball" -p "$installed" --no-deps --force
echo "collection: $tarball (installed in $installed/ansible_collections/gpuforge/cluster)"
