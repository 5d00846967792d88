"""The kernel_taint check (module_utils/gpuforge_taint.py, a standalone entry of gpuforge_registry): the mask of
/proc/sys/kernel/tainted judged by the bits that matter on a GPU node, from the parser to gpu_node_check on the lab
node with the kernel_taint fault (the lab's lspci writes the mask beside its sysfs tree)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_registry as registry
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_taint import judge_taint, parse_tainted
from ansible_collections.gpuforge.cluster.plugins.modules import gpu_node_check
from gpuforge_sim import lspci

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "module_utils"))
from node_sim_helpers import SimNode, expected_for
from pcie_sim_helpers import lspci_output

ROOT = Path(__file__).resolve().parents[3]
DEFAULTS = yaml.safe_load((ROOT / "roles/gpuforge/defaults/main/expected_hardware.yml").read_text(encoding="utf-8"))[
    "gpuforge_expected_check_defaults"
]
# What the NVIDIA driver alone sets: P (bit 0, proprietary), O (12, out of tree), E (13, unsigned) = 1 + 4096 + 8192.
DRIVER_ONLY = 12289


def _judge(text):
    return judge_taint({"tainted": text}, DEFAULTS)


def test_the_driver_s_own_taint_passes_and_the_mask_is_decoded():
    assert parse_tainted("0\n") == 0 and parse_tainted(f"{DRIVER_ONLY}\n") == DRIVER_ONLY
    check = _judge(f"{DRIVER_ONLY}\n")
    assert check["status"] == "PASS"
    assert check["observed"] == {
        "value": DRIVER_ONLY,
        "flags": {
            "0": "P: proprietary module was loaded",
            "12": "O: externally-built (out-of-tree) module was loaded",
            "13": "E: unsigned module was loaded",
        },
    }


@pytest.mark.parametrize(
    ("fixture", "status", "bits"),
    [
        ("tainted_uac-issue262_proprietary-oot-unsigned.txt", "PASS", ["0", "12", "13"]),
        ("tainted_fwupd-issue9737_nvidia-open.txt", "PASS", ["12"]),
        ("tainted_checkbox-issue1367_ubuntu2404-warning.txt", "WARN", ["9"]),
    ],
)
def test_real_taint_values(fixture, status, bits):
    """Values real machines' /proc/sys/kernel/tainted held (tests/fixtures/kernel/SOURCES.md)."""
    check = _judge((ROOT / "tests/fixtures/kernel" / fixture).read_text(encoding="utf-8"))
    assert check["status"] == status
    assert sorted(check["observed"]["flags"], key=int) == bits


@pytest.mark.parametrize(
    ("bits", "status", "named"),
    [
        ([4], "FAIL", "bit 4 M: processor reported a Machine Check Exception"),
        ([7, 9], "FAIL", "bit 7 D"),
        ([9], "WARN", "bit 9 W"),
    ],
)
def test_a_machine_check_bad_page_or_oops_fails_and_a_warning_warns(bits, status, named):
    check = _judge(str(DRIVER_ONLY + sum(1 << bit for bit in bits)))
    assert check["status"] == status and named in check["fault"]
    assert "reboot the node" in check["remedy"]


@pytest.mark.parametrize("text", ["", "tainted\n", "-1\n", registry.Unreadable("/proc/sys/kernel/tainted: EACCES")])
def test_a_mask_that_cannot_be_read_fails_saying_why(text):
    check = _judge(text)
    assert check["status"] == "FAIL" and check["fault"].startswith("kernel taint unknown: ")
    if not isinstance(text, registry.Unreadable):
        with pytest.raises(ParseError, match="not a decimal number"):
            parse_tainted(text)


def test_the_spec_decides_which_bits_matter():
    assert judge_taint({"tainted": "16"}, {"kernel_taint_fail_bits": [], "kernel_taint_warn_bits": [4]})["status"] == (
        "WARN"
    )


@pytest.mark.parametrize(("faults", "verdict"), [([], "PASS"), ([{"type": "kernel_taint", "bits": [4]}], "FAIL")])
def test_gpu_node_check_reads_the_lab_node_s_mask(tmp_path, monkeypatch, ansible_module, faults, verdict):
    node = SimNode(tmp_path, monkeypatch, "dgx1-v100-edr", faults)
    text = lspci_output("-vvv", "-D")  # the lab's lspci writes the sysfs tree and the taint mask beside it
    args = {
        "nvidia_smi": node.nvidia_smi_facts(),
        "infiniband": node.infiniband_facts(),
        "lsmod": node.lsmod(),
        "kernel_log": node.dmesg(),
        "lspci": text,
        "sysfs_root": lspci.sysfs_root(),
        "expected": {**DEFAULTS, **expected_for("dgx1-v100-edr")},
    }
    result = ansible_module(gpu_node_check, args, None, check_mode=True)
    taint = next(r for r in result["records"] if r["check"] == "kernel_taint")
    assert taint["verdict"] == verdict, taint["fault"]
    assert result["failed_checks"] == (["kernel_taint"] if verdict == "FAIL" else [])
    # Without the spec's keys the check is not run (a spec that predates it).
    result = ansible_module(gpu_node_check, {**args, "expected": expected_for("dgx1-v100-edr")}, None, check_mode=True)
    assert "kernel_taint" not in {r["check"] for r in result["records"]}
