"""container_gpu_smoke: engine mode against answered commands, check mode, option errors.

Bundle mode runs runc for real: tests/unit/roles/test_nvidia_container_toolkit_smoke_runc.py.
"""

from __future__ import annotations

import pytest
from ansible_collections.gpuforge.cluster.plugins.modules import container_gpu_smoke

GPUS = [
    {"index": 0, "minor_number": 0, "uuid": "GPU-00000000-1111-2222-3333-444444444444"},
    {"index": 1, "minor_number": 1, "uuid": "GPU-55555555-6666-7777-8888-999999999999"},
]
SMI_L = "".join(f"GPU {g['index']}: NVIDIA H100 80GB HBM3 (UUID: {g['uuid']})\n" for g in GPUS)


def tools(name):
    return f"/usr/bin/{name}"


class Engines:
    """Answers the engines through timeout(1): argv -> (rc, out, err) by the engine's subcommand."""

    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def __call__(self, argv, **kwargs):
        self.calls.append(argv)
        command = argv[3:]  # timeout --kill-after=N SECONDS <command>
        for key, answer in self.answers.items():
            if key in " ".join(command):
                return answer
        raise AssertionError(f"unexpected command {command}")


def test_engine_mode_checks_each_runtime(ansible_module):
    engines = Engines({"--device nvidia.com/gpu=all": (0, SMI_L, ""), "ctr images pull": (0, "", ""),
                       "ctr run": (0, SMI_L.splitlines()[0] + "\n", "")})  # fmt: skip
    args = {"runtimes": ["podman-cdi", "containerd"], "image": "nvcr.io/nvidia/cuda@sha256:ab", "expected_gpus": GPUS}
    result = ansible_module(container_gpu_smoke, args, engines, bin_path=tools)
    cdi, containerd = result["checks"]
    assert cdi["name"] == "container_gpus_podman_cdi" and cdi["status"] == "PASS"
    assert containerd["status"] == "FAIL" and containerd["observed"]["missing"] == [GPUS[1]["uuid"]]
    assert result["verdict"] == "FAIL" and result["changed"] is False
    assert [call[3:5] for call in engines.calls] == [
        ["/usr/bin/podman", "run"],
        ["/usr/bin/ctr", "images"],
        ["/usr/bin/ctr", "run"],
    ]


def test_engine_mode_stops_a_runtime_at_a_failed_pull(ansible_module):
    engines = Engines({"ctr images pull": (1, "", "ctr: failed to resolve reference"), "ctr run": (0, SMI_L, "")})
    args = {"runtimes": ["containerd"], "image": "img", "expected_gpus": GPUS}
    result = ansible_module(container_gpu_smoke, args, engines, bin_path=tools)
    [check] = result["checks"]
    assert check["status"] == "FAIL" and "failed to resolve reference" in check["observed"]["output_tail"]
    assert len(engines.calls) == 1


def test_vector_add(ansible_module):
    engines = Engines({"podman run": (0, "[Vector addition of 50000 elements]\nTest PASSED\nDone\n", "")})
    args = {"runtimes": ["podman-hook"], "image": "img", "command": [], "check": "vector_add", "expected_gpus": GPUS}
    result = ansible_module(container_gpu_smoke, args, engines, bin_path=tools)
    assert result["checks"][0]["status"] == "PASS" and result["verdict"] == "PASS"


def test_check_mode_runs_nothing(ansible_module):
    def never(argv, **kwargs):
        raise AssertionError(f"ran {argv} in check mode")

    args = {"runtimes": ["docker"], "image": "img", "expected_gpus": GPUS}
    result = ansible_module(container_gpu_smoke, args, never, check_mode=True, bin_path=tools)
    assert result["commands"][0][:2] == ["/usr/bin/docker", "run"] and "checks" not in result


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"runtimes": [], "image": "img", "expected_gpus": GPUS}, "needs at least one of runtimes"),
        ({"runtimes": ["docker"], "expected_gpus": GPUS}, "needs image"),
        ({"runtimes": ["docker"], "image": "img", "expected_gpus": []}, "expected_gpus is empty"),
    ],
)
def test_option_errors(ansible_module, args, message):
    result = ansible_module(container_gpu_smoke, args, expect_failure=True, bin_path=tools)
    assert message in result["msg"]


def test_missing_engine_is_named(ansible_module):
    args = {"runtimes": ["podman-cdi"], "image": "img", "expected_gpus": GPUS}
    result = ansible_module(container_gpu_smoke, args, expect_failure=True, bin_path=lambda name: None)
    assert "podman not found" in result["msg"] and "remove podman-cdi from runtimes" in result["msg"]
