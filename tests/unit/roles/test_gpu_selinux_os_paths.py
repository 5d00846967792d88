"""gpu_selinux per OS: toolchain packages, Makefile, module sources for policies with and without a container module."""

from __future__ import annotations

import pytest
from gpu_stack_render import RoleRender


def _semodule(*names: str) -> dict:
    return {"stdout_lines": list(names)}


@pytest.mark.parametrize(
    ("os_name", "packages"),
    [
        (
            "debian12",
            ["selinux-policy-default", "selinux-policy-dev", "policycoreutils", "semodule-utils", "checkpolicy"],
        ),
        ("rhel9", ["selinux-policy-devel", "policycoreutils-python-utils"]),
    ],
)
def test_toolchain_and_makefile(os_name, packages):
    render = RoleRender("gpu_selinux", os_name)
    assert render.var("gpu_selinux_packages") == packages
    assert render.var("gpu_selinux_makefile") == "/usr/share/selinux/devel/Makefile"


def test_nvidia_container_on_rhel_uses_the_container_template():
    text = RoleRender("gpu_selinux", "rhel9").template(
        "nvidia_container.te.j2", gpu_selinux_semodule_list=_semodule("container", "virt")
    )
    assert "policy_module(nvidia_container, 1.0)" in text
    # container-selinux >= 2.201 takes (prefix, file_prefix); its template neither declares nor requires
    # $2_file_t, so the module requires container_file_t itself (vendor_facts/selinux-policy/container-selinux.yml).
    assert "\ncontainer_domain_template(nvidia_container, container)\n" in text
    assert "\ncontainer_domain_template(nvidia_container)\n" not in text
    assert "gen_require(`\n\ttype container_file_t;\n')\ncontainer_domain_template(" in text
    assert "\ntype nvidia_container_t;" not in text
    assert "dev_rw_xserver_misc(nvidia_container_t)" in text
    assert "capability" not in text.split("policy_module")[1].replace("grants no capability", "")


def test_nvidia_container_without_container_module_is_a_plain_domain():
    text = RoleRender("gpu_selinux", "debian12").template(
        "nvidia_container.te.j2", gpu_selinux_semodule_list=_semodule("xserver", "virt")
    )
    assert "\ntype nvidia_container_t;\ndomain_type(nvidia_container_t)\n" in text
    assert "container_domain_template" not in text.split("policy_module")[1]


@pytest.mark.parametrize("os_name", ["debian12", "rhel9"])
def test_infiniband_module_optional_per_domain(os_name):
    # One source for both policy flavours: m4 ifdef picks RHEL's or refpolicy's interface name.
    text = RoleRender("gpu_selinux", os_name).template("infiniband.te.j2")
    assert "policy_module(infiniband, 1.0)" in text
    assert text.count("optional_policy(`") == 3
    for domain in ("container_t", "spc_t", "nvidia_container_t"):
        assert (
            f"ifdef(`dev_rw_infiniband_dev', `dev_rw_infiniband_dev({domain})', `dev_rw_infiniband({domain})')"
        ) in text
        # both flavours define the pkey interface (vendor_facts/selinux-policy/refpolicy.yml, rhel9.yml, rhel8.yml)
        assert f"\tcorenet_ib_access_unlabeled_pkeys({domain})\n" in text


REFUSE = "Refuse anything but enforcing"


def test_only_enforcing_is_accepted():
    role = RoleRender("gpu_selinux", "debian12", gpu_selinux_state="permissive")
    assert role.refused("main.yml", REFUSE)
    message = " ".join(role.message("main.yml", REFUSE).split())
    assert message.startswith("gpu_selinux_state is 'permissive': gpuforge never disables SELinux or sets it")
    assert "gpu_selinux supports" not in message
    assert not RoleRender("gpu_selinux", "debian12").refused("main.yml", REFUSE)


def test_every_refusal_is_named_in_one_message():
    role = RoleRender(
        "gpu_selinux",
        "rhel9",
        gpu_selinux_enabled=True,
        gpu_selinux_state="disabled",
        gpu_selinux_modules=["nvidia_container", "x"],
    )
    assert role.refused("main.yml", REFUSE)
    message = " ".join(role.message("main.yml", REFUSE).split())
    assert "gpu_selinux_state is 'disabled'" in message
    assert message.endswith("and the modules nvidia_container and infiniband (asked for nvidia_container, x).")
    # The system check is the role's only when it does something: gpu_selinux_enabled false leaves the state one.
    off = RoleRender("gpu_selinux", "rhel9", gpu_selinux_enabled=False, gpu_selinux_modules=["x"])
    assert not off.refused("main.yml", REFUSE)


@pytest.mark.parametrize("os_name", ["ubuntu2204", "ubuntu2404"])
def test_ubuntu_with_selinux_enabled_is_refused_naming_the_supported_systems(os_name):
    """Ubuntu runs AppArmor; its SELinux reference policy is universe's, outside Canonical's support
    (vars/Ubuntu.yml)."""
    role = RoleRender("gpu_selinux", os_name, gpu_selinux_enabled=True)
    assert role.refused("main.yml", REFUSE)
    message = " ".join(role.message("main.yml", REFUSE).split())
    assert message.startswith("gpu01: gpu_selinux supports Debian 12 and RHEL 9 with SELinux enabled (this is Ubuntu ")
    assert "whose security module is AppArmor: leave SELinux disabled there, where the role changes nothing" in message
    # SELinux disabled, as Ubuntu has it: nothing to refuse, and nothing runs (every later task needs it enabled).
    assert not RoleRender("gpu_selinux", os_name, gpu_selinux_enabled=False).refused("main.yml", REFUSE)


@pytest.mark.parametrize("os_name", ["debian12", "rhel9"])
def test_debian_and_rhel_with_selinux_enabled_are_accepted(os_name):
    assert not RoleRender("gpu_selinux", os_name, gpu_selinux_enabled=True).refused("main.yml", REFUSE)
