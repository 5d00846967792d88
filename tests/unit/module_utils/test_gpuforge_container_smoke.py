"""gpuforge_container_smoke: nvidia-smi -L and vectorAdd parsing, engine command lines, OCI hook and CDI edits,
and the judgements (engine output, injected device files and library mounts)."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_container_smoke import (
    HookConfigError,
    add_oci_hook,
    apply_cdi,
    bundle_spec,
    container_view,
    engine_commands,
    expected_device_nodes,
    judge_engine,
    judge_injection,
    overall_status,
    parse_gpu_list,
    parse_ldd,
    vector_add_passed,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
# The first line of a public `nvidia-smi -L` on an H100 node (tests/fixtures/nvidia-smi/SOURCES.md).
H100_LINE = (FIXTURES / "nvidia-smi" / "stas00_h100_nvlink_e_EXCERPT.txt").read_text().splitlines()[0]
SMI_L = ["nvidia-smi", "-L"]
UUID_A = "GPU-abcdefab-cdef-abdc-abcd-abababababab"
UUID_B = "GPU-12345678-1234-1234-1234-123456789abc"
HOOK_FILE = {
    "version": "1.0.0",
    "hook": {
        "path": "/usr/bin/nvidia-container-runtime-hook",
        "args": ["nvidia-container-runtime-hook", "prestart"],
        "env": ["PATH=/usr/bin"],
    },
    "when": {"always": True, "commands": [".*"]},
    "stages": ["prestart"],
}


def test_parse_gpu_list_reads_the_real_line_and_skips_the_rest():
    assert parse_gpu_list(H100_LINE) == [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": UUID_A}]
    text = f"{H100_LINE}\n  MIG 1g.10gb     Device  0: (UUID: MIG-1111)\nGPU 1: Tesla V100-SXM2-16GB (UUID: {UUID_B})\n"
    assert parse_gpu_list(text) == [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": UUID_A},
        {"index": 1, "name": "Tesla V100-SXM2-16GB", "uuid": UUID_B},
    ]
    assert parse_gpu_list("No devices were found\n") == []


def test_vector_add_passed_wants_the_whole_line():
    assert vector_add_passed("[Vector addition of 50000 elements]\nTest PASSED\nDone\n")
    assert not vector_add_passed("Result verification failed at element 3!\n")
    assert not vector_add_passed("echo Test PASSED later\n")


def test_engine_commands_per_runtime():
    tools = {"podman": "/usr/bin/podman", "ctr": "/usr/bin/ctr", "docker": "/usr/bin/docker"}
    assert engine_commands("podman-cdi", "img@sha256:1", ["nvidia-smi", "-L"], "n", tools) == [
        ["/usr/bin/podman", "run", "--rm", "--name", "n", "--device", "nvidia.com/gpu=all", "img@sha256:1", *SMI_L]
    ]
    hook = engine_commands("podman-hook", "img", [], "n", tools)
    assert hook == [["/usr/bin/podman", "run", "--rm", "--name", "n", "-e", "NVIDIA_VISIBLE_DEVICES=all", "img"]]
    pull, run = engine_commands("containerd", "img", ["nvidia-smi", "-L"], "n", tools)
    assert pull == ["/usr/bin/ctr", "images", "pull", "img"]
    assert run[run.index("--runc-binary") + 1] == "/usr/bin/nvidia-container-runtime"
    assert run[-4:] == ["img", "n", "nvidia-smi", "-L"]
    assert "--runtime=nvidia" in engine_commands("docker", "img", [], "n", tools)[0]
    with pytest.raises(ValueError, match="unknown runtime"):
        engine_commands("lxc", "img", [], "n", tools)


def test_judge_engine_gpu_list():
    expected = [{"uuid": UUID_A}, {"uuid": UUID_B}]
    both = f"{H100_LINE}\nGPU 1: X (UUID: {UUID_B})\n"
    check = judge_engine("podman-cdi", "gpu_list", expected, 0, both)
    assert check["name"] == "container_gpus_podman_cdi" and check["status"] == "PASS" and check["remedy"] == ""
    one = judge_engine("podman-cdi", "gpu_list", expected, 0, H100_LINE)
    assert one["status"] == "FAIL" and one["observed"]["missing"] == [UUID_B]
    assert "saw 1 of the node's 2 GPU(s)" in one["remedy"]
    failed = judge_engine("containerd", "gpu_list", expected, 125, "Error: crun: ...")
    assert failed["status"] == "FAIL" and "exit status 125" in failed["remedy"]
    stranger = judge_engine("docker", "gpu_list", [{"uuid": UUID_A}], 0, both)
    assert stranger["status"] == "FAIL" and stranger["observed"]["unexpected"] == [UUID_B]
    # No expected GPU at all cannot pass.
    assert judge_engine("docker", "gpu_list", [], 0, "")["status"] == "FAIL"


def test_judge_engine_vector_add():
    assert judge_engine("podman-hook", "vector_add", [], 0, "Test PASSED\nDone\n")["status"] == "PASS"
    assert judge_engine("podman-hook", "vector_add", [], 1, "Test PASSED\n")["status"] == "FAIL"
    failed = judge_engine("podman-hook", "vector_add", [], 0, "Failed to allocate device vector A\n")
    assert failed["status"] == "FAIL" and failed["observed"]["test_passed"] is False


def test_parse_ldd():
    text = (
        "\tlinux-vdso.so.1 (0x00007ffd)\n"
        "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007fb5d426d000)\n"
        "\t/lib64/ld-linux-x86-64.so.2 (0x00007fb5d446e000)\n"
    )
    assert parse_ldd(text) == ["/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"]


def test_bundle_spec_and_oci_hook():
    default = {
        "process": {"args": ["sh"], "terminal": True, "env": ["PATH=/bin"]},
        "mounts": [{"destination": "/proc", "type": "proc"}, {"destination": "/sys/fs/cgroup", "type": "cgroup"}],
    }
    spec = bundle_spec(default, ["/bin/sleep"], ["A=1"])
    assert spec["process"] == {"args": ["/bin/sleep"], "terminal": False, "env": ["PATH=/bin", "A=1"]}
    assert spec["mounts"] == [{"destination": "/proc", "type": "proc"}]
    assert add_oci_hook(spec, HOOK_FILE) == ["prestart"]
    assert spec["hooks"] == {"prestart": [HOOK_FILE["hook"]]}
    narrow = {**HOOK_FILE, "when": {"commands": ["^/usr/bin/nvidia-smi$"]}}
    other = bundle_spec({}, ["/bin/sleep"], [])
    assert add_oci_hook(other, narrow) == [] and "hooks" not in other
    with pytest.raises(HookConfigError, match=re.escape("only 1.0.0")):
        add_oci_hook({}, {**HOOK_FILE, "version": "0.1.0"})
    with pytest.raises(HookConfigError, match=re.escape("without hook.path")):
        add_oci_hook({}, {**HOOK_FILE, "stages": []})


def _fake_stat(numbers: dict):
    def stat_fn(path):
        if path not in numbers:
            raise FileNotFoundError(2, "No such file or directory")
        return SimpleNamespace(st_mode=stat.S_IFCHR | 0o666, st_rdev=os.makedev(*numbers[path]))

    return stat_fn


CDI = {
    "cdiVersion": "0.5.0",
    "kind": "nvidia.com/gpu",
    "containerEdits": {
        "deviceNodes": [{"path": "/dev/nvidiactl"}],
        "env": ["NVIDIA_VISIBLE_DEVICES=void"],
        "hooks": [{"hookName": "createContainer", "path": "/usr/bin/nvidia-ctk", "args": ["nvidia-ctk", "hook"]}],
        "mounts": [{"hostPath": "/usr/lib/libcuda.so.1", "containerPath": "/usr/lib/libcuda.so.1"}],
    },
    "devices": [
        {"name": "0", "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0"}]}},
        {"name": "all", "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0"}, {"path": "/dev/nvidia1"}]}},
    ],
}


def test_apply_cdi_adds_devices_with_the_node_numbers_mounts_env_and_hooks():
    spec = bundle_spec({}, ["/bin/sleep"], [])
    stat_fn = _fake_stat({"/dev/nvidiactl": (195, 255), "/dev/nvidia0": (195, 0), "/dev/nvidia1": (195, 1)})
    added = apply_cdi(spec, CDI, "all", stat_fn)
    assert added == {
        "devices": ["/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia1"],
        "mounts": ["/usr/lib/libcuda.so.1"],
        "hooks": ["createContainer"],
    }
    assert spec["linux"]["devices"][0] == {
        "path": "/dev/nvidiactl",
        "type": "c",
        "major": 195,
        "minor": 255,
        "fileMode": 0o666,
        "uid": 0,
        "gid": 0,
    }
    assert {"allow": True, "type": "c", "major": 195, "minor": 1, "access": "rwm"} in spec["linux"]["resources"][
        "devices"
    ]
    assert spec["process"]["env"] == ["NVIDIA_VISIBLE_DEVICES=void"]
    assert spec["hooks"]["createContainer"][0]["path"] == "/usr/bin/nvidia-ctk"
    assert spec["mounts"][0]["options"] == ["ro", "nosuid", "nodev", "bind"]


def test_apply_cdi_errors():
    with pytest.raises(HookConfigError, match=re.escape("nvidia.com/gpu=7 is not in the spec")):
        apply_cdi({}, CDI, "7", _fake_stat({}))
    with pytest.raises(HookConfigError, match=re.escape("/dev/nvidiactl does not exist on this node")):
        apply_cdi({}, CDI, "0", _fake_stat({"/dev/nvidia0": (195, 0)}))
    with pytest.raises(HookConfigError, match=re.escape("not nvidia.com/gpu")):
        apply_cdi({}, {**CDI, "kind": "vendor.com/fpga"}, "0", _fake_stat({}))


def test_expected_device_nodes_uses_minor_numbers_and_the_node_files(tmp_path):
    numbers = {str(tmp_path / "nvidia4"): (195, 4), str(tmp_path / "nvidiactl"): (195, 255)}
    wanted = expected_device_nodes(
        [{"index": 0, "minor_number": 4}, {"index": 1, "minor_number": None}], str(tmp_path), _fake_stat(numbers)
    )
    # nvidia1 (index 1, no minor number) is missing on the node; the optional control files it lacks are left out.
    assert wanted == {"/dev/nvidia4": [195, 4], "/dev/nvidia1": None, "/dev/nvidiactl": [195, 255]}
    with pytest.raises(ValueError, match=re.escape("expected_gpus[1] has no minor_number or index (got 'x')")):
        expected_device_nodes([{"index": 0}, {"minor_number": "x"}], str(tmp_path), _fake_stat(numbers))


def test_judge_injection():
    wanted = {"/dev/nvidia0": [195, 0], "/dev/nvidiactl": [195, 255]}
    view = {
        "devices": [
            {"path": "/dev/nvidia0", "major": 195, "minor": 0},
            {"path": "/dev/nvidiactl", "major": 195, "minor": 255},
        ],
        "mounts": ["/", "/proc", "/usr/lib/x86_64-linux-gnu/libcuda.so.535.183.01"],
    }
    libraries = ["/usr/lib64/libcuda.so.535.183.01"]
    devices, libs = judge_injection("oci-hook", wanted, view, libraries)
    assert devices["status"] == "PASS" and libs["status"] == "PASS"
    assert libs["observed"]["mounted"] == libraries
    assert overall_status([devices, libs]) == "PASS"
    wrong = {"devices": [{"path": "/dev/nvidia0", "major": 195, "minor": 3}], "mounts": ["/"]}
    devices, libs = judge_injection("cdi", wanted, wrong, libraries)
    assert devices["status"] == "FAIL"
    assert devices["observed"]["missing"] == ["/dev/nvidiactl"]
    assert devices["observed"]["wrong_numbers"] == ["/dev/nvidia0"]
    assert libs["status"] == "FAIL" and libs["observed"]["not_mounted"] == libraries
    assert overall_status([devices, libs]) == "FAIL"
    absent = judge_injection("oci-hook", {"/dev/nvidia0": None}, {"devices": [], "mounts": []}, [])[0]
    assert absent["status"] == "FAIL" and "missing on the node itself: /dev/nvidia0" in absent["remedy"]
    [failed] = judge_injection("oci-hook", wanted, {}, [], rc=1, error="error running hook #0")
    assert failed["status"] == "FAIL" and failed["observed"]["runc_create_rc"] == 1


def test_container_view_reads_dev_and_mountinfo(tmp_path):
    (tmp_path / "7" / "root" / "dev").mkdir(parents=True)
    (tmp_path / "7" / "root" / "dev" / "nvidia-not-a-device").write_text("")
    (tmp_path / "7" / "mountinfo").write_text(
        "22 1 0:21 / / rw,relatime - overlay overlay rw\n"
        "23 22 0:5 /libcuda.so.1 /usr/lib/libcuda.so.1 ro - ext4 /dev/sda1 rw\n"
    )
    assert container_view(7, str(tmp_path)) == {"devices": [], "mounts": ["/", "/usr/lib/libcuda.so.1"]}
