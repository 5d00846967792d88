"""nfs_server: the kernel server's exports and nfsd settings, the ganesha configuration, and the refusals.

The lab runs the ganesha path for real (nfs_client scenario); the kernel path cannot run in a container (no nfsd
in the shared kernel), so its files are checked here as rendered for each OS.
"""

from __future__ import annotations

import re

import pytest
from gpu_stack_render import RoleRender

DELLEMC_EXPORTS = [
    {
        "path": "/home",
        "clients": [
            {"network": "192.168.100.0/24", "options": ["rw", "sync", "no_subtree_check", "root_squash"]},
            {"network": "10.0.0.0/16", "options": ["ro", "sync", "no_subtree_check"]},
        ],
    },
    {"path": "/opt/apps", "clients": [{"network": "192.168.100.0/24"}]},
]


@pytest.mark.parametrize("os_name", ["debian12", "ubuntu2204", "rhel9"])
def test_kernel_exports_one_line_per_directory_with_each_network(os_name):
    role = RoleRender("nfs_server", os_name, nfs_server_exports=DELLEMC_EXPORTS)
    lines = [line for line in role.template("gpuforge.exports.j2").splitlines() if not line.startswith("#")]
    assert [re.split(r"\s+", line) for line in lines if line] == [
        ["/home", "192.168.100.0/24(rw,sync,no_subtree_check,root_squash)", "10.0.0.0/16(ro,sync,no_subtree_check)"],
        ["/opt/apps", "192.168.100.0/24(rw,sync,no_subtree_check)"],
    ]


@pytest.mark.parametrize(
    ("os_name", "packages"),
    [
        ("debian12", ["nfs-kernel-server", "netbase"]),
        ("ubuntu2404", ["nfs-kernel-server", "netbase"]),
        ("rhel8", ["nfs-utils"]),
    ],
)
def test_kernel_packages_and_service_per_os(os_name, packages):
    role = RoleRender("nfs_server", os_name)
    assert role.var("nfs_server_kernel_packages") == packages
    assert role.var("nfs_server_kernel_service") == "nfs-server"


def test_nfsd_settings_with_rdma():
    role = RoleRender("nfs_server", "debian12", nfs_server_rdma=True, nfs_server_versions=[4])
    raw = role.find_task("kernel.yml", "Configure nfsd")
    settings = {
        item["option"]: (role.expr(str(item["value"])), role.expr(str(item.get("state", "present"))))
        for item in raw["loop"]
    }
    assert settings == {
        "threads": (16, "present"),
        "vers3": ("n", "present"),
        "vers4": ("y", "present"),
        "rdma": ("y", "present"),
        "rdma-port": (20049, "present"),
    }


def test_no_rdma_listener_by_default():
    role = RoleRender("nfs_server", "debian12")
    raw = role.find_task("kernel.yml", "Configure nfsd")
    states = {item["option"]: role.expr(str(item.get("state", "present"))) for item in raw["loop"]}
    assert states["rdma"] == states["rdma-port"] == "absent"


def test_ganesha_client_blocks_carry_access_and_squash():
    exports = [
        {
            "path": "/srv/nfs/home",
            "clients": [
                {"network": "10.242.0.0/24", "options": ["rw", "root_squash"]},
                {"network": "10.243.0.0/24", "options": ["ro", "no_root_squash"]},
            ],
        }
    ]
    text = RoleRender("nfs_server", "debian12", nfs_server_exports=exports).template("ganesha.conf.j2")
    assert "Protocols = 3, 4;" in text
    blocks = re.findall(r"CLIENT \{(.*?)\}", text, re.S)
    parsed = [dict(re.findall(r"(\w+) = ([^;]+);", block)) for block in blocks]
    assert parsed == [
        {"Clients": "10.242.0.0/24", "Access_Type": "RW", "Squash": "Root_Squash"},
        {"Clients": "10.243.0.0/24", "Access_Type": "RO", "Squash": "No_Root_Squash"},
    ]
    assert "Access_Type = None;" in text  # nothing granted outside the client blocks


def test_ganesha_refuses_options_it_cannot_express():
    exports = [{"path": "/srv/x", "clients": [{"network": "10.0.0.0/8", "options": ["rw", "fsid=0", "crossmnt"]}]}]
    role = RoleRender("nfs_server", "debian12", nfs_server_exports=exports, nfs_server_implementation="ganesha")
    raw = role.find_task("main.yml", "Refuse exports and options this server cannot serve")
    assert role.expr(raw["vars"]["unsupported"]) == ["fsid=0", "crossmnt"]
    assert role.refused("main.yml", "Refuse exports and options")
    message = role.message("main.yml", "Refuse exports and options")
    assert message.startswith("gpu01: nfs-ganesha cannot express the export options fsid=0, crossmnt;")
    assert "nfs_server_exports needs" not in message and "NFS/RDMA" not in message


def test_every_refused_setting_is_named_in_one_message():
    exports = [
        {"path": "srv/x", "clients": [{"network": "10.0.0.0/8", "options": ["rw", "fsid=0"]}]},
        {"path": "srv/x", "clients": []},
    ]
    role = RoleRender(
        "nfs_server", "debian12", nfs_server_exports=exports, nfs_server_implementation="ganesha", nfs_server_rdma=True
    )
    assert role.refused("main.yml", "Refuse exports and options")
    message = " ".join(role.message("main.yml", "Refuse exports and options").split())
    assert message == (
        "gpu01: nfs_server_exports needs one entry per absolute path, each with at least one client network"
        " (srv/x, srv/x). nfs-ganesha cannot express the export options fsid=0; use rw/ro and"
        " root_squash/no_root_squash/all_squash (plus sync, async, no_subtree_check, which it ignores) or"
        " nfs_server_implementation: kernel. nfs_server_rdma is set but nfs_server_implementation is ganesha;"
        " NFS/RDMA is served by the kernel nfsd only."
    )


def test_good_exports_pass_the_settings_check():
    role = RoleRender("nfs_server", "debian12", nfs_server_exports=DELLEMC_EXPORTS)
    assert not role.refused("main.yml", "Refuse exports and options")


def test_export_directories_carry_each_exports_owner_group_and_mode_or_the_spec_defaults():
    # managed_files refuses keys it does not know: the clients must not reach it.
    exports = [*DELLEMC_EXPORTS, {"path": "/scratch", "owner": "nobody", "mode": "1777", "clients": [{"network": "x"}]}]
    role = RoleRender("nfs_server", "debian12", nfs_server_exports=exports)
    assert role.var("nfs_server_export_directories") == [
        {"path": "/home", "owner": "root", "group": "root", "mode": "0755"},
        {"path": "/opt/apps", "owner": "root", "group": "root", "mode": "0755"},
        {"path": "/scratch", "owner": "nobody", "group": "root", "mode": "1777"},
    ]
    assert RoleRender("nfs_server", "rhel9").var("nfs_server_export_directories") == []


CHECK = "Check that the server lists every export"


@pytest.mark.parametrize(
    ("results", "checked"),
    [
        ({}, False),  # nothing registered (a converged run's results all unchanged reads the same)
        ({"nfs_server_files": {"changed": False}, "nfs_server_units": {"changed": False}}, False),
        ({"nfs_server_files": {"changed": True, "changed_paths": ["/etc/ganesha/ganesha.conf"]}}, True),
        ({"nfs_server_units": {"changed": True}}, True),  # a stopped server started
        ({"nfs_server_packages_installed": {"changed": True}}, True),
        ({"nfs_server_nfsd_conf": {"changed": True, "results": []}}, True),
    ],
)
def test_the_export_check_runs_after_a_run_that_changed_the_server(results, checked):
    # A converged server skips its own showmount round trips; a changed one is checked.
    role = RoleRender("nfs_server", "debian12", nfs_server_exports=DELLEMC_EXPORTS, **results)
    assert role.conditions("main.yml", CHECK) == [checked]
    assert role.conditions("main.yml", CHECK, nfs_server_check_exports=False) == [False]
    # Asked for by its tag, the check runs on a converged server too.
    assert role.conditions("main.yml", CHECK, ansible_run_tags=["nfs_server_verify"]) == [True]
