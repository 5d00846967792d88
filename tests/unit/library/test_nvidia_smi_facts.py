"""nvidia_smi_facts module, with run_command answered by the lab's simulated nvidia-smi."""

from __future__ import annotations

import io
import json
from functools import partial

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_nvidia_smi as nv
from ansible_collections.gpuforge.cluster.plugins.modules import nvidia_smi_facts
from gpuforge_sim import nvidia_smi

from gpuforge.lab.profiles import hardware_document, load_profile


class SimRunner:
    """run_command stand-in: runs the simulated nvidia-smi in-process; `override` maps argv tuples to answers."""

    def __init__(self, override=None):
        self.override = override or {}
        self.calls = []

    def __call__(self, args, **kwargs):
        self.calls.append((args, kwargs))
        key = tuple(args[1:])
        if key in self.override:
            return self.override[key]
        out, err = io.StringIO(), io.StringIO()
        rc = nvidia_smi.main(list(args[1:]), out=out, err=err)
        return rc, out.getvalue(), err.getvalue()


@pytest.fixture
def node(tmp_path, monkeypatch):
    (tmp_path / "lib" / "modules").mkdir(parents=True)
    (tmp_path / "lib" / "modules" / "nvidia.ko").write_text("", encoding="ascii")
    monkeypatch.setenv("GPUFORGE_LAB_RUN", str(tmp_path / "run"))
    monkeypatch.setenv("GPUFORGE_LAB_LIB", str(tmp_path / "lib"))
    monkeypatch.setenv("GPUFORGE_LAB_PERSISTENCED_DIR", str(tmp_path / "p"))
    monkeypatch.setenv("GPUFORGE_LAB_HARDWARE", str(tmp_path / "hardware.json"))

    def make(profile, faults=None):
        document = hardware_document(load_profile(profile), faults or [])
        (tmp_path / "hardware.json").write_text(json.dumps(document), encoding="utf-8")

    return make


@pytest.fixture
def bin_paths():
    return {"nvidia-smi": "/usr/bin/nvidia-smi"}


@pytest.fixture
def run_module(ansible_module, bin_paths):
    return partial(ansible_module, nvidia_smi_facts, bin_path=bin_paths.get)


def test_dgx1_facts(node, run_module):
    node("dgx1-v100-edr")
    runner = SimRunner()
    result = run_module({"clock_event_samples": 3, "clock_event_interval_ms": 0}, runner, check_mode=True)
    facts = result["ansible_facts"]["nvidia_smi"]
    assert result["changed"] is False
    query = "--query-gpu=" + ",".join(nv.CLOCK_EVENT_FIELDS["clocks_event_reasons"])
    assert [call[0] for call in runner.calls] == [
        ["/usr/bin/nvidia-smi", "-q", "-x"],
        ["/usr/bin/nvidia-smi", "topo", "-m"],
        ["/usr/bin/nvidia-smi", "nvlink", "--status"],
        ["/usr/bin/nvidia-smi", "nvlink", "-e"],
    ] + [["/usr/bin/nvidia-smi", query, "--format=csv"]] * 3
    assert all(call[1]["environ_update"] == {"LC_ALL": "C"} for call in runner.calls)
    assert (facts["driver_version"], facts["cuda_version"], facts["gpu_count"]) == ("535.183.01", "12.2", 8)
    assert facts["gpu_product_label"] == "Tesla-V100-SXM2-16GB"
    gpu0 = facts["gpus"][0]
    assert gpu0["bus_id"] == "00000000:06:00.0"
    assert gpu0["product_label"] == "Tesla-V100-SXM2-16GB"
    assert gpu0["nics"] == {"mlx5_0": "PIX", "mlx5_1": "PHB", "mlx5_2": "SYS", "mlx5_3": "SYS"}
    assert gpu0["peers"]["GPU3"] == "NV2"
    assert (gpu0["cpu_affinity"], gpu0["numa_affinity"]) == ("0-19,40-59", "0")
    assert (gpu0["nvlink"]["active_links"], gpu0["nvlink"]["total_speed_gbyte_per_s"]) == (6, 154.686)
    assert (gpu0["ecc"]["volatile"]["corrected"], gpu0["ecc"]["volatile"]["uncorrected"]) == (0, 0)
    assert gpu0["nvlink_errors"][5] == {"link": 5, "replay_errors": 0, "recovery_errors": 0, "crc_errors": 0}
    assert gpu0["clock_events"] == {
        "samples": 3,
        "active": dict.fromkeys(("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"), 0),
    }
    assert facts["errors"] == [] and facts["notes"] == [] and facts["unreachable_gpus"] == []


def test_faults_show_in_facts(node, run_module):
    node(
        "dgx-h100-ndr",
        [
            {"type": "ecc_dbe", "gpu": 1, "count": 2},
            {"type": "row_remap_pending", "gpu": 2},
            {"type": "pcie_width_degraded", "gpu": 3, "width": 8},
            {"type": "thermal_slowdown", "gpu": 4},
        ],
    )
    gpus = run_module({"clock_event_interval_ms": 0}, SimRunner())["ansible_facts"]["nvidia_smi"]["gpus"]
    assert gpus[1]["ecc"]["volatile"]["uncorrected"] == 2
    assert gpus[2]["remapped_rows"]["pending"] is True and gpus[2]["memory_repair_pending"] is True
    assert (gpus[3]["pcie"]["width_current"], gpus[3]["pcie"]["width_max"]) == (8, 16)
    assert "hw_thermal_slowdown" in gpus[4]["active_throttle_reasons"]
    assert gpus[0]["nvlink"]["active_links"] == 18


def test_nvlink_not_supported_is_a_note(node, run_module):
    node("vsphere-t4-vgpu-roce")
    runner = SimRunner({("nvlink", "--status"): (3, "", "NVLink is not supported on this device\n")})
    facts = run_module({"clock_event_interval_ms": 0}, runner)["ansible_facts"]["nvidia_smi"]
    assert facts["nvlink"] is None and facts["gpus"][0]["nvlink"] is None
    assert facts["notes"] == [
        "nvidia-smi nvlink --status not available (exit 3): NVLink is not supported on this device"
    ]
    assert facts["gpu_product_label"] == "GRID-T4-16C"


def test_driver_not_loaded_fails_with_exit_code_and_fix(node, run_module, tmp_path):
    node("dgx1-v100-edr")
    (tmp_path / "lib" / "modules" / "nvidia.ko").unlink()
    result = run_module({}, SimRunner(), expect_failure=True)
    assert result["msg"].startswith("nvidia-smi -q -x exited with code 9: the nvidia kernel module is not loaded")
    assert "modprobe nvidia" in result["msg"]


def test_fallen_off_bus_fails_or_reports_and_reads_the_others(node, run_module):
    node("dgx1-v100-edr", [{"type": "gpu_fallen_off_bus", "gpu": 0}])
    result = run_module({"clock_event_samples": 2, "clock_event_interval_ms": 0}, SimRunner(), expect_failure=True)
    assert "(exit 15: a GPU has fallen off the bus)" in result["msg"]
    assert "GPU0000:06:00.0: Unknown Error" in result["msg"]
    runner = SimRunner()
    args = {"fail_on_error": False, "clock_event_samples": 2, "clock_event_interval_ms": 0}
    facts = run_module(args, runner)["ansible_facts"]["nvidia_smi"]
    assert facts["unreachable_gpus"] == [
        {
            "bus_id": "00000000:06:00.0",
            "message": "Unable to determine the device handle for GPU0000:06:00.0: Unknown Error",
        }
    ]
    # The seven others were read one by one, with their own indices, and everything else still works.
    assert ["/usr/bin/nvidia-smi", "-q", "-x", "-i", "7"] in [call[0] for call in runner.calls]
    assert [g["index"] for g in facts["gpus"]] == [1, 2, 3, 4, 5, 6, 7]
    assert facts["gpu_count"] == 7 and facts["errors"] == []
    assert facts["gpus"][0]["bus_id"] == "00000000:07:00.0" and facts["gpus"][0]["nics"]["mlx5_0"] == "PIX"
    assert facts["clock_events"]["unreachable"] == ["00000000:06:00.0"]
    assert facts["gpus"][6]["clock_events"]["samples"] == 2


def test_missing_binary(run_module, bin_paths):
    bin_paths.clear()
    result = run_module({"fail_on_error": False}, SimRunner())
    assert result["ansible_facts"]["nvidia_smi"]["errors"][0].startswith("nvidia-smi not found")
    assert "not found" in run_module({}, SimRunner(), expect_failure=True)["msg"]


def test_truncated_xml_fails_naming_the_view(node, run_module):
    node("dgx1-v100-edr")
    runner = SimRunner({("-q", "-x"): (0, '<?xml version="1.0" ?>\n<nvidia_smi_log>\n\t<gpu id="x">', "")})
    result = run_module({}, runner, expect_failure=True)
    assert result["msg"].startswith("could not read nvidia-smi -q -x: nvidia-smi -q -x: not well-formed XML")


def test_topology_and_nvlink_can_be_skipped(node, run_module):
    node("poweredge-c4140-v100")
    runner = SimRunner()
    args = {"topology": False, "nvlink": False, "clock_event_samples": 0}
    facts = run_module(args, runner)["ansible_facts"]["nvidia_smi"]
    assert len(runner.calls) == 1
    assert facts["topology"] is None and facts["gpus"][0]["nics"] == {}
    assert facts["gpu_count"] == 4


def test_old_driver_field_names_are_the_fallback(node, run_module):
    node("dgx-h100-ndr", [{"type": "clock_events", "gpu": 2, "reason": "hw_power_brake_slowdown", "fraction": 0.5}])
    new = "--query-gpu=" + ",".join(nv.CLOCK_EVENT_FIELDS["clocks_event_reasons"])
    refused = (2, 'Field "clocks_event_reasons.hw_slowdown" is not a valid field to query.\n\n', "")
    runner = SimRunner({(new, "--format=csv"): refused})
    args = {"clock_event_samples": 4, "clock_event_interval_ms": 0, "nvlink": False, "topology": False}
    facts = run_module(args, runner)["ansible_facts"]["nvidia_smi"]
    old = [call[0][1] for call in runner.calls if call[0][1].startswith("--query-gpu=clocks") is False]
    assert sum("clocks_throttle_reasons.hw_slowdown" in arg for arg in old) == 4
    assert facts["clock_events"]["field_names"][-1] == "clocks_throttle_reasons.hw_power_brake_slowdown"
    assert facts["gpus"][2]["clock_events"]["active"]["hw_power_brake_slowdown"] == 2
    assert facts["gpus"][2]["clock_events"]["active"]["hw_slowdown"] == 2
    assert facts["gpus"][1]["clock_events"]["active"]["hw_power_brake_slowdown"] == 0


def test_nvlink_faults_show_in_facts(node, run_module):
    node(
        "dgx-h100-ndr",
        [
            {"type": "nvlink_inactive", "gpu": 1, "links": [4]},
            {"type": "nvlink_errors", "gpu": 6, "link": 17, "crc": 9},
        ],
    )
    facts = run_module({"clock_event_samples": 0}, SimRunner())["ansible_facts"]["nvidia_smi"]
    assert facts["gpus"][1]["nvlink"]["active_links"] == 17
    assert facts["gpus"][1]["nvlink"]["links"][4]["state"] == "<inactive>"
    assert facts["gpus"][6]["nvlink_errors"][17]["crc_errors"] == 9
