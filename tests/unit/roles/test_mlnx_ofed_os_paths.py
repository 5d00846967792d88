"""mlnx_ofed per OS: DOCA repository URL, pinned package spec, tarball name/URL/installer argv, kernel check."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from fabric_role_vars import render


@pytest.mark.parametrize(
    ("os_name", "url", "package"),
    [
        ("Debian", "https://linux.mellanox.com/public/repo/doca/2.9.1/debian12.5/x86_64", "doca-ofed=2.9.1-*"),
        ("Ubuntu", "https://linux.mellanox.com/public/repo/doca/2.9.1/ubuntu22.04/x86_64", "doca-ofed=2.9.1-*"),
        ("RedHat", "https://linux.mellanox.com/public/repo/doca/2.9.1/rhel9.4/x86_64", "doca-ofed-2.9.1-*"),
    ],
)
def test_doca_repo_and_package(os_name, url, package):
    assert render("mlnx_ofed", os_name, "{{ mlnx_ofed_doca_repo_url }}") == url
    assert render("mlnx_ofed", os_name, "{{ mlnx_ofed_doca_packages }}") == [package]


def test_tarball_url_checksum_and_installer_argv():
    sha = "a" * 64
    name = render("mlnx_ofed", "Ubuntu", "{{ mlnx_ofed_tarball_name }}")
    assert name == "MLNX_OFED_LINUX-24.10-1.1.4.0-ubuntu22.04-x86_64"
    assert render("mlnx_ofed", "Ubuntu", "{{ mlnx_ofed_tarball_url }}") == (
        "https://content.mellanox.com/ofed/MLNX_OFED-24.10-1.1.4.0/MLNX_OFED_LINUX-24.10-1.1.4.0-ubuntu22.04-x86_64.tgz"
    )
    pins = {"ubuntu22.04": sha}
    assert (
        render("mlnx_ofed", "Ubuntu", "{{ mlnx_ofed_tarball_sha256 }}", gpuforge_mlnx_ofed_tarball_sha256=pins) == sha
    )
    assert render("mlnx_ofed", "RedHat", "{{ mlnx_ofed_tarball_sha256 }}", gpuforge_mlnx_ofed_tarball_sha256=pins) == ""
    argv = render(
        "mlnx_ofed",
        "Ubuntu",
        "{{ [mlnx_ofed_work_dir ~ '/' ~ mlnx_ofed_tarball_name ~ '/mlnxofedinstall'] + mlnx_ofed_install_flags }}",
    )
    assert argv[0] == "/var/cache/gpuforge/mlnx_ofed/MLNX_OFED_LINUX-24.10-1.1.4.0-ubuntu22.04-x86_64/mlnxofedinstall"
    assert "--without-fw-update" in argv[1:]


@pytest.mark.parametrize(
    ("distro", "kernel", "supported"),
    [
        ("debian12", "6.1.0-26-amd64", True),
        ("debian12", "6.12.9-amd64", False),
        ("ubuntu2204", "5.15.0-119-generic", True),
        ("ubuntu2404", "6.8.0-45-generic", True),
        ("rhel9", "5.14.0-427.13.1.el9_4.x86_64", True),
        ("rhel9", "5.14.0-503.11.1.el9_5.x86_64", False),
    ],
)
def test_supported_kernel_table(distro, kernel, supported):
    table = render("mlnx_ofed", "Debian", "{{ mlnx_ofed_supported_kernels }}")
    assert bool(re.search(table[distro], kernel)) is supported


@pytest.mark.parametrize("os_name", ["Debian", "Ubuntu", "RedHat"])
@pytest.mark.parametrize(("source", "service"), [("inbox", "opensm"), ("doca", "opensmd"), ("tarball", "opensmd")])
def test_opensm_service_follows_the_stack_not_the_os(os_name, source, service):
    # In-box opensm ships opensm.service on every OS; MLNX_OFED/DOCA's ships /etc/init.d/opensmd.
    assert render("mlnx_ofed", os_name, "{{ mlnx_ofed_opensm_service }}", mlnx_ofed_source=source) == service


@pytest.mark.parametrize(
    ("source", "openibd", "groups", "units"),
    [
        ("doca", True, ["gpu_nodes", "ib_subnet_manager"], ["openibd", "opensmd"]),
        ("doca", True, ["gpu_nodes"], ["openibd"]),
        ("tarball", False, ["ib_subnet_manager"], ["opensmd"]),
        # The in-box stack has no openibd; its OpenSM is opensm.service.
        ("inbox", True, ["storage_nodes", "ib_subnet_manager"], ["opensm"]),
        ("inbox", True, ["gpu_nodes"], []),
    ],
)
def test_one_units_task_starts_openibd_then_the_subnet_manager(source, openibd, groups, units):
    rendered = render(
        "mlnx_ofed",
        "Debian",
        "{{ mlnx_ofed_units }}",
        mlnx_ofed_source=source,
        mlnx_ofed_openibd=openibd,
        group_names=groups,
    )
    assert [unit["name"] for unit in rendered] == units
    assert all(unit["enabled"] is True and unit["state"] == "started" for unit in rendered)


def test_the_subnet_manager_starts_before_the_ports_are_checked():
    # A port stays Initializing until a subnet manager configures it: where the OpenSM this role starts is the
    # fabric's only one, checking the ports first would fail every host of a first install.
    tasks_dir = Path(__file__).resolve().parents[3] / "roles" / "mlnx_ofed" / "tasks"
    names = [task["name"] for task in yaml.safe_load((tasks_dir / "main.yml").read_text(encoding="utf-8"))]
    order = [
        "Install the RDMA stack ({{ mlnx_ofed_source }})",
        "Flush handlers so openibd reloads the new stack before it is checked",
        "Keep openibd (loads the HCA driver and access layer at boot) and the subnet manager enabled and running",
        "Check the installed release and the Active ports",
    ]
    assert [name for name in names if name in order] == order
    gather = yaml.safe_load((tasks_dir / "verify.yml").read_text(encoding="utf-8"))[0]
    assert gather["gpuforge.cluster.infiniband_facts"]["wait_for_active_ports"] == (
        "{{ 0 if ansible_check_mode else mlnx_ofed_min_active_ports | int }}"
    )
    assert render("mlnx_ofed", "Debian", "{{ mlnx_ofed_active_ports_wait_s }}") == 60


REFUSE = "Refuse an unknown RDMA stack source, a kernel"


@pytest.mark.parametrize(
    ("kernel", "source", "problems"),
    [
        ("6.1.0-26-amd64", "doca", []),
        ("6.12.9-amd64", "doca", ["kernel 6.12.9-amd64 on debian12"]),
        ("6.12.9-amd64", "inbox", []),  # the distribution's own stack follows its kernel
        ("6.1.0-26-amd64", "ofed", ["mlnx_ofed_source must be one of ['inbox', 'doca', 'tarball'] (got ofed)"]),
        ("6.12.9-amd64", "ofed", ["mlnx_ofed_source must be one of", "kernel 6.12.9-amd64 on debian12"]),
        ("6.1.0-26-amd64", "tarball", []),
    ],
)
def test_settings_refused_in_one_message(kernel, source, problems):
    from gpu_stack_render import OS_FACTS, RoleRender

    role = RoleRender(
        "mlnx_ofed",
        "debian12",
        mlnx_ofed_source=source,
        gpuforge_doca_ofed_key_sha256="b" * 64,
        gpuforge_mlnx_ofed_tarball_sha256={"debian12.5": "c" * 64},
        ansible_facts={**OS_FACTS["debian12"], "kernel": kernel},
    )
    role.assert_problems("main.yml", REFUSE, problems)


@pytest.mark.parametrize(
    ("source", "pins", "problems"),
    [
        ("doca", {"gpuforge_doca_ofed_key_sha256": ""}, ["gpuforge_doca_ofed_key_sha256 (or _fingerprint) is not set"]),
        ("doca", {"gpuforge_doca_ofed_key_sha256": "", "gpuforge_doca_ofed_key_fingerprint": "ABCD"}, []),
        ("tarball", {"gpuforge_mlnx_ofed_tarball_sha256": {}}, ["no sha256 pinned for MLNX_OFED_LINUX-"]),
        # A key pin is no tarball's business, and the reverse.
        (
            "tarball",
            {"gpuforge_doca_ofed_key_sha256": "", "gpuforge_mlnx_ofed_tarball_sha256": {"debian12.5": "c" * 64}},
            [],
        ),
        ("doca", {"gpuforge_doca_ofed_key_sha256": "d" * 64, "gpuforge_mlnx_ofed_tarball_sha256": {}}, []),
        (
            "ofed",
            {"gpuforge_doca_ofed_key_sha256": ""},
            ["mlnx_ofed_source must be one of"],
        ),
    ],
)
def test_unpinned_downloads_refused_with_the_other_settings(source, pins, problems):
    # The DOCA key and the tarball checksum are refused by main.yml's one refusal, before anything is downloaded.
    from gpu_stack_render import OS_FACTS, RoleRender

    role = RoleRender("mlnx_ofed", "debian12", mlnx_ofed_source=source, ansible_facts=OS_FACTS["debian12"], **pins)
    role.assert_problems("main.yml", REFUSE, problems)


@pytest.mark.parametrize(
    ("tasks_file", "os_name", "source", "module"),
    [
        ("doca-Debian.yml", "debian12", "doca", "gpuforge.cluster.apt_pinned"),
        ("inbox-Debian.yml", "debian12", "inbox", "gpuforge.cluster.apt_pinned"),
        ("doca-RedHat.yml", "rhel9", "doca", "ansible.builtin.dnf"),
        ("inbox-RedHat.yml", "rhel9", "inbox", "ansible.builtin.dnf"),
    ],
)
@pytest.mark.parametrize("subnet_manager", [True, False])
def test_opensm_is_installed_in_the_stacks_package_run(tasks_file, os_name, source, module, subnet_manager):
    # The subnet manager's host gets OpenSM in the same package run as the stack: no round of its own.
    from gpu_stack_render import OS_FACTS, RoleRender

    groups = ["storage_nodes"] + (["ib_subnet_manager"] if subnet_manager else [])
    role = RoleRender(
        "mlnx_ofed", os_name, mlnx_ofed_source=source, group_names=groups, ansible_facts=OS_FACTS[os_name]
    )
    name_start = "Install DOCA-OFED" if source == "doca" else "Install the distribution's in-box"
    task = role.find_task(tasks_file, name_start)
    assert role.module_of(task) == module
    names = role.task_args(tasks_file, name_start)["name"]
    assert ("opensm" in names) is subnet_manager
    assert names[0] != "opensm"
    if module == "gpuforge.cluster.apt_pinned":
        # No maintainer script starts OpenSM (or any daemon) on the modules of the stack being replaced.
        assert task[module]["policy_rc_d"] == 101
    tasks_dir = Path(__file__).resolve().parents[3] / "roles" / "mlnx_ofed" / "tasks"
    assert "Install OpenSM" not in (tasks_dir / "main.yml").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("install", "restart"),
    [
        ({"changed": False, "unmet": []}, False),
        ({"changed": True, "unmet": ["opensm"]}, False),  # a host newly made subnet manager
        ({"changed": True, "unmet": ["doca-ofed=2.9.1-*"]}, True),
        ({"changed": True, "unmet": ["doca-ofed=2.9.1-*", "opensm"]}, True),
        (
            {
                "changed": True,
                "results": ["Installed: opensm-5.20.0-1.x86_64", "Installed: opensm-libs-5.20.0-1.x86_64"],
            },
            False,
        ),
        ({"changed": True, "results": ["Installed: doca-ofed-2.9.1-1.x86_64"]}, True),
        ({"changed": True, "cmd": ["mlnxofedinstall"]}, True),  # the tarball's installer: the whole stack
    ],
)
def test_openibd_restarts_for_the_stack_not_for_opensm(install, restart):
    assert render("mlnx_ofed", "Debian", "{{ mlnx_ofed_stack_changed }}", mlnx_ofed_stack_install=install) is restart


VERIFY = "The installed release is the pinned one and enough ports are Active"


@pytest.mark.parametrize(
    ("source", "infiniband", "min_ports", "problems"),
    [
        ("doca", {"ofed_release": "OFED-internal-24.10-1.1.4.0.200:", "active_ports": ["mlx5_0/1"]}, 1, []),
        (
            "doca",
            {"ofed_release": "OFED-internal-24.10-1.1.4.0.200:", "active_ports": []},
            1,
            ["0 active RDMA port(s)"],
        ),
        (
            "doca",
            {"ofed_release": "OFED-internal-23.10-1.1.9.0:", "active_ports": []},
            1,
            ["ofed_info -s reports 'OFED-internal-23.10-1.1.9.0:'", "0 active RDMA port(s)"],
        ),
        (
            "doca",
            {"errors": ["ofed_info: not found"], "active_ports": ["mlx5_0/1"]},
            1,
            ["ofed_info -s reports 'nothing: ofed_info: not found'"],
        ),
        # The in-box stack has no ofed_info; no ports required: nothing to check.
        ("inbox", {}, 0, []),
        ("inbox", {"active_ports": []}, 2, ["0 active RDMA port(s) (none), need 2"]),
    ],
)
def test_release_and_ports_checked_in_one_message(source, infiniband, min_ports, problems):
    from gpu_stack_render import OS_FACTS, RoleRender

    role = RoleRender(
        "mlnx_ofed",
        "debian12",
        mlnx_ofed_source=source,
        mlnx_ofed_min_active_ports=min_ports,
        mlnx_ofed_version="24.10-1.1.4.0",
        ansible_facts={**OS_FACTS["debian12"], "infiniband": infiniband},
    )
    role.assert_problems("verify.yml", VERIFY, problems)
