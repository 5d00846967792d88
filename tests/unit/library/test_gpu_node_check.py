"""gpu_node_check module: facts from a simulated node, lsmod/dmesg through a mocked run_command."""

from __future__ import annotations

import io
import json
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpuforge.cluster.plugins.modules import gpu_node_check, infiniband_facts, nvidia_smi_facts

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "module_utils"))
from gpuforge_sim import ibdev2netdev, ibstat, ibv_devinfo, lspci
from node_sim_helpers import SimNode, expected_for
from pcie_sim_helpers import lspci_output


@pytest.fixture
def run_module(ansible_module):
    paths = {"lsmod": "/usr/sbin/lsmod", "dmesg": "/usr/bin/dmesg", "lspci": "/usr/bin/lspci"}
    paths["systemctl"] = "/usr/bin/systemctl"

    def run(args, answers):
        calls = []

        def run_command(cmd, **kwargs):
            calls.append((cmd, kwargs))
            return answers[cmd[0]]

        return ansible_module(gpu_node_check, args, run_command, check_mode=True, bin_path=paths.get), calls

    return run


def node_args(node: SimNode, system: str, **extra) -> dict:
    """gpu_node_check's arguments for a SimNode of this expected system: its facts, lsmod and kernel log and the
    spec validate.yml hands the module; extra adds or replaces options (None leaves one out: the module runs the
    command, lsmod or dmesg, itself)."""
    args = {
        "nvidia_smi": node.nvidia_smi_facts(),
        "infiniband": node.infiniband_facts(),
        "lsmod": node.lsmod(),
        "kernel_log": node.dmesg(),
        "expected": expected_for(system),
        **extra,
    }
    return {name: value for name, value in args.items() if value is not None}


def test_runs_lsmod_and_dmesg_and_finds_xid_and_peermem(tmp_path, monkeypatch, run_module):
    faults = [{"type": "peermem_load_failure"}, {"type": "xid", "gpu": 2, "code": 48, "message": "DBE"}]
    node = SimNode(tmp_path, monkeypatch, "dgx1-v100-edr", faults)
    args = node_args(node, "dgx1-v100-edr", lsmod=None, kernel_log=None, sysfs_root=lspci.sysfs_root())
    answers = {
        "/usr/sbin/lsmod": (0, node.lsmod(), ""),
        "/usr/bin/dmesg": (0, node.dmesg(), ""),
        "/usr/bin/lspci": (0, lspci_output("-vvv", "-D"), ""),
    }
    result, calls = run_module(args, answers)
    assert [c[0] for c in calls] == [["/usr/sbin/lsmod"], ["/usr/bin/dmesg"], ["/usr/bin/lspci", "-vvv", "-D"]]
    assert all(c[1]["environ_update"] == {"LC_ALL": "C"} for c in calls)
    assert result["changed"] is False
    assert result["healthy"] is False
    assert result["failed_checks"] == ["xid", "peermem_loaded"]
    # `failed` is Ansible's own result key: a truthy value there fails the task with "Unknown error".
    assert "failed" not in result
    xid = next(r for r in result["records"] if r["check"] == "xid")
    assert [(x["code"], x["action"], x["gpu"]) for x in xid["observed"]] == [
        (48, "reset_gpu", "00000000:0A:00.0 (GPU 2, serial 0321618000102)")
    ]
    assert result["caused_failures"] == {}


def test_given_text_is_used_without_running_commands(tmp_path, monkeypatch, run_module):
    node = SimNode(tmp_path, monkeypatch, "poweredge-c4140-v100")
    args = node_args(node, "poweredge-c4140-v100", lspci=lspci_output("-vvv"), sysfs_root=lspci.sysfs_root())
    result, calls = run_module(args, {})
    assert calls == []
    assert result["healthy"] is True
    # 22 checks plus ecc_aggregate, nvlink_errors (the C4140's V100s have NVLink) and ib_link_flaps, and the
    # PCIe checks: lspci_readable, pcie_link_hca, pcie_link_limited, pcie_aer, pcie_acs.
    assert len(result["records"]) == 30
    assert result["pkeys"] == {"mlx5_0/1": ["0xffff"]}
    assert result["system"] is None  # not given


def test_the_system_judged_against_is_returned(tmp_path, monkeypatch, run_module):
    # validate.yml's report and fleet comparison read it from the result: a system given as a play variable is in
    # no other host's hostvars (found by Molecule gpudirect_rdma's side effect).
    node = SimNode(tmp_path, monkeypatch, "poweredge-c4140-v100")
    args = node_args(node, "poweredge-c4140-v100", lspci=lspci_output("-vvv"), sysfs_root=lspci.sysfs_root())
    result, _ = run_module({**args, "system": "poweredge-c4140-v100"}, {})
    assert result["system"] == "poweredge-c4140-v100"


def test_unreadable_lsmod_and_failing_dmesg_are_failed_checks(run_module):
    args = {"nvidia_smi": None, "infiniband": None, "expected": expected_for("dgx1-v100-edr")}
    answers = {
        "/usr/sbin/lsmod": (0, "garbage\n", ""),
        "/usr/bin/dmesg": (1, "", "dmesg: read kernel buffer failed: Operation not permitted"),
        "/usr/bin/lspci": (1, "", "pcilib: Cannot open /proc/bus/pci"),
    }
    result, _ = run_module(args, answers)
    checks = {r["check"]: r for r in result["records"]}
    assert checks["lsmod_readable"]["fault"] == (
        "could not read lsmod output: lsmod: missing the 'Module Size Used by' header"
    )
    assert checks["kernel_log_readable"]["fault"] == (
        "could not read the kernel log: dmesg exited with code 1: dmesg: read kernel buffer failed: "
        "Operation not permitted"
    )
    assert {"nvidia_smi_readable", "infiniband_readable", "lsmod_readable", "kernel_log_readable"} <= set(
        result["failed_checks"]
    )
    assert checks["lspci_readable"]["fault"] == (
        "could not read lspci -vvv: lspci exited with code 1: pcilib: Cannot open /proc/bus/pci"
    )
    assert "xid" not in checks and "peermem_loaded" not in checks


def test_pcie_faults_are_read_from_lspci_the_kernel_log_and_sysfs(tmp_path, monkeypatch, run_module):
    faults = [
        {"type": "pcie_link_degraded", "hca": "mlx5_3", "width": 8},
        {"type": "pcie_aer_errors", "gpu": 2, "fatal": 1},
        {"type": "acs_enabled", "gpu": 6},
        {"type": "pkey_mismatch", "hca": "mlx5_0", "pkeys": ["0x7fff"]},
    ]
    node = SimNode(tmp_path, monkeypatch, "dgx1-v100-edr", faults)
    args = node_args(node, "dgx1-v100-edr", sysfs_root=lspci.sysfs_root())
    result, calls = run_module(args, {"/usr/bin/lspci": (0, lspci_output("-vvv", "-D"), "")})
    assert calls[0][1]["environ_update"] == {"LC_ALL": "C"}
    assert result["failed_checks"] == ["pcie_link_hca", "pcie_aer", "pcie_acs"]
    assert result["caused_failures"] == {"pcie_link_limited": "pcie_link_hca"}
    checks = {r["check"]: r for r in result["records"]}
    assert checks["pcie_link_hca"]["observed"] == {"0000:8b:00.0": "mlx5_3: width x8 of x16"}
    assert list(checks["pcie_aer"]["observed"]) == ["00000000:0A:00.0"]
    # The bridge above GPU 6 comes from the sysfs path, so the verdict names the board below it.
    assert "(above 00000000:89:00.0 (GPU 6" in next(iter(checks["pcie_acs"]["observed"].values()))
    assert result["pkeys"]["mlx5_0/1"] == ["0x7fff"]
    assert result["pkeys"]["mlx5_1/1"] == ["0xffff"]


def test_lspci_without_root_is_a_failed_check(tmp_path, monkeypatch, run_module):
    node = SimNode(tmp_path, monkeypatch, "poweredge-c4140-v100")
    denied = "5e:00.0 Infiniband controller: Mellanox Technologies MT27800 Family [ConnectX-5]\n" + (
        "\tCapabilities: <access denied>\n"
    )
    args = node_args(node, "poweredge-c4140-v100", sysfs_root=lspci.sysfs_root())
    result, _ = run_module(args, {"/usr/bin/lspci": (0, denied, "")})
    assert result["failed_checks"] == ["lspci_readable"]
    readable = next(r for r in result["records"] if r["check"] == "lspci_readable")
    assert "run the check as root" in readable["fault"]


def test_pcie_false_skips_lspci_and_pkeys(tmp_path, monkeypatch, run_module):
    node = SimNode(tmp_path, monkeypatch, "poweredge-c4140-v100")
    args = node_args(node, "poweredge-c4140-v100", pcie=False)
    result, calls = run_module(args, {})
    assert calls == []
    assert result["pkeys"] == {}
    assert not {r["check"] for r in result["records"]} & {"lspci_readable", "pcie_aer", "pcie_acs"}


def test_nvswitch_system_runs_systemctl_and_judges_sxid_from_dmesg(tmp_path, monkeypatch, run_module):
    faults = [{"type": "sxid", "switch": 2, "pci": "0000:c4:00.0", "code": 20034, "fatal": True, "link": 27}]
    # the SXid is in the kernel log from boot: the NVSwitch driver logs it whether or not the fabric manager runs
    node = SimNode(tmp_path, monkeypatch, "dgx-h100-ndr", faults)
    args = node_args(node, "dgx-h100-ndr", kernel_log=None, pcie=False)
    # systemctl is-active prints the state and exits 3 for every state but active (systemctl(1)).
    answers = {"/usr/bin/dmesg": (0, node.dmesg(), ""), "/usr/bin/systemctl": (3, "failed\n", "")}
    result, calls = run_module(args, answers)
    assert [c[0] for c in calls] == [["/usr/bin/dmesg"], ["/usr/bin/systemctl", "is-active", "nvidia-fabricmanager"]]
    assert all(c[1]["environ_update"] == {"LC_ALL": "C"} for c in calls)
    assert result["failed_checks"] == ["sxid", "fabric_manager"]
    checks = {r["check"]: r for r in result["records"]}
    assert [(e["switch"], e["code"], e["links"]) for e in checks["sxid"]["observed"]] == [
        ("nvidia-nvswitch2 (PCI 0000:c4:00.0)", 20034, [27])
    ]
    assert checks["fabric_manager"]["observed"] == {"nvidia-fabricmanager": "failed"}


def test_fabric_manager_given_is_used_and_other_systems_do_not_run_systemctl(tmp_path, monkeypatch, run_module):
    node = SimNode(tmp_path, monkeypatch, "dgx-h100-ndr")
    args = node_args(node, "dgx-h100-ndr", pcie=False, fabric_manager="active")
    result, calls = run_module(args, {})
    assert calls == []
    assert result["healthy"] is True
    assert {r["check"]: r["verdict"] for r in result["records"]}["fabric_manager"] == "PASS"
    v100 = SimNode(tmp_path / "v100", monkeypatch, "dgx1-v100-edr")
    args = node_args(v100, "dgx1-v100-edr", pcie=False)
    result, calls = run_module(args, {})
    assert calls == []  # no NVSwitch: systemctl is not run
    assert not {"sxid", "fabric_manager"} & {r["check"] for r in result["records"]}


def test_systemctl_missing_fails_the_fabric_manager_check(tmp_path, monkeypatch, ansible_module):
    node = SimNode(tmp_path, monkeypatch, "dgx-h100-ndr")
    args = node_args(node, "dgx-h100-ndr", pcie=False)
    result = ansible_module(
        gpu_node_check, args, lambda *a, **k: (0, "", ""), check_mode=True, bin_path=lambda _n: None
    )
    fabric = next(r for r in result["records"] if r["check"] == "fabric_manager")
    assert fabric["verdict"] == "FAIL"
    assert "systemctl not found" in fabric["fault"]


# A real single-GPU H200 VM (driver 580.159.04, Firecracker) that playbooks/validate.yml judged healthy on
# 2026-11-26 (benchmarks/real_node/run.sh; tests/fixtures/*/SOURCES.md, rows gpuforge-device_1xh200_*).
ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures"
H200_SMI = FIXTURES / "nvidia-smi"
H200_NAME = "gpuforge-device_1xh200_drv580.159.04_{}"
H200_REPORT = FIXTURES / "validation" / "gpuforge-device_1xh200_real-node.json"
H200_ANSWERS = {
    ("-q", "-x"): "q_x_18-20.xml",  # the validated machine's own -q -x (18:20:58)
    ("topo", "-m"): "topo_m.txt",  # byte for byte what the validated machine printed too
    ("nvlink", "--status"): "nvlink_status_no_links.txt",  # empty, as there
    ("nvlink", "-e"): "nvlink_e_no_links.txt",
}


def h200_smi():
    """run_command answering nvidia-smi from the captured outputs. The clock event samples are the 18:14 idle capture
    of a machine of the same kind (same bus ID; the validated machine's own samples are not among the fixtures), one
    csv output per query as nvidia-smi prints them."""
    chunks = (
        (H200_SMI / H200_NAME.format("clock_events_idle.csv")).read_text(encoding="utf-8").splitlines(keepends=True)
    )
    samples = iter("".join(chunks[i : i + 2]) for i in range(0, len(chunks), 2))

    def run_command(argv, **_kwargs):
        if argv[1].startswith("--query-gpu="):
            return 0, next(samples), ""
        return 0, (H200_SMI / H200_NAME.format(H200_ANSWERS[tuple(argv[1:])])).read_text(encoding="utf-8"), ""

    return run_command


def h200_vm_facts(ansible_module) -> dict:
    """ansible_facts.nvidia_smi as nvidia_smi_facts gathers them from the captured outputs."""
    args = {"fail_on_error": False, "clock_event_interval_ms": 0}
    result = ansible_module(nvidia_smi_facts, args, h200_smi(), bin_path=lambda n: f"/usr/bin/{n}")
    return result["ansible_facts"]["nvidia_smi"]


def h200_vm_expected(**system_changes) -> dict:
    """The spec playbooks/tasks/validate_node.yml builds for benchmarks/real_node/hosts.yml's h200-1gpu-vm:
    limits | SKU | system | globals (driver_branch "580" from hosts.yml). system_changes replace keys of the
    system entry; None removes one (the SKU's value applies)."""
    hardware = yaml.safe_load((ROOT / "roles/gpuforge/defaults/main/expected_hardware.yml").read_text("utf-8"))
    hosts = yaml.safe_load((ROOT / "benchmarks/real_node/hosts.yml").read_text(encoding="utf-8"))["all"]["vars"]
    system = {**hosts["gpuforge_expected_systems"]["h200-1gpu-vm"], **system_changes}
    system = {k: v for k, v in system.items() if v is not None}
    limits = {
        **hardware["gpuforge_expected_memory_errors"],
        **hardware["gpuforge_expected_clock_events"],
        **hardware["gpuforge_expected_pcie_aer"],
    }
    # The SKU's xid_fatal is the template "{{ gpuforge_expected_xid_fatal }}": its value here.
    sku = {
        **hardware["gpuforge_expected_gpu_skus"][system["gpu_sku"]],
        "xid_fatal": hardware["gpuforge_expected_xid_fatal"],
    }
    globals_ = {
        "link_speeds": hardware["gpuforge_expected_link_speeds"],
        "driver_branch": hosts["gpuforge_expected_driver_branch"],
        "retired_pages_max": hardware["gpuforge_expected_retired_pages_max"],
        "xid_fail_actions": hardware["gpuforge_expected_xid_fail_actions"],
        "nvlink_error_max": hardware["gpuforge_expected_nvlink_error_max"],
        "ib_link_flaps_max": hardware["gpuforge_expected_ib_link_flaps_max"],
    }
    return {**limits, **sku, **system, **globals_}


def h200_vm_check(tmp_path, ansible_module, run_module, **system_changes):
    """gpu_node_check over the real captures: the facts above, the real lspci -vvv -D and lsmod through the
    module's options, an empty kernel log (the run's dmesg was not captured) and an empty sysfs tree."""
    args = {
        "nvidia_smi": h200_vm_facts(ansible_module),
        "infiniband": None,
        "lsmod": (FIXTURES / "lsmod" / "gpuforge-device_1xh200_drv580.159.04_firecracker.txt").read_text("utf-8"),
        "kernel_log": "",
        "lspci": (FIXTURES / "lspci" / "gpuforge-device_1xh200_firecracker_vvv_D.txt").read_text(encoding="utf-8"),
        "sysfs_root": str(tmp_path),
        "node": "h200-vm",
        "expected": h200_vm_expected(**system_changes),
    }
    result, calls = run_module(args, {})
    assert calls == []  # every text was given: nothing is run
    return result


# That machine's report was written before gpu_node_check returned records: its checks say ok/warn/fail.
_REPORT_STATUS = {"ok": "PASS", "warn": "WARN", "fail": "FAIL"}


def _report_checks(report) -> list:
    return [
        (c["name"], _REPORT_STATUS[c["status"]], c["observed"], c["expected"], c["fault"], c["remedy"])
        for c in report["checks"]
    ]


def _record_checks(records) -> list:
    return [
        (r["check"], r["verdict"], r["observed"], r["threshold"]["expected"], r["fault"], r["remedy"]) for r in records
    ]


def test_real_h200_vm_is_healthy_with_the_checks_of_its_validation_report(tmp_path, ansible_module, run_module):
    assert h200_vm_expected()["nvlink_links"] == 0 and h200_vm_expected()["driver_branch"] == "580"
    result = h200_vm_check(tmp_path, ansible_module, run_module)
    report = json.loads(H200_REPORT.read_text(encoding="utf-8"))
    assert report["healthy"] is result["healthy"] is True
    assert report["failed"] == result["failed_checks"] == []
    assert result["caused_failures"] == {}
    assert [(r["check"], r["verdict"]) for r in result["records"]] == [(c[0], c[1]) for c in _report_checks(report)]
    # No NVLink, no HCA, no peermem expected, a VM (no ACS): those checks are left out, here as there.
    assert not {"nvlink_active", "nvlink_errors", "hcas_present", "peermem_loaded", "pcie_acs"} & {
        r["check"] for r in result["records"]
    }
    # What the module found and expected is what the playbook wrote for the machine, check by check.
    assert _record_checks(result["records"]) == _report_checks(report)
    assert {(r["node"], r["kind"], r["schema_version"]) for r in result["records"]} == {("h200-vm", "node_check", 1)}


def test_real_h200_vm_judged_the_same_when_the_module_reads_the_gpus_itself(tmp_path, ansible_module):
    """gather: true over the same captures (nvidia-smi answered from them; that VM had no ibstat or ibv_devinfo, as
    here): the checks of the machine's validation report, and the facts nvidia_smi_facts returns."""
    args = {
        "gather": True,
        "clock_event_interval_ms": 0,
        "lsmod": (FIXTURES / "lsmod" / "gpuforge-device_1xh200_drv580.159.04_firecracker.txt").read_text("utf-8"),
        "kernel_log": "",
        "lspci": (FIXTURES / "lspci" / "gpuforge-device_1xh200_firecracker_vvv_D.txt").read_text(encoding="utf-8"),
        "sysfs_root": str(tmp_path),
        "expected": h200_vm_expected(),
    }
    paths = {"nvidia-smi": "/usr/bin/nvidia-smi"}
    result = ansible_module(gpu_node_check, args, h200_smi(), check_mode=True, bin_path=paths.get)
    report = json.loads(H200_REPORT.read_text(encoding="utf-8"))
    assert result["healthy"] is True and _record_checks(result["records"]) == _report_checks(report)
    assert result["ansible_facts"]["nvidia_smi"] == h200_vm_facts(ansible_module)
    assert result["ansible_facts"]["infiniband"]["available"] is False


def test_real_h200_vm_fails_the_skus_nvlink_links_and_another_gpu_count(tmp_path, ansible_module, run_module):
    """The same inputs against the H200 SKU's 18 NVLinks (no system override) fail nvlink_active; against 8 GPUs,
    gpu_count."""
    result = h200_vm_check(tmp_path, ansible_module, run_module, nvlink_links=None)
    assert result["healthy"] is False
    assert result["failed_checks"] == ["nvlink_active"]
    nvlink = next(r for r in result["records"] if r["check"] == "nvlink_active")
    assert (nvlink["threshold"]["expected"], nvlink["observed"]) == (18, {"00000000:00:06.0": "0 of 18 active"})
    assert "serial 1653724055631" in nvlink["fault"]
    result = h200_vm_check(tmp_path, ansible_module, run_module, gpu_count=8)
    assert result["failed_checks"] == ["gpu_count"]
    count = next(r for r in result["records"] if r["check"] == "gpu_count")
    assert (count["verdict"], count["threshold"]["expected"], count["observed"]) == ("FAIL", 8, 1)


class SimTools:
    """run_command and get_bin_path of a SimNode's tools: nvidia-smi and the InfiniBand tools answer from the lab's
    simulators in-process, the others from `answers` (path to (rc, out, err)); `calls` records every argv."""

    SIMULATED = {"ibstat": ibstat, "ibv_devinfo": ibv_devinfo, "ibdev2netdev": ibdev2netdev}

    def __init__(self, node: SimNode, answers: dict, missing=()):
        self.node, self.answers, self.missing, self.calls = node, answers, set(missing), []

    def path(self, name):
        if name in self.missing:
            return None
        return {"lsmod": "/usr/sbin/lsmod", "lspci": "/usr/bin/lspci"}.get(name, f"/usr/bin/{name}")

    def __call__(self, argv, **kwargs):
        self.calls.append(list(argv))
        if argv[0] in self.answers:
            return self.answers[argv[0]]
        name = argv[0].rsplit("/", 1)[-1]
        if name == "nvidia-smi":
            return self.node.smi(*argv[1:])
        out = io.StringIO()
        with redirect_stdout(out):
            rc = self.SIMULATED[name].main(list(argv[1:]))
        return rc or 0, out.getvalue(), ""


def gather_answers(node: SimNode) -> dict:
    return {
        "/usr/sbin/lsmod": (0, node.lsmod(), ""),
        "/usr/bin/dmesg": (0, node.dmesg(), ""),
        "/usr/bin/lspci": (0, lspci_output("-vvv", "-D"), ""),
    }


def test_gather_reads_what_the_facts_modules_read_and_judges_the_same(tmp_path, monkeypatch, ansible_module):
    """gather: true returns, as ansible_facts, what nvidia_smi_facts (fail_on_error false) and infiniband_facts
    (fail_on_missing false) return on the same node, and judges it as the module given those facts does."""
    faults = [{"type": "ib_port_state", "hca": "mlx5_3", "port": 1, "state": "Down"}, {"type": "peermem_load_failure"}]
    node = SimNode(tmp_path, monkeypatch, "dgx1-v100-edr", faults)
    answers = gather_answers(node)
    sampling = {"clock_event_samples": 3, "clock_event_interval_ms": 0}
    base = {"expected": expected_for("dgx1-v100-edr"), "sysfs_root": lspci.sysfs_root()}
    # One clock for both runs: their checked_at must not differ because a second ended between them.
    real_gmtime = time.gmtime
    monkeypatch.setattr(time, "gmtime", lambda secs=None: real_gmtime(1796000000 if secs is None else secs))

    def run(module, args):
        tools = SimTools(node, answers, missing=("ofed_info",))
        return ansible_module(module, args, tools, check_mode=True, bin_path=tools.path), tools.calls

    smi, smi_calls = run(nvidia_smi_facts, {"fail_on_error": False, **sampling})
    ib, ib_calls = run(infiniband_facts, {"fail_on_missing": False})
    given, given_calls = run(
        gpu_node_check,
        {**base, "nvidia_smi": smi["ansible_facts"]["nvidia_smi"], "infiniband": ib["ansible_facts"]["infiniband"]},
    )
    gathered, calls = run(gpu_node_check, {**base, "gather": True, **sampling})
    assert calls == smi_calls + ib_calls + given_calls  # the same runs, in one module
    assert gathered["ansible_facts"] == {
        "nvidia_smi": smi["ansible_facts"]["nvidia_smi"],
        "infiniband": ib["ansible_facts"]["infiniband"],
    }
    assert "ansible_facts" not in given
    assert gathered["checked_at"] == given["checked_at"] == "2026-11-30T00:53:20Z"
    assert {k: v for k, v in gathered.items() if k != "ansible_facts"} == given
    assert gathered["failed_checks"] == ["ib_port_state", "peermem_loaded"]
    assert gathered["ansible_facts"]["infiniband"]["inactive_ports"] == ["mlx5_3/1"]
    assert gathered["ansible_facts"]["nvidia_smi"]["gpus"][0]["clock_events"]["samples"] == 3


def test_gather_turns_unreadable_tools_into_failed_checks_not_a_failed_task(tmp_path, monkeypatch, ansible_module):
    """nvidia-smi missing and ibstat failing: the facts modules would fail (or record errors); gather records both
    as failed *_readable checks naming the cause, and the module succeeds with a report."""
    node = SimNode(tmp_path, monkeypatch, "dgx1-v100-edr")
    answers = {**gather_answers(node), "/usr/bin/ibstat": (1, "", "ibpanic: [42] main: can't init UMAD library")}
    tools = SimTools(node, answers, missing=("nvidia-smi", "ofed_info"))
    args = {"expected": expected_for("dgx1-v100-edr"), "sysfs_root": lspci.sysfs_root(), "gather": True}
    result = ansible_module(gpu_node_check, args, tools, check_mode=True, bin_path=tools.path)
    checks = {r["check"]: r for r in result["records"]}
    assert result["healthy"] is False and "failed" not in result
    assert checks["nvidia_smi_readable"]["verdict"] == checks["infiniband_readable"]["verdict"] == "FAIL"
    assert "nvidia-smi" in checks["nvidia_smi_readable"]["fault"]
    assert "gpuforge_nvidia_driver role" in checks["nvidia_smi_readable"]["fault"]
    assert checks["infiniband_readable"]["fault"] == (
        "could not read all of the InfiniBand facts: ibstat failed (rc=1): ibpanic: [42] main: can't init UMAD library"
    )
    infiniband = result["ansible_facts"]["infiniband"]
    assert (infiniband["available"], infiniband["hcas"]) == (False, [])
    assert not any(argv[0].endswith("ibv_devinfo") for argv in tools.calls)  # stopped at the failed primary tool


def test_gather_with_facts_given_is_refused(tmp_path, monkeypatch, ansible_module):
    node = SimNode(tmp_path, monkeypatch, "dgx1-v100-edr")
    args = node_args(node, "dgx1-v100-edr", gather=True, infiniband=None)
    result = ansible_module(gpu_node_check, args, expect_failure=True, check_mode=True)
    assert result["msg"] == (
        "gather: true reads nvidia_smi and infiniband on the node: give gather or those facts, not both"
    )
