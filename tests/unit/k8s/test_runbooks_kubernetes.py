"""The health_sweep and rolling_upgrade runbooks, run for real by ansible-playbook on this machine.

No Kubernetes API server can run here, so kubernetes.core is shadowed by a stand-in collection whose
k8s_drain records the arguments it is called with (name, state, kubeconfig, context, delete_options) and
changes nothing; what the runbooks ask of Kubernetes is read from that record. The node under test is
this machine over the local connection: it has no GPU, so its validation fails, which is what makes
health_sweep cordon it and rolling_upgrade keep it drained. rolling_upgrade runs with no upgrade
components and no reboot, so no role touches this machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hang_guard import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[3]
RUNBOOKS = ROOT / "playbooks" / "runbooks"

# A k8s_drain with the option names of kubernetes.core.k8s_drain (6.2.0) that appends its arguments to
# $GPUFORGE_TEST_K8S_CALLS, one JSON object a line.
FAKE_K8S_DRAIN = """#!/usr/bin/python
import json
import os

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(required=True),
            state=dict(default="drain", choices=["cordon", "drain", "uncordon"]),
            kubeconfig=dict(type="raw"),
            context=dict(),
            delete_options=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    with open(os.environ["GPUFORGE_TEST_K8S_CALLS"], "a", encoding="utf-8") as calls:
        calls.write(json.dumps(module.params, sort_keys=True) + "\\n")
    module.exit_json(changed=True, result="recorded")


main()
"""


def fake_kubernetes_core(tmp: Path) -> Path:
    modules = tmp / "collections" / "ansible_collections" / "kubernetes" / "core" / "plugins" / "modules"
    modules.mkdir(parents=True)
    (modules / "k8s_drain.py").write_text(FAKE_K8S_DRAIN, encoding="utf-8")
    return tmp / "collections"


def inventory(tmp: Path, kubeconfig: bool = True, **node_vars) -> Path:
    """One GPU node (this machine, local connection) named dgx-a.k8s.example in Kubernetes."""
    group_vars = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "ansible_become": False,
        "gpuforge_expected_system": "dgx1-v100-edr",
        "gpuforge_expected_gpu_count": 8,
        "gpuforge_gpu_architecture": "Volta",
    }
    if kubeconfig:
        (tmp / "kubeconfig").write_text("apiVersion: v1\nkind: Config\n", encoding="utf-8")
        group_vars["gpuforge_kubeconfig"] = str(tmp / "kubeconfig")
    hosts = {"node-a": {"k8s_node_name": "dgx-a.k8s.example", **node_vars}}
    data = {"all": {"children": {"gpu_nodes": {"hosts": hosts, "vars": group_vars}}}}
    path = tmp / "hosts.yml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def run_runbook(tmp: Path, playbook: Path, hosts: Path, extravars: dict) -> tuple[int, list[dict], dict]:
    """Run a runbook; return its exit code, the recorded k8s_drain calls and the json callback's output."""
    calls = tmp / "k8s-calls.jsonl"
    calls.touch()
    config_paths = [fake_kubernetes_core(tmp), ROOT / ".ansible" / "collections", ROOT / "collection"]
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        # The stand-in must be found before the real kubernetes.core (site-packages come last).
        "ANSIBLE_COLLECTIONS_PATH": os.pathsep.join(str(p) for p in config_paths),
        "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(tmp / "facts"),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json",
        "GPUFORGE_TEST_K8S_CALLS": str(calls),
        # The module arguments in the results (`invocation`), which a test reads: ansible-core 2.21 leaves them out
        # unless INJECT_INVOCATION is on ("task results - Python and Powershell modules do not include the
        # ``invocation`` task result key by default", 2.21 changelog); 2.19 has no such setting and always adds them.
        "ANSIBLE_INJECT_INVOCATION": "true",
    }
    result = subprocess.run(
        [str(Path(sys.executable).with_name("ansible-playbook")), "-i", str(hosts), str(playbook),
         "-e", json.dumps(extravars)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S, check=False,
    )  # fmt: skip
    # ansible.cfg's timer callback prints its line after the json callback's document.
    start = result.stdout.find("{")
    try:
        output = json.JSONDecoder().raw_decode(result.stdout[start:])[0]
    except (json.JSONDecodeError, ValueError):
        pytest.fail(f"no JSON from ansible-playbook (rc {result.returncode}): {result.stdout[-3000:]}{result.stderr}")
    recorded = [json.loads(line) for line in calls.read_text(encoding="utf-8").splitlines()]
    return result.returncode, recorded, output


def task_results(output: dict, name: str) -> list[dict]:
    return [
        host_result
        for play in output["plays"]
        for task in play["tasks"]
        if task["task"]["name"] == name
        for host_result in task["hosts"].values()
    ]


def cordon(name, kubeconfig, state):
    return {"name": name, "state": state, "kubeconfig": str(kubeconfig), "context": None}


def test_health_sweep_cordons_a_failing_node_through_the_inventory_kubeconfig(tmp_path):
    rc, calls, output = run_runbook(
        tmp_path, RUNBOOKS / "health_sweep.yml", inventory(tmp_path), {"gpuforge_drain_failing": True}
    )
    assert rc == 0, json.dumps(output)[-3000:]
    assert task_results(output, "Name the failing checks")[0]["ansible_facts"]["gpuforge_sweep_unhealthy"] is True
    assert calls == [{**cordon("dgx-a.k8s.example", tmp_path / "kubeconfig", "cordon"), "delete_options": {}}]


def test_health_sweep_leaves_kubernetes_alone_unless_asked_or_without_a_kubeconfig(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _, calls, _ = run_runbook(tmp_path / "a", RUNBOOKS / "health_sweep.yml", inventory(tmp_path / "a"), {})
    assert calls == []
    hosts = inventory(tmp_path / "b", kubeconfig=False)
    rc, calls, _ = run_runbook(tmp_path / "b", RUNBOOKS / "health_sweep.yml", hosts, {"gpuforge_drain_failing": True})
    assert (rc, calls) == (0, [])


NO_UPGRADE = {"gpuforge_upgrade_components": [], "gpuforge_upgrade_reboot": False}


def test_rolling_upgrade_drains_through_the_inventory_kubeconfig_and_keeps_a_failing_node_drained(tmp_path):
    rc, calls, output = run_runbook(tmp_path, RUNBOOKS / "rolling_upgrade.yml", inventory(tmp_path), NO_UPGRADE)
    # The node fails validation after the (empty) upgrade: the rollout stops and the node is not uncordoned.
    assert rc != 0
    assert task_results(output, "Keep an unhealthy node drained and stop the rollout")[0]["failed"] is True
    drain_options = {"ignore_daemonsets": True, "delete_emptydir_data": True, "wait_timeout": 600}
    assert [{k: v for k, v in call.items() if k != "delete_options"} for call in calls] == [
        cordon("dgx-a.k8s.example", tmp_path / "kubeconfig", "drain")
    ]
    assert drain_options.items() <= calls[0]["delete_options"].items()


def newest_release(os_key: str, package: str) -> str:
    """The newest driver release vendor_facts lists for `package` on `os_key` (NVIDIA's CUDA repository)."""
    facts = yaml.safe_load((ROOT / "vendor_facts" / "nvidia-cuda" / f"{os_key}.yml").read_text(encoding="utf-8"))
    versions = next(p["versions"] for p in facts["packages"] if p["name"] == package)
    return max((v.split(":")[-1].split("-")[0] for v in versions), key=lambda v: [int(x) for x in v.split(".")])


@pytest.mark.parametrize("request_var", ["nvidia_driver_branch", "gpuforge_upgrade_driver_branch"])
def test_rolling_upgrade_turns_a_branch_into_a_release_the_os_repository_publishes(tmp_path, request_var):
    # Debian 12's pin is 550.90.07; ask for the 570 branch.
    extravars = {**NO_UPGRADE, "gpuforge_os_key": "debian12", request_var: "570"}
    _, calls, output = run_runbook(tmp_path, RUNBOOKS / "rolling_upgrade.yml", inventory(tmp_path), extravars)
    release = newest_release("debian12", "cuda-drivers-570")
    shown = task_results(output, "Show the driver release this node is upgraded to")[0]["msg"]
    assert shown == {"release": release, "branch": "570"}
    # What the driver role installs and checks (nvidia_driver_version follows gpuforge_nvidia_driver_version;
    # roles/nvidia_driver/tasks/main.yml wants N.N[.N], verify.yml wants nvidia-smi to answer it) and the
    # branch validation then expects agree.
    assert release.split(".")[0] == "570" and all(part.isdigit() for part in release.split("."))
    check = task_results(
        output, "Read the GPUs and InfiniBand adapters and judge the node against its expected system"
    )[0]
    assert check["invocation"]["module_args"]["expected"]["driver_branch"] == "570"
    assert len(calls) == 1


def test_rolling_upgrade_refuses_a_branch_the_os_repository_does_not_publish_before_draining(tmp_path):
    # NVIDIA's ubuntu2204 repository, as vendor_facts records it, has R535 only.
    extravars = {**NO_UPGRADE, "gpuforge_os_key": "ubuntu2204", "nvidia_driver_branch": "550"}
    rc, calls, output = run_runbook(tmp_path, RUNBOOKS / "rolling_upgrade.yml", inventory(tmp_path), extravars)
    assert rc != 0
    failed = task_results(output, "Refuse a driver branch this OS's repository does not publish")[0]
    assert "branch 550" in failed["msg"] and "ubuntu2204" in failed["msg"] and "535" in failed["msg"]
    assert calls == []


def test_health_sweep_names_a_node_without_a_verdict_as_not_checked(tmp_path):
    """A node that fails before its check (here: no Python where the inventory says) is not reported healthy."""
    hosts = inventory(tmp_path)
    data = yaml.safe_load(hosts.read_text(encoding="utf-8"))
    data["all"]["children"]["gpu_nodes"]["hosts"]["node-b"] = {"ansible_python_interpreter": "/nonexistent/python3"}
    hosts.write_text(yaml.safe_dump(data), encoding="utf-8")
    rc, _, output = run_runbook(tmp_path, RUNBOOKS / "health_sweep.yml", hosts, {})
    assert rc != 0  # node-b failed
    summary = task_results(output, "Report healthy, failing and unchecked nodes")[0]["msg"]
    # node-a has no GPU tools on this machine: checked and failing
    assert summary == {"healthy": [], "failing": ["node-a"], "not_checked": ["node-b"]}
