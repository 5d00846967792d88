"""nfs_client per OS: packages, fstab source and options (TCP over IPoIB and proto=rdma), mount state."""

from __future__ import annotations

import pytest
import yaml
from fabric_role_vars import ROOT, render

ROLE_VARS = yaml.safe_load((ROOT / "roles" / "nfs_client" / "vars" / "main.yml").read_text(encoding="utf-8"))
HOME = {"path": "/home", "server": "10.10.11.1", "export": "/export/home"}


def _vars(item=None, **extra):
    return {**ROLE_VARS, "item": item or HOME, **extra}


@pytest.mark.parametrize(
    ("os_name", "packages"),
    [("Debian", ["nfs-common", "netbase"]), ("Ubuntu", ["nfs-common", "netbase"]), ("RedHat", ["nfs-utils"])],
)
def test_packages(os_name, packages):
    assert render("nfs_client", os_name, "{{ nfs_client_packages }}") == packages


@pytest.mark.parametrize("os_family", ["Debian", "RedHat"])
def test_per_os_setup_file_exists(os_family):
    # tasks/main.yml includes setup-<os_family>.yml (the convention of every role).
    assert (ROOT / "roles" / "nfs_client" / "tasks" / f"setup-{os_family}.yml").is_file()


def test_ipoib_tcp_entry():
    assert render("nfs_client", "RedHat", "{{ nfs_client_item_src }}", **_vars()) == "10.10.11.1:/export/home"
    assert render("nfs_client", "RedHat", "{{ nfs_client_item_opts }}", **_vars()) == "rw,hard,noatime,_netdev"
    assert render("nfs_client", "RedHat", "{{ nfs_client_item_state }}", **_vars()) == "mounted"


def test_rdma_by_default_adds_proto_and_port():
    opts = render("nfs_client", "Ubuntu", "{{ nfs_client_item_opts }}", **_vars(nfs_client_rdma=True))
    assert opts == "rw,hard,noatime,_netdev,proto=rdma,port=20049"


def test_entry_options_and_rdma_override_defaults():
    item = {**HOME, "options": ["ro", "vers=3"], "rdma": False, "state": "present"}
    assert (
        render("nfs_client", "Debian", "{{ nfs_client_item_opts }}", **_vars(item, nfs_client_rdma=True)) == "ro,vers=3"
    )
    assert render("nfs_client", "Debian", "{{ nfs_client_item_state }}", **_vars(item)) == "present"


@pytest.mark.parametrize(
    ("mounts", "default_rdma", "default_state", "wants_rdma", "wants_mount"),
    [
        ([HOME], False, "mounted", False, True),
        ([HOME], True, "present", True, False),
        ([{**HOME, "rdma": True, "state": "mounted"}], False, "present", True, True),
        ([{**HOME, "rdma": False}], True, "mounted", False, True),
        ([], True, "mounted", False, False),
    ],
)
def test_which_checks_run(mounts, default_rdma, default_state, wants_rdma, wants_mount):
    extra = _vars(nfs_client_mounts=mounts, nfs_client_rdma=default_rdma, nfs_client_mount_state=default_state)
    assert render("nfs_client", "Debian", "{{ nfs_client_wants_rdma | bool }}", **extra) is wants_rdma
    assert render("nfs_client", "Debian", "{{ nfs_client_wants_mount | bool }}", **extra) is wants_mount


def test_servers_listed_once():
    mounts = [HOME, {**HOME, "path": "/apps", "export": "/export/apps"}, {**HOME, "server": "10.10.11.2"}]
    assert render("nfs_client", "Debian", "{{ nfs_client_servers }}", **_vars(nfs_client_mounts=mounts)) == [
        "10.10.11.1",
        "10.10.11.2",
    ]


def test_one_stat_looks_for_showmount_and_every_mount_point():
    from gpu_stack_render import RoleRender

    role = RoleRender(
        "nfs_client",
        "debian12",
        nfs_client_mounts=[HOME, {"path": "/shared/apps", "server": "10.10.11.1", "export": "/export/apps"}],
    )
    reads = role.task_args("main.yml", "Read showmount and the mount points")["commands"]
    assert reads[0] == {
        "name": "paths",
        "ok_rcs": [0, 1],
        "argv": ["stat", "--format=%n", "--", role.var("nfs_client_showmount"), "/home", "/shared/apps"],
    }
