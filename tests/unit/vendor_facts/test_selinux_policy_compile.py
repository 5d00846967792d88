"""gpu_selinux's policy modules compile against both policy flavours gpuforge supports.

Each module is rendered from the role's templates and compiled with the real toolchain (make -f <tree>/Makefile
<name>.pp: m4, checkmodule, semodule_package, from Debian's selinux-policy-dev, checkpolicy and semodule-utils):

- against Debian's refpolicy devel tree as installed (selinux-policy-dev), and
- against a RHEL-like tree generated from vendor_facts/selinux-policy (selinux_trees.py): RHEL's
  dev_rw_infiniband_dev() and no dev_rw_infiniband(), the same corenet_ib_access_unlabeled_pkeys() as refpolicy,
  and container-selinux's two-parameter container_domain_template().

The expanded policy (m4's output, what checkmodule read) is checked for the rules the modules exist for, so a
module that compiles by dropping its rules does not pass.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from selinux_trees import (
    DEBIAN_DEVEL,
    build_rhel_like_tree,
    compile_module,
    find_definition,
    policy_facts,
    registry,
)

# The role renderer lives beside the role tests (tests/unit/roles has no package either).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "roles"))
from gpu_stack_render import RoleRender

pytestmark = pytest.mark.skipif(
    not (DEBIAN_DEVEL / "Makefile").is_file(),
    reason="/usr/share/selinux/devel/Makefile missing: install Debian's selinux-policy-dev (scripts/setup.sh)",
)

INFINIBAND_DOMAINS = ("container_t", "spc_t", "nvidia_container_t")
# Interfaces the role's templates call, whatever the flavour.
ROLE_INTERFACES = (
    "dev_rw_infiniband",
    "dev_rw_infiniband_dev",
    "corenet_ib_access_unlabeled_pkeys",
    "dev_rw_xserver_misc",
    "dev_map_xserver_misc",
    "files_read_usr_files",
    "libs_use_shared_libs",
    "corecmd_exec_bin",
)


@pytest.fixture(scope="module")
def trees(tmp_path_factory) -> dict[str, Path]:
    return {
        "debian-refpolicy": DEBIAN_DEVEL,
        "rhel-like": build_rhel_like_tree(tmp_path_factory.mktemp("rhel-like")),
    }


def render(os_name: str, module: str, semodule: tuple[str, ...]) -> str:
    # semodule -l as the role registers it ("name" or "name version" per line).
    return RoleRender("gpu_selinux", os_name).template(
        f"{module}.te.j2", gpu_selinux_semodule_list={"stdout_lines": [f"{name}\t1.0" for name in semodule]}
    )


def test_registry_refpolicy_matches_debians_installed_tree():
    """refpolicy.yml says what Debian's selinux-policy-dev really installs (names, presence, bodies)."""
    include = DEBIAN_DEVEL / "include"
    for name, value in policy_facts(registry("refpolicy")).items():
        found = find_definition(include, value["kind"], name)
        assert (found is not None) == value["defined"], f"{name}: registry says defined={value['defined']}"
        if found:
            assert found[0] == include / value["header"], name
            if value.get("body"):
                assert found[1] == value["body"], f"{name}: body differs from {found[0]}"


def test_rhel_like_tree_has_rhels_interfaces(trees):
    include = trees["rhel-like"] / "include"
    assert find_definition(include, "interface", "dev_rw_infiniband") is None
    path, body = find_definition(include, "interface", "corenet_ib_access_unlabeled_pkeys")
    assert path == include / "kernel" / "corenetwork.if"
    assert body == "\tkernel_ib_access_unlabeled_pkeys($1)\n"
    path, body = find_definition(include, "interface", "dev_rw_infiniband_dev")
    assert path == include / "kernel" / "devices.if"
    assert "rw_blk_files_pattern($1, device_t, infiniband_device_t)" in body
    path, body = find_definition(include, "template", "container_domain_template")
    assert path == include / "services" / "container.if"
    assert "allow $1_t $2_file_t:file entrypoint;" in body
    # the tree it was copied from is untouched
    assert find_definition(DEBIAN_DEVEL / "include", "interface", "dev_rw_infiniband") is not None


def test_rhel8_registry_agrees_with_rhel9_on_the_roles_interfaces():
    """The RHEL-like tree is built from rhel9.yml; it stands for RHEL 8 only while rhel8.yml says the same."""
    rhel8, rhel9 = policy_facts(registry("rhel8")), policy_facts(registry("rhel9"))
    for name in ROLE_INTERFACES:
        assert name in rhel9, f"rhel9.yml does not say whether {name} exists"
        assert rhel8.get(name, {}).get("defined") == rhel9[name]["defined"], name


# (tree, OS the role renders for, module, modules `semodule -l` lists)
CASES = [
    pytest.param("debian-refpolicy", "debian12", "infiniband", (), id="debian-infiniband"),
    # Debian's default policy store has no container module (refpolicy.yml container_module_in_default_policy).
    pytest.param("debian-refpolicy", "debian12", "nvidia_container", ("xserver",), id="debian-nvidia_container"),
    # refpolicy's own container module (one-parameter template) where a site loads it.
    pytest.param(
        "debian-refpolicy", "debian12", "nvidia_container", ("container",), id="debian-nvidia_container-refpolicy"
    ),
    pytest.param("rhel-like", "rhel9", "infiniband", ("container",), id="rhel-infiniband"),
    pytest.param("rhel-like", "rhel9", "nvidia_container", ("container",), id="rhel-nvidia_container-selinux"),
    pytest.param("rhel-like", "rhel9", "nvidia_container", (), id="rhel-nvidia_container-no-container-selinux"),
]


@pytest.mark.parametrize(("tree", "os_name", "module", "semodule"), CASES)
def test_module_compiles(trees, tmp_path, tree, os_name, module, semodule):
    compiled = compile_module(trees[tree], tmp_path, module, render(os_name, module, semodule))
    assert compiled.ok, compiled.report()
    assert (tmp_path / f"{module}.pp").is_file()
    policy = compiled.expanded
    assert f"module {module} 1.0;" in policy

    if module == "infiniband":
        for domain in INFINIBAND_DOMAINS:
            assert f"allow {domain} infiniband_device_t:chr_file {{ getattr open read write" in policy, domain
            # corenet_ib_access_unlabeled_pkeys(), through kernel_ib_access_unlabeled_pkeys()
            assert f"allow {domain} unlabeled_t:infiniband_pkey access;" in policy, domain
            # RHEL's dev_rw_infiniband_dev() also covers block devices and map; refpolicy's interface does not
            rhel_only = f"allow {domain} infiniband_device_t:blk_file"
            assert (rhel_only in policy) == (tree == "rhel-like"), domain
        return

    assert "allow nvidia_container_t xserver_misc_device_t:chr_file { getattr open read write" in policy
    assert "allow nvidia_container_t xserver_misc_device_t:chr_file map;" in policy
    assert not re.search(r"[\s{:]_file_t\b", policy), "container_domain_template called without its file prefix"
    if "container" not in semodule:
        assert re.search(r"^type nvidia_container_t;$", policy, re.M)
    elif tree == "rhel-like":
        assert "type nvidia_container_t, container_domain;" in policy
        assert "allow nvidia_container_t container_file_t:file entrypoint;" in policy
    else:
        assert "role container_roles types nvidia_container_t;" in policy
