"""spectrum_scale_client's remote calls (gpuforge issue 18): one read on the member at the start, the later steps
deciding on it in `when:`, a re-read only after a change. The role's tasks are walked in order with their
conditions evaluated by Ansible's templar against what spectrum_scale_facts returns (its RETURN shape, tested in
tests/unit/library/test_spectrum_scale_facts.py against IBM Redpaper REDP-5610 and the lab's simulated mm commands);
each task or loop item that runs a module on a node (the GPU node or, delegated, the member) is one remote call."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.template import trust_as_template
from gpu_stack_render import RoleRender
from role_yaml import trusted

ROOT = Path(__file__).resolve().parents[3]
ROLE = ROOT / "roles" / "spectrum_scale_client"
LAB_VARS = {
    name: value
    for name, value in yaml.safe_load(
        (ROOT / "inventories" / "lab" / "group_vars" / "all" / "fabric_storage.yml").read_text(encoding="utf-8")
    ).items()
    if name.startswith("spectrum_scale_client_")
}
HOST = {"inventory_hostname_short": "gpu01", "groups": {"spectrum_scale_cluster": ["storage01"]}}
# Modules that run on the controller: no remote call.
CONTROLLER = {
    "ansible.builtin.assert",
    "ansible.builtin.include_vars",
    "ansible.builtin.include_tasks",
    "ansible.builtin.import_tasks",
    "ansible.builtin.set_fact",
    "ansible.builtin.debug",
}
# tasks/main.yml's steps after the install (setup-<os_family>.yml: the package tasks and vendor_repository, counted
# with that role, not changed here).
STEPS = ("portability_layer.yml", "membership.yml", "config.yml", "start_mount.yml")
IB = {"infiniband": {"active_ports": ["mlx5_0/1", "mlx5_1/1", "mlx5_2/1", "mlx5_3/1"]}}


def state(member=True, state="active", classes=("dgx",), class_exists=True, remote=True, defined=True, mounted=True):
    """spectrum_scale_facts' ansible_facts.spectrum_scale for gpu01 as the role's read returns it."""
    return {
        "member": True,
        "node": {
            "name": "gpu01",
            "member": member,
            "state": state if member else None,
            "node_classes": list(classes),
            "mounted": ["ess3000_4M"] if mounted else [],
        },
        "node_classes": {"dgx": {"exists": class_exists, "members": ["gpu01"] if classes else []}},
        "remote_clusters": {"ess3000.bda.scale.ibm.com": {"filesystems": {}}} if remote else {},
        "remote_filesystems": {"ess3000_4M": {"mount_point": "/gpfs/ess3000_4M"}} if defined else {},
        "mounts": {"ess3000_4M": {"defined": defined, "nodes": [{"name": "gpu01"}] if mounted else []}},
        "unread": {},
    }


CONVERGED = state()
FRESH = state(member=False, classes=(), class_exists=False, remote=False, defined=False, mounted=False)


def _tasks(path: Path, block_when=(), block_keys=None, gates=True):
    """The tasks of a task file in order, blocks flattened (their `when` first, run_once/delegate_to inherited),
    the step files of tasks/main.yml included in place (without the include's own condition when not gates)."""
    for task in yaml.safe_load(path.read_text(encoding="utf-8")) or []:
        if "block" in task:
            inherited = {key: task[key] for key in ("run_once", "delegate_to") if key in task}
            when = [*block_when, *_as_list(task.get("when"))]
            yield from _block(task["block"], when, {**(block_keys or {}), **inherited})
            continue
        include = _included_file(task)
        if include in STEPS:
            # An include's condition decides every task it loads (an import's is added to each task's own).
            gate = _as_list(task.get("when")) if gates else []
            yield from _tasks(ROLE / "tasks" / include, [*block_when, *gate], block_keys)
            continue
        yield {**(block_keys or {}), **task, "block_when": list(block_when)}


def _included_file(task):
    """The file an include_tasks or import_tasks task names (a string, or `file:` with `apply:`), else None."""
    include = task.get("ansible.builtin.include_tasks") or task.get("ansible.builtin.import_tasks")
    return include.get("file") if isinstance(include, dict) else include


def _block(tasks, when, keys):
    for task in tasks:
        yield {**keys, **task, "block_when": list(when)}


def _as_list(value):
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def remote_calls(facts, reread=None, check_mode=False, class_create_rc=0, gates=True, **extra):
    """[task name (item)] of every remote call the role makes from its read on, in order."""
    role = RoleRender("spectrum_scale_client", "debian12", **LAB_VARS, **HOST, **extra)
    registered = {"spectrum_scale_client_read": {"ansible_facts": {"spectrum_scale": facts}}}
    calls = []
    for task in _tasks(ROLE / "tasks" / "main.yml", gates=gates):
        module = role.module_of(task)
        if module in CONTROLLER or task["name"].startswith(("Install the Storage Scale", "Load OS-specific")):
            continue
        scope = {
            **registered,
            "ansible_check_mode": check_mode,
            "ansible_facts": {**role.var("ansible_facts"), **IB},
            # The configuration call gathers every play host's scopes (set_fact, not run here): this node's class.
            "ansible_play_hosts": ["dgx01"],
            "hostvars": {"dgx01": {"spectrum_scale_client_config_scopes": [{"node_class": "x", "settings": {"a": 1}}]}},
        }
        templar = role.task_templar(task, **scope)
        items = templar.template(trusted(task["loop"])) if "loop" in task else [None]
        ran = []
        for item in items:
            item_templar = role.task_templar(task, **scope, **({"item": item} if item is not None else {}))
            conditions = [*task["block_when"], *_as_list(task.get("when"))]
            if all(item_templar.evaluate_conditional(trust_as_template(c)) for c in conditions):
                ran.append(item)
        label = task["name"]
        calls += [label if item is None else f"{label} ({item['device']})" for item in ran]
        if "register" in task:
            registered[task["register"]] = _result(task, ran, facts, reread, class_create_rc)
    return calls


def _result(task, ran, facts, reread, class_create_rc):
    if not ran:
        return {"skipped": True, "changed": False}
    if task["register"] == "spectrum_scale_client_read":
        return {"changed": False, "ansible_facts": {"spectrum_scale": facts}}
    if task["register"] == "spectrum_scale_client_reread":
        return {"changed": False, "ansible_facts": {"spectrum_scale": reread}}
    if task["register"] == "spectrum_scale_client_class_created":
        return {"changed": class_create_rc == 0, "rc": class_create_rc, "stderr": "already exists"}
    if "loop" in task:
        return {"changed": True, "results": [{"changed": True} for _ in ran]}
    return {"changed": task.get("changed_when") is True, "rc": 0, "stdout": ""}


READ = "Read the cluster, node class, daemon state, remote definitions and mounts (one call on the member)"
BUILD = "Build the portability layer (mmbuildgpl) and stamp it with the kernel and release"
CONFIG = [
    "Gather InfiniBand facts (verbsPorts)",
    "Apply the node class, node (verbsPorts) and cluster-wide attributes where mmlsconfig differs",
]
REREAD = "Re-read the mounts after the daemon was started or a file system defined (one call on the member)"


@pytest.mark.parametrize("check_mode", [False, True], ids=["run", "check"])
def test_a_converged_node_makes_one_read_and_no_other_read(check_mode):
    # Before issue 18: Create the state directory, Read the cluster's nodes, Read the node class, Read the daemon
    # state, Wait for the daemon to become active, Read the remote cluster definitions, Read the remote file system
    # definitions and Read the mounts (one per file system) on top of these six: 13 calls, 14 with the package task.
    assert remote_calls(CONVERGED, check_mode=check_mode) == [BUILD, READ, *CONFIG]


def test_a_fresh_node_joins_starts_defines_rereads_and_mounts():
    reread = state(mounted=False)
    assert remote_calls(FRESH, reread=reread) == [
        BUILD,
        READ,
        "Add the node to the cluster",
        "Accept the node's license (mmchlicense)",
        "Create the node class with this node",
        *CONFIG,
        "Start GPFS on the node (mmstartup)",
        "Wait for the daemon to become active",
        "Add the remote cluster {{ spectrum_scale_client_remote_cluster.name }}",
        "Define the remote file systems (ess3000_4M)",
        REREAD,
        "Mount the remote file systems on the node (mmmount) (ess3000_4M)",
    ]


STATES = {
    "converged": CONVERGED,
    "fresh": FRESH,
    "member outside the class": state(classes=()),
    "class missing": state(classes=(), class_exists=False),
    "daemon down": state(state="down"),
    "not mounted": state(mounted=False),
    "remote cluster not defined": state(remote=False),
    "file system not defined": state(defined=False),
}


@pytest.mark.parametrize("name", STATES)
@pytest.mark.parametrize("check_mode", [False, True], ids=["run", "check"])
def test_a_step_include_never_hides_a_call_its_tasks_would_make(name, check_mode):
    """membership.yml and start_mount.yml are included only when the read says they have work
    (vars/main.yml): with and without those conditions the role makes the same calls."""
    facts = STATES[name]
    gated = remote_calls(facts, reread=facts, check_mode=check_mode)
    assert gated == remote_calls(facts, reread=facts, check_mode=check_mode, gates=False)


@pytest.mark.parametrize(
    ("name", "join", "start_mount"),
    [
        ("converged", False, False),
        ("fresh", True, True),
        ("member outside the class", True, False),
        ("class missing", True, False),
        ("daemon down", False, True),
        ("not mounted", False, True),
        ("remote cluster not defined", False, True),
        ("file system not defined", False, True),
    ],
)
def test_a_converged_node_skips_each_step_in_one_decision(name, join, start_mount):
    role = RoleRender("spectrum_scale_client", "debian12", **LAB_VARS, **HOST)
    read = {"spectrum_scale_client_read": {"ansible_facts": {"spectrum_scale": STATES[name]}}}
    task = role.find_task("main.yml", READ)
    templar = role.task_templar(task, **read)
    assert templar.evaluate_conditional(trust_as_template("spectrum_scale_client_join_needed | bool")) is join
    assert (
        templar.evaluate_conditional(trust_as_template("spectrum_scale_client_start_mount_needed | bool"))
        is start_mount
    )


def test_the_second_client_joins_the_class_the_first_created():
    """Both read the class as missing; the second's mmcrnodeclass says 'already exists' and it joins instead."""
    calls = remote_calls(FRESH, reread=state(), class_create_rc=1)
    assert calls[4:6] == ["Create the node class with this node", "Add the node to the node class"]


def test_a_member_outside_the_class_is_added_to_it():
    calls = remote_calls(state(classes=()))
    assert calls == [BUILD, READ, "Add the node to the node class", *CONFIG]


def test_after_mmstartup_the_reread_decides_the_mount():
    """GPFS mounts -A yes file systems when the daemon starts: the re-read sees it, and mmmount is not run."""
    calls = remote_calls(state(state="down", mounted=False), reread=state())
    assert calls[-3:] == ["Start GPFS on the node (mmstartup)", "Wait for the daemon to become active", REREAD]
    calls = remote_calls(state(state="down", mounted=False), reread=state(mounted=False))
    assert calls[-1] == "Mount the remote file systems on the node (mmmount) (ess3000_4M)"


def test_a_node_that_only_lost_its_mount_mounts_without_a_reread():
    calls = remote_calls(state(mounted=False))
    assert calls == [BUILD, READ, *CONFIG, "Mount the remote file systems on the node (mmmount) (ess3000_4M)"]


def test_check_mode_on_a_fresh_node_does_not_wait_for_the_daemon():
    calls = remote_calls(FRESH, reread=state(mounted=False), check_mode=True)
    assert "Wait for the daemon to become active" not in calls
    assert READ in calls


def test_the_read_asks_for_what_the_steps_decide_on():
    role = RoleRender("spectrum_scale_client", "debian12", **LAB_VARS, **HOST)
    task = role.find_task("main.yml", READ)
    args = role.task_args("main.yml", READ)
    assert role.module_of(task) == "gpuforge.cluster.spectrum_scale_facts"
    assert args["gather"] == ["cluster", "nodeclass", "state", "remote_clusters", "remote_filesystems", "mounts"]
    assert (args["node"], args["node_classes"], args["devices"]) == ("gpu01", ["dgx"], ["ess3000_4M"])
    assert role.task_templar(task).template(trusted(task["delegate_to"])) == "storage01"
    without_remote = RoleRender(
        "spectrum_scale_client", "debian12", **{**LAB_VARS, "spectrum_scale_client_remote_cluster": {}}, **HOST
    )
    assert without_remote.task_args("main.yml", READ)["gather"] == ["cluster", "nodeclass", "state", "mounts"]
    # Tagged with the role's tag only: skipping one of the two steps that decide on it must not skip it.
    main = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text(encoding="utf-8"))
    tags = {_included_file(task): set(task["tags"]) for task in main}
    assert set(task["tags"]) == tags["membership.yml"] & tags["start_mount.yml"] == {"spectrum_scale"}
    reread = role.find_task("start_mount.yml", REREAD)
    assert role.task_args("start_mount.yml", REREAD)["gather"] == ["mounts"]
    assert reread["register"] == "spectrum_scale_client_reread"


def test_no_task_reads_with_a_command_of_its_own():
    """The reads the role used to make with command tasks are gone: only mmgetstate's wait loop remains."""
    text = "\n".join(path.read_text(encoding="utf-8") for path in sorted((ROLE / "tasks").glob("*.yml")))
    for gone in ("mmlscluster", "mmlsnodeclass", "mmremotecluster show", "mmremotefs show", "mmlsmount"):
        assert gone not in text, gone
    assert text.count("/mmgetstate -Y") == 1
    assert "ansible.builtin.file:" not in (ROLE / "tasks" / "portability_layer.yml").read_text(encoding="utf-8")


def test_one_configuration_call_lists_each_class_once_each_node_and_common_last():
    task = next(t for t in _tasks(ROLE / "tasks" / "main.yml") if t["name"] == CONFIG[1])
    lab = {**LAB_VARS, **HOST, "spectrum_scale_client_common_config": {"maxMBpS": 20000}}
    role = RoleRender("spectrum_scale_client", "debian12", **lab)
    dgx = {"node_class": "dgx", "settings": {"pagepool": "128G"}}
    ports = {"dgx01": "mlx5_0/1", "dgx02": "mlx5_1/1"}
    hostvars = {
        name: {"spectrum_scale_client_config_scopes": [dgx, {"node_class": name, "settings": {"verbsPorts": port}}]}
        for name, port in ports.items()
    }
    hostvars["head01"] = {}
    templar = role.task_templar(task, ansible_play_hosts=["dgx01", "dgx02", "head01"], hostvars=hostvars)
    assert templar.template(trusted("{{ spectrum_scale_client_play_scopes }}")) == [
        dgx,
        {"node_class": "dgx01", "settings": {"verbsPorts": "mlx5_0/1"}},
        {"node_class": "dgx02", "settings": {"verbsPorts": "mlx5_1/1"}},
        {"node_class": "common", "settings": {"maxMBpS": 20000}},
    ]
