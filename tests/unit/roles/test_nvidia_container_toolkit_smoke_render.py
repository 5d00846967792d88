"""nvidia_container_toolkit smoke test task file: which runtimes and methods it checks, what it hands the module,
the record it writes, and that it is opt-in."""

from __future__ import annotations

import json

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_records import node_check_records
from gpu_stack_render import RoleRender

GPUS = [{"index": 0, "minor_number": 0, "uuid": "GPU-0"}, {"index": 1, "minor_number": 1, "uuid": "GPU-1"}]
FACTS = {"nvidia_smi": {"gpus": GPUS}}


def render(**extra) -> RoleRender:
    render = RoleRender("nvidia_container_toolkit", "debian12", **extra)
    render.templar.available_variables = {
        **render.templar.available_variables,
        "ansible_facts": {**render.templar.available_variables["ansible_facts"], **FACTS},
    }
    return render


@pytest.mark.parametrize(
    ("runtimes", "cdi", "engine", "methods"),
    [
        (["crio"], False, [], ["oci-hook"]),
        (["podman", "containerd"], True, ["podman-hook", "podman-cdi", "containerd"], ["oci-hook", "cdi"]),
        (["docker", "podman"], False, ["podman-hook", "docker"], ["oci-hook"]),
    ],
)
def test_runtimes_and_methods_follow_the_configuration(runtimes, cdi, engine, methods):
    role = render(nvidia_container_toolkit_runtimes=runtimes, nvidia_container_toolkit_cdi=cdi)
    assert role.var("nvidia_container_toolkit_smoke_test_runtimes") == engine
    assert role.var("nvidia_container_toolkit_smoke_test_methods") == methods


def test_off_by_default_and_included_with_its_tag():
    role = render()
    assert role.var("nvidia_container_toolkit_smoke_test") is False
    task = role.find_task("main.yml", "Start GPU containers through the configured runtimes")
    assert task["ansible.builtin.include_tasks"]["file"] == "smoke_test.yml"
    assert "nvidia_container_toolkit_smoke_test" in task["tags"]
    assert role.conditions("main.yml", "Start GPU containers through the configured runtimes") == [False]


def test_bundle_mode_arguments():
    role = render(
        nvidia_container_toolkit_smoke_test_mode="bundle",
        nvidia_container_toolkit_cdi=True,
        nvidia_container_toolkit_smoke_list={
            "stdout_lines": ["/dev/nvidiactl", "/usr/bin/nvidia-smi", "/usr/lib/x86_64-linux-gnu/libcuda.so.535.183.01"]
        },
        nvidia_container_toolkit_smoke_cdi={"content": "a2luZDogbnZpZGlhLmNvbS9ncHUK"},  # "kind: nvidia.com/gpu"
    )
    args = role.task_args("smoke_test.yml", "Start a GPU container through each configured runtime")
    assert args["mode"] == "bundle" and args["runtimes"] == []
    assert args["expected_gpus"] == GPUS
    assert args["methods"] == ["oci-hook", "cdi"]
    assert args["hook_config"] == "/usr/share/containers/oci/hooks.d/oci-nvidia-hook.json"
    assert args["cdi_spec"] == {"kind": "nvidia.com/gpu"}
    assert args["libraries"] == ["/usr/lib/x86_64-linux-gnu/libcuda.so.535.183.01"]


def test_the_file_holds_node_check_records_and_no_timestamp():
    checks = [
        {"name": "container_devices_oci_hook", "status": "FAIL", "observed": {}, "expected": {}, "remedy": "x"},
        {"name": "container_driver_libraries_oci_hook", "status": "PASS", "observed": {}, "expected": {}, "remedy": ""},
    ]
    role = render(
        nvidia_container_toolkit_smoke_test_dir="/runs/r1/validation",
        nvidia_container_toolkit_smoke={"verdict": "FAIL", "checks": checks},
    )
    args = role.task_args("smoke_test.yml", "Record the smoke test")
    assert args["dest"] == "/runs/r1/validation/container-smoke-gpu01.json"
    record = json.loads(args["content"])
    assert {key: value for key, value in record.items() if key != "records"} == {
        "schema_version": 1,
        "host": "gpu01",
        "checked_at": None,
        "system": None,
    }
    assert [(r["node"], r["check"], r["verdict"], r["remedy"]) for r in record["records"]] == [
        ("gpu01", "container_devices_oci_hook", "FAIL", "x"),
        ("gpu01", "container_driver_libraries_oci_hook", "PASS", ""),
    ]
    records = node_check_records(record, run_id="r1")
    assert [(r["check"], r["verdict"]) for r in records] == [
        ("container_devices_oci_hook", "FAIL"),
        ("container_driver_libraries_oci_hook", "PASS"),
    ]
    assert role.conditions("smoke_test.yml", "Containers see the node's GPUs", key="that") == [False]
