"""Values the roles derive from facts, the inventory and earlier reads are role variables (vars/main.yml), not
set_fact tasks (gpuforge issue 18: every task costs a worker per host, on the controller too). These render them
as the tasks that use them would see them."""

from __future__ import annotations

import base64

import pytest
from gpu_stack_render import OS_FACTS, ROOT, RoleRender
from role_yaml import load_yaml

SLURM_PINS = load_yaml(ROOT / "roles" / "gpuforge" / "defaults" / "main" / "slurm.yml")["gpuforge_slurm_packages"]
GROUPS = {"slurm_controller": ["head01"], "slurm_compute": ["gpu01", "gpu02"]}


def slurm(os_name: str, release: str = "", **extra) -> RoleRender:
    facts = {**OS_FACTS[os_name], "distribution_release": release}
    return RoleRender("slurm", os_name, **{"groups": GROUPS, "ansible_facts": facts, **extra})


@pytest.mark.parametrize(
    ("os_name", "release", "key"),
    [("debian12", "bookworm", "bookworm"), ("ubuntu2404", "noble", "noble"), ("rhel9", "Plow", "9")],
)
def test_slurm_pins_are_those_of_the_release(os_name, release, key):
    assert slurm(os_name, release).var("slurm_pins") == SLURM_PINS[key]


def test_slurm_pins_are_empty_for_a_release_without_pins():
    # The role's assert then names the release (tasks/main.yml).
    assert slurm("debian12", "trixie").var("slurm_pins") == {}


@pytest.mark.parametrize(("host", "controller", "compute"), [("head01", True, False), ("gpu02", False, True)])
def test_slurm_roles_of_a_host(host, controller, compute):
    render = slurm("debian12", "bookworm", inventory_hostname=host)
    assert (render.var("slurm_is_controller"), render.var("slurm_is_compute")) == (controller, compute)


@pytest.mark.parametrize(
    ("setting", "virtualization", "enabled"),
    [("auto", "kvm", True), ("auto", "podman", False), (True, "podman", True), ("false", "kvm", False)],
)
def test_slurm_cgroups_follow_the_setting_or_the_compute_nodes(setting, virtualization, enabled):
    hostvars = {name: {"ansible_facts": {"virtualization_type": virtualization}} for name in GROUPS["slurm_compute"]}
    render = slurm("debian12", "bookworm", slurm_cgroup=setting, hostvars=hostvars)
    assert render.var("slurm_cgroup_enabled") is enabled


@pytest.mark.parametrize(
    ("extra", "driver", "module"),
    [
        ({"gpudirect_rdma_smi": {"stdout_lines": ["550.90.07", "550.90.07"]}}, "550.90.07", "nvidia_peermem"),
        ({"gpudirect_rdma_smi": {"stdout_lines": ["460.106.00"]}}, "460.106.00", "nv_peer_mem"),
        (
            {"gpudirect_rdma_driver_version": "535.183.01", "gpudirect_rdma_smi": {"skipped": True}},
            "535.183.01",
            "nvidia_peermem",
        ),
        (
            {"gpudirect_rdma_method": "nv_peer_mem", "gpudirect_rdma_smi": {"stdout_lines": ["550.90.07"]}},
            "550.90.07",
            "nv_peer_mem",
        ),
        # nvidia-smi printed nothing: the driver is '' and the role's assert on it fails with the fix.
        ({"gpudirect_rdma_smi": {"stdout_lines": []}}, "", "nv_peer_mem"),
        # The nvidia_driver role read the driver earlier in this run (site.yml): this role's read was skipped.
        (
            {"nvidia_driver_nvidia_smi": {"ansible_facts": {"nvidia_smi": {"driver_version": "460.106.00"}}}},
            "460.106.00",
            "nv_peer_mem",
        ),
        # The setting wins over both reads.
        (
            {
                "gpudirect_rdma_driver_version": "535.183.01",
                "nvidia_driver_nvidia_smi": {"ansible_facts": {"nvidia_smi": {"driver_version": "460.106.00"}}},
            },
            "535.183.01",
            "nvidia_peermem",
        ),
    ],
)
def test_gpudirect_rdma_module_for_the_driver(extra, driver, module):
    render = RoleRender("gpudirect_rdma", "debian12", **extra)
    assert (render.var("gpudirect_rdma_driver"), render.var("gpudirect_rdma_module")) == (driver, module)


@pytest.mark.parametrize(
    ("nouveau", "required"),
    [
        ({"changed": True, "loaded": False}, False),
        ({"failed": True, "msg": "in use"}, True),
        ({"loaded": True}, True),
        ({"skipped": True, "changed": False}, False),
    ],
)
def test_nvidia_driver_reboot_required_after_the_nouveau_unload(nouveau, required):
    assert (
        RoleRender("nvidia_driver", "debian12", nvidia_driver_nouveau=nouveau).var("nvidia_driver_reboot_required")
        is required
    )


@pytest.mark.parametrize(
    ("filesystems", "has_nfs"),
    [("nodev\tsysfs\nnodev\tnfs\nnodev\tnfs4\n\text4\n", True), ("nodev\tnfsd\n\text4\n", False)],
)
def test_nfs_client_kernel_nfs_from_proc_filesystems(filesystems, has_nfs):
    reads = {"outputs": {"filesystems": {"rc": 0, "stdout": filesystems}}}
    render = RoleRender("nfs_client", "debian12", nfs_client_reads=reads)
    assert render.var("nfs_client_kernel_nfs") is has_nfs


def test_nfs_client_reads_every_path_the_file_systems_and_each_server_s_exports_in_one_run():
    mounts = [
        {"server": "10.10.11.1", "export": "/export/home", "path": "/home/shared"},
        {"server": "10.10.11.1", "export": "/export/data", "path": "/data"},
        {"server": "storage02", "export": "/scratch", "path": "/scratch"},
    ]
    render = RoleRender("nfs_client", "debian12", nfs_client_mounts=mounts)
    showmount = render.var("nfs_client_showmount")
    assert render.var("nfs_client_read_commands") == [
        {"name": "paths", "ok_rcs": [0, 1], "argv": ["stat", "--format=%n", "--", showmount, "/home/shared", "/data",
                                                    "/scratch"]},
        {"name": "filesystems", "argv": ["cat", "/proc/filesystems"]},
        # One showmount per server (it asks one); a missing showmount (127) is kept, not a failure.
        {"name": "showmount 10.10.11.1", "argv": [showmount, "-e", "--no-headers", "10.10.11.1"], "ok_rcs": []},
        {"name": "showmount storage02", "argv": [showmount, "-e", "--no-headers", "storage02"], "ok_rcs": []},
    ]  # fmt: skip
    without_exports = RoleRender("nfs_client", "debian12", nfs_client_mounts=mounts, nfs_client_check_exports=False)
    assert [command["name"] for command in without_exports.var("nfs_client_read_commands")] == ["paths", "filesystems"]


def test_slurm_refuses_a_release_without_pins_and_a_missing_controller_in_one_message():
    role = slurm("debian12", "trixie")
    role.templar.available_variables = {
        **role.templar.available_variables,
        "groups": {"slurm_controller": [], "slurm_compute": ["gpu01"]},
    }
    task = "Refuse an inventory without a Slurm controller"
    assert role.refused("main.yml", task)
    message = " ".join(role.message("main.yml", task).split())
    assert message.startswith("gpu01 is in a Slurm group, but group slurm_controller has no hosts.")
    assert "gpu01: no Slurm/MUNGE version pinned for Debian" in message


def key_read(key: str | None, mode: str = "munge:munge:400", slurm_user: bool = True, uid: int = 64030) -> dict:
    """What tasks/munge.yml's command_reads registers: `base64 --wrap=0` of the key (exit 1 and GNU coreutils'
    message without one), `stat --format=%U:%G:%a` of the file, `getent passwd slurm` and `getent group slurm` (exit 2
    without the user or group; Debian's packages make both with 64030)."""
    user = {"rc": 0, "stdout": f"slurm:x:{uid}:{uid}::/nonexistent:/usr/sbin/nologin\n"} if slurm_user else {"rc": 2}
    group = {"rc": 0, "stdout": f"slurm:x:{uid}:\n"} if slurm_user else {"rc": 2}
    users = {"slurm_user": user, "slurm_group": group}
    if key is None:
        return {
            "outputs": {
                "key": {"rc": 1, "stdout": "", "stderr": "base64: /etc/munge/munge.key: No such file or directory\n"},
                "mode": {"rc": 1, "stdout": ""},
                **users,
            }
        }
    return {"outputs": {"key": {"rc": 0, "stdout": key}, "mode": {"rc": 0, "stdout": mode + "\n"}, **users}}


@pytest.mark.parametrize(
    ("controller_read", "exists", "uid"),
    [
        (key_read("b2xk"), True, None),  # Debian's package made it: nothing to create
        (key_read("b2xk"), False, "64030"),  # a RHEL node under a Debian/Ubuntu controller: the controller's UID
        (key_read("b2xk", uid=992), False, "992"),  # a site whose controller's Slurm user has its own UID
        (key_read("b2xk", slurm_user=False), False, "64030"),  # an all-RHEL cluster: slurm_user_uid everywhere
    ],
)
def test_the_slurm_user_is_created_where_the_packages_did_not_with_the_controllers_uid(controller_read, exists, uid):
    node_read = key_read("b2xk", slurm_user=exists)
    hostvars = {"head01": {"slurm_local_key": controller_read}, "gpu01": {"slurm_local_key": node_read}}
    role = slurm(
        "rhel9", "Plow", inventory_hostname="gpu01", hostvars=hostvars, slurm_local_key=node_read,
        ansible_play_hosts_all=["head01", "gpu01"],
    )  # fmt: skip
    assert role.conditions("munge.yml", "Create the Slurm system user") == [not exists]
    assert role.conditions("munge.yml", "Create the Slurm system group") == [not exists]
    if not exists:
        user = role.task_args("munge.yml", "Create the Slurm system user")
        group = role.task_args("munge.yml", "Create the Slurm system group")
        assert (user["name"], str(user["uid"]), user["group"]) == ("slurm", uid, "slurm")
        assert (group["name"], str(group["gid"])) == ("slurm", uid)


UID_CHECK = "The Slurm user has the controller's UID on every host"


@pytest.mark.parametrize(
    ("controller_read", "node_read", "refused"),
    [
        (key_read("b2xk"), key_read("b2xk"), False),  # Debian's packages on both: 64030
        (key_read("b2xk", uid=999), key_read("b2xk"), True),  # the lab's first Ubuntu head node (2026-12-04)
        (key_read("b2xk", slurm_user=False), key_read("b2xk"), False),  # a RHEL controller: created with 64030
        (key_read("b2xk", slurm_user=False), key_read("b2xk", uid=997), True),  # ... over a node with its own UID
        (key_read("b2xk"), key_read("b2xk", slurm_user=False), False),  # a RHEL node: created with the controller's
        (key_read("b2xk", uid=999), key_read("b2xk", slurm_user=False), False),  # the same under another UID
        (key_read("b2xk"), key_read("b2xk", uid=997), True),  # a RHEL node whose site made the user
    ],
)
def test_a_node_whose_slurm_user_uid_is_not_the_controllers_is_refused(controller_read, node_read, refused):
    # slurmd refuses RPCs from another UID than its own SlurmUser's: the node would stay not responding (idle*).
    hostvars = {"head01": {"slurm_local_key": controller_read}, "gpu01": {"slurm_local_key": node_read}}
    role = slurm(
        "debian12", "bookworm", inventory_hostname="gpu01", hostvars=hostvars, slurm_local_key=node_read,
        ansible_play_hosts_all=["head01", "gpu01"],
    )  # fmt: skip
    assert role.conditions("munge.yml", UID_CHECK) == [refused]
    if refused:
        message = " ".join(role.message("munge.yml", UID_CHECK).split())
        node_uid, cluster_uid = role.var("slurm_local_user_uid"), role.var("slurm_cluster_user_uid")
        assert message.startswith(f"gpu01: user slurm has UID {node_uid}, the Slurm controller head01's ")
        assert f"Security violation, ping RPC from uid {cluster_uid}" in message
        assert f"Fix: give slurm UID {cluster_uid} here" in message


def test_the_cluster_munge_key_is_the_controllers_own_read_or_the_one_it_just_created():
    had = {"head01": {"slurm_local_key": key_read("b2xk")}}
    assert slurm("debian12", "bookworm", hostvars=had).var("slurm_controller_key") == "b2xk"
    created = {"head01": {"slurm_local_key": key_read(None), "slurm_new_controller_key": {"content": "bmV3"}}}
    assert slurm("debian12", "bookworm", hostvars=created).var("slurm_controller_key") == "bmV3"


def test_a_play_without_the_controller_is_told_to_include_it():
    role = slurm("debian12", "bookworm", hostvars={"head01": {}})
    with pytest.raises(Exception, match="MUNGE key of the Slurm controller head01 was not read in this play"):
        role.var("slurm_controller_key")


@pytest.mark.parametrize(
    ("host", "local_key", "new_key", "installs"),
    [
        # A compute node whose package made its own key gets the controller's.
        ("gpu01", key_read("b3du"), None, True),
        ("gpu01", key_read("b2xk"), None, False),
        # The controller that had no key and just made the cluster's writes it like every other host.
        ("head01", key_read(None), {"content": "b2xk"}, True),
        ("head01", key_read("b2xk"), None, False),
    ],
)
def test_the_cluster_key_is_installed_only_where_it_differs(host, local_key, new_key, installs):
    # The creation is an include: without it, its read is not registered at all.
    reads = {"slurm_local_key": local_key, **({"slurm_new_controller_key": new_key} if new_key else {})}
    controller = reads if host == "head01" else {"slurm_local_key": key_read("b2xk")}
    role = slurm("debian12", "bookworm", inventory_hostname=host, hostvars={"head01": controller}, **reads)
    assert role.var("slurm_controller_key") == "b2xk"
    assert role.conditions("munge.yml", "Install the cluster MUNGE key") == [installs]


@pytest.mark.parametrize(
    ("mode", "installed", "created", "sets_mode"),
    [
        ("munge:munge:400", {"skipped": True}, False, False),  # a converged host: no module run
        ("root:root:600", {"skipped": True}, False, True),  # drifted
        ("munge:munge:400", {"changed": True}, False, True),  # the install above wrote it as root, 0600
        ("munge:munge:400", {"skipped": True}, True, True),  # the controller just made the cluster's key
    ],
)
def test_the_key_mode_is_set_only_when_it_is_wrong_or_the_run_wrote_the_key(mode, installed, created, sets_mode):
    reads = {"slurm_local_key": key_read("b2xk", mode), "slurm_munge_key_installed": installed}
    if created:
        reads["slurm_new_controller_key"] = {"content": "b2xk"}
    role = slurm("debian12", "bookworm", **reads)
    assert all(role.conditions("munge.yml", "The MUNGE key is readable by munge only")) is sets_mode


@pytest.mark.parametrize(
    ("host", "local_key", "given", "creates"),
    [
        ("head01", key_read(None), "", True),  # the controller has none: it creates the cluster's
        ("head01", key_read("b2xk"), "", False),  # a converged controller, or Debian's packaged key
        ("head01", key_read(None), "a2V5", False),  # the key comes from slurm_munge_key
        ("gpu01", key_read(None), "", False),  # only the controller creates it
    ],
)
def test_only_a_controller_without_a_key_creates_one(host, local_key, given, creates):
    role = slurm("debian12", "bookworm", inventory_hostname=host, slurm_local_key=local_key, slurm_munge_key=given)
    assert role.var("slurm_creates_munge_key | bool") is creates
    # The creation is one include, taken only then.
    assert role.conditions("munge.yml", "Create the MUNGE key") == [creates]
    included = role.task_args("munge.yml", "Create the MUNGE key")["file"]
    names = [task["name"] for task in load_yaml(ROOT / "roles" / "slurm" / "tasks" / included)]
    assert names == ["Make the cluster's MUNGE key"]


def test_the_made_munge_key_is_1024_random_characters_in_base64_and_new_each_time():
    role = slurm("rhel9", "Plow")
    keys = [role.task_args("munge_create.yml", "Make the cluster's MUNGE key")["slurm_new_controller_key"]["content"]
            for _ in range(2)]  # fmt: skip
    decoded = [base64.b64decode(key, validate=True).decode("ascii") for key in keys]
    assert [len(key) for key in decoded] == [1024, 1024]
    assert all(key.isalnum() for key in decoded)
    assert decoded[0] != decoded[1]


def _host(os_name: str, release: str) -> dict:
    return {"ansible_facts": {**OS_FACTS[os_name], "distribution_release": release}}


@pytest.mark.parametrize(
    ("head", "refused"),
    [
        # Ubuntu 22.04's Slurm 21.08 cannot control RHEL 9's 22.05 slurmd; Ubuntu 24.04's 23.11 can (two releases
        # newer), as can Debian 12's 22.05 (the same release).
        (("ubuntu2204", "jammy"), True),
        (("ubuntu2404", "noble"), False),
        (("debian12", "bookworm"), False),
    ],
)
def test_a_node_with_a_newer_slurm_than_the_controller_is_refused(head, refused):
    hostvars = {"head01": _host(*head), "gpu01": _host("rhel9", "Plow"), "gpu02": _host("debian12", "bookworm")}
    role = slurm("rhel9", "Plow", inventory_hostname="gpu01", hostvars=hostvars)
    task = "Refuse an inventory without a Slurm controller"
    assert role.refused("main.yml", task) is refused
    if refused:
        message = " ".join(role.message("main.yml", task).split())
        assert message.startswith(
            "gpu01: its RedHat 9.4 Slurm 22.05 is newer than Slurm 21.08 of the controller head01."
        )
        assert "pin one Slurm release for every OS of the cluster in gpuforge_slurm_packages" in message
    # The controller itself is never refused for its own release.
    assert not slurm(head[0], head[1], inventory_hostname="head01", hostvars=hostvars).refused("main.yml", task)
