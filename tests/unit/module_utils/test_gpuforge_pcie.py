"""gpuforge_pcie parsers on real lspci / kernel / sysfs samples (tests/fixtures/lspci/SOURCES.md); the lab
simulator's output is parsed in tests/unit/lab/test_lspci_sim.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_pcie import (
    acs_enabled,
    aer_total,
    link_degraded,
    parse_acsctl_lines,
    parse_aer,
    parse_link_limited,
    parse_lspci,
    parse_pkey,
    pci_address,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "lspci"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("text", "address"),
    [("00000000:1B:00.0", "0000:1b:00.0"), ("0000:1b:00.0", "0000:1b:00.0"), ("da:00.0", "0000:da:00.0"),
     ("pci 0003:01:00.0:", "0003:01:00.0"), ("no address", None), (None, None)],
)  # fmt: skip
def test_pci_address_has_one_spelling(text, address):
    assert pci_address(text) == address


def test_real_idle_gpu_shows_a_speed_downgrade_that_is_not_judged_for_gpus():
    devices = parse_lspci(fixture("rtx-a4000_idle_speed-downgraded_EXCERPT.txt"))
    # An excerpt without its header line: the capabilities belong to the device None.
    device = devices[None]
    assert device["link_cap"] == {"speed_gts": 16.0, "width": 16}
    assert device["link_sta"] == {"speed_gts": 2.5, "width": 16, "speed_downgraded": True, "width_downgraded": False}
    assert link_degraded(device) == "speed 2.5 GT/s of 16 GT/s"
    assert link_degraded(device, judge_speed=False) == ""


def test_real_header_with_class_and_ids():
    devices = parse_lspci(fixture("a100-sxm4_header_hwloc-issue653_EXCERPT.txt"))
    assert list(devices) == ["0000:da:00.0"]
    device = devices["0000:da:00.0"]
    assert device["description"].startswith("3D controller [0302]: NVIDIA Corporation GA100 [A100 SXM4 40GB]")
    assert device["bridge"] is False
    # The excerpt ends before the link lines: nothing to judge, nothing invented.
    assert (device["link_cap"], device["link_sta"], link_degraded(device)) == (None, None, "")


def test_real_acsctl_lines():
    lines = parse_acsctl_lines(fixture("acsctl-lines_nccl-issue629_EXCERPT.txt"))
    assert len(lines) == 5
    assert [acs_enabled(flags) for flags in lines].count([]) == 4
    assert acs_enabled(lines[3]) == ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"]


def test_real_kernel_limited_by_lines_with_and_without_syslog_prefix():
    reports = parse_link_limited(fixture("kernel-limited-by_EXCERPT.txt"))
    assert reports == [
        {
            "address": "0003:01:00.0",
            "driver": "pci",
            "available_gbit_per_s": 7.876,
            "speed_gts": 8.0,
            "width": 1,
            "limited_at": "0003:00:00.0",
            "capable_gbit_per_s": 15.752,
            "capable_speed_gts": 8.0,
            "capable_width": 2,
        },
        {
            "address": "0000:01:00.0",
            "driver": "pci",
            "available_gbit_per_s": 7.876,
            "speed_gts": 8.0,
            "width": 1,
            "limited_at": "0000:00:00.0",
            "capable_gbit_per_s": 126.016,
            "capable_speed_gts": 8.0,
            "capable_width": 16,
        },
    ]


def test_older_kernel_speed_spelling_and_mlx5_driver():
    line = (
        "[    5.1] mlx5_core 0000:3b:00.0: 63.008 Gb/s available PCIe bandwidth, limited by 8 GT/s x8 link at "
        "0000:3a:00.0 (capable of 126.016 Gb/s with 8 GT/s x16 link)"
    )
    (report,) = parse_link_limited(line)
    assert (report["driver"], report["width"], report["capable_width"]) == ("mlx5_core", 8, 16)
    # The full-bandwidth (verbose) form is not a limit.
    assert parse_link_limited("pci 0000:3b:00.0: 126.016 Gb/s available PCIe bandwidth (8.0 GT/s PCIe x16 link)") == []


def test_real_aer_file():
    counts = parse_aer(fixture("aer_dev_correctable_kernel-abi-sample.txt"))
    assert counts["Receiver Error"] == 2
    assert counts["RELAY_NUM Rollover"] == 0
    assert counts["TOTAL_ERR_COR"] == 2
    assert len(counts) == 9
    assert aer_total(counts, "correctable") == 2
    # Without its total line the counters are summed; garbage lines are left out.
    assert aer_total(parse_aer("Bad TLP 3\nReceiver Error 4\nnot a counter\n"), "correctable") == 7


@pytest.mark.parametrize(
    ("text", "key"),
    [("0xffff\n", "0xffff"), ("0x7fff", "0x7fff"), ("0x0000\n", None), ("0x8000", None), ("", None), ("junk", None)],
)
def test_pkey_values(text, key):
    assert parse_pkey(text) == key


def test_devsta_flags_set_on_a_real_excerpt():
    # tests/fixtures/lspci/SOURCES.md: an RTX A4000 whose DevSta shows CorrErr+ and UnsupReq+.
    text = Path(__file__).resolve().parents[2] / "fixtures" / "lspci" / "rtx-a4000_idle_speed-downgraded_EXCERPT.txt"
    devices = parse_lspci(text.read_text(encoding="utf-8"))
    dev_sta = next(device["dev_sta"] for device in devices.values() if device["dev_sta"])
    assert dev_sta["CorrErr"] is True and dev_sta["UnsupReq"] is True and dev_sta["FatalErr"] is False
