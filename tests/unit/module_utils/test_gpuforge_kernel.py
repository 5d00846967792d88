"""lsmod and NVIDIA Xid kernel-log parsers."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_kernel as kernel

LSMOD = """Module                  Size  Used by
nvidia_uvm           1437696  0
nvidia_drm             73728  0
nvidia_modeset       1306624  1 nvidia_drm
nvidia              56610816  2 nvidia_uvm,nvidia_modeset
mlx5_ib               454656  0
ib_core               434176  1 mlx5_ib
"""


def test_lsmod_modules_sizes_and_users():
    result = kernel.parse_lsmod(LSMOD)
    assert result["names"] == ["nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia", "mlx5_ib", "ib_core"]
    assert result["modules"]["nvidia"] == {
        "size": 56610816,
        "use_count": 2,
        "used_by": ["nvidia_uvm", "nvidia_modeset"],
    }
    assert result["modules"]["nvidia_uvm"]["used_by"] == []
    assert "nvidia_peermem" not in result["modules"]


def test_lsmod_malformed():
    with pytest.raises(kernel.ParseError, match="header"):
        kernel.parse_lsmod("nvidia 1 0\n")
    with pytest.raises(kernel.ParseError, match="line 2"):
        kernel.parse_lsmod("Module Size Used by\nnvidia lots 0\n")


def test_xid_dmesg_journal_and_new_pid_format():
    text = "\n".join(
        [
            "[  812.345678] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.",
            "[Mon Jul  6 12:00:05 2020] NVRM: GPU at PCI:0000:3b:00: GPU-1",
            "Jul 06 12:00:05 dgx01 kernel: NVRM: Xid (PCI:0000:86:00): 48, pid='<unknown>', name=<unknown>, "
            "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6.",
            "[Mon Jul  6 12:00:06 2020] NVRM: Xid (PCI:0000:06:00): 13, pid=4242, name=python, Graphics Exception",
        ]
    )
    events = kernel.parse_xid_events(text)
    assert [e["code"] for e in events] == [79, 48, 13]
    first, second, third = events
    assert (first["timestamp"], first["pci_bus"], first["pid"]) == ("812.345678", "0000:3b:00", 1234)
    assert first["message"] == "GPU has fallen off the bus."
    assert first["description"] == "GPU has fallen off the bus"
    assert (second["host"], second["timestamp"], second["pid"], second["process"]) == (
        "dgx01",
        "Jul 06 12:00:05",
        None,
        None,
    )
    assert second["message"].startswith("An uncorrectable double bit error")
    assert (third["timestamp"], third["process"], third["pid"]) == ("Mon Jul  6 12:00:06 2020", "python", 4242)


def test_xid_none_in_clean_log():
    assert (
        kernel.parse_xid_events("[    1.0] Linux version 6.1.0\n[    2.0] nvidia: loading out-of-tree module\n") == []
    )


def test_xid_catalogue_covers_every_code_with_a_known_action():
    assert sorted(kernel.XID_CATALOGUE) == list(range(1, 173))
    assert {bucket for _description, bucket in kernel.XID_CATALOGUE.values()} <= set(kernel.XID_ACTIONS)
    assert set(kernel.XID_ACTIONS.values()) | {"unknown"} == set(kernel.ACTION_REMEDIES)


@pytest.mark.parametrize(
    ("code", "bucket", "action"),
    [(13, "RESTART_APP", "restart_app"), (48, "WORKFLOW_XID_48", "reset_gpu"), (63, "IGNORE", "ignore"),
     (79, "RESTART_BM", "reboot"), (54, "CHECK_MECHANICALS", "check_mechanicals"), (119, "RESET_GPU", "reset_gpu"),
     (7, "CONTACT_SUPPORT", "contact_vendor"), (171, None, "not_given")],
)  # fmt: skip
def test_xid_action_follows_the_catalogue(code, bucket, action):
    found = kernel.xid_action(code)
    assert (found["catalogue_action"], found["action"], found["known"]) == (bucket, action, True)


def test_unknown_xid_is_named_unknown_and_events_carry_their_action():
    assert kernel.xid_action(4242) == {
        "code": 4242, "description": None, "catalogue_action": None, "action": "unknown", "known": False
    }  # fmt: skip
    line = "[ 12.5] NVRM: Xid (PCI:0000:3b:00): 4242, pid=1, name=x, something new"
    event = kernel.parse_xid_events(line + "\n" + line.replace("4242", "79"))
    assert [(e["code"], e["action"]) for e in event] == [(4242, "unknown"), (79, "reboot")]


# NVSwitch SXid lines: real samples and their sources in tests/fixtures/kernel/SOURCES.md.
KERNEL_FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "kernel"


def _sxids(name):
    return kernel.parse_sxid_events((KERNEL_FIXTURES / name).read_text(encoding="utf-8"))


def test_sxid_guide_example_is_one_non_fatal_event_and_its_raw_lines_are_not_events():
    events = _sxids("sxid_fm-user-guide_example.txt")
    assert len(events) == 1
    event = events[0]
    assert (event["switch"], event["switch_index"], event["pci"], event["code"]) == (
        "nvidia-nvswitch3",
        3,
        "0000:c1:00.0",
        28006,
    )
    assert (event["fatal"], event["link"], event["message"]) == (False, 46, "MC TS crumbstore MCTO (First)")
    assert event["timestamp"] == "..."  # the guide's placeholder for the time


def test_sxid_dmesg_with_data_lines_before_the_classified_line():
    events = _sxids("sxid_nvtrust-issue124_h100_drv570_EXCERPT.txt")
    assert [(e["code"], e["fatal"], e["link"]) for e in events] == [
        (22013, False, 44),
        (22013, False, 45),
        (22013, False, 46),
    ]
    assert events[0]["timestamp"] == "38.178720"
    assert events[0]["message"] == "Minion Link DLREQ interrupt"
    assert {e["pci"] for e in events} == {"0000:04:00.0"}


def test_sxid_fatal_lines_without_timestamps_and_a_code_known_only_by_its_raw_line():
    events = _sxids("sxid_menthos-dataset_fatal-ltssm_EXCERPT.txt")
    fatal = [(e["switch"], e["link"]) for e in events if e["fatal"] is True]
    assert fatal == [
        ("nvidia-nvswitch0", 28),
        ("nvidia-nvswitch0", 29),
        ("nvidia-nvswitch2", 27),
        ("nvidia-nvswitch3", 24),
        ("nvidia-nvswitch1", 25),
    ]
    assert {e["code"] for e in events if e["fatal"] is True} == {20034}
    assert [(e["switch"], e["code"]) for e in events if e["fatal"] is False] == [
        ("nvidia-nvswitch4", 19084),
        ("nvidia-nvswitch3", 19084),
    ]
    unclassified = [e for e in events if e["fatal"] is None]
    assert [(e["switch"], e["code"], e["count"]) for e in unclassified] == [("nvidia-nvswitch2", 10002, 1)]
    assert unclassified[0]["message"].startswith("Severity 5 Engine instance 00")
    assert all(e["timestamp"] is None and e["host"] is None for e in events)


def test_sxid_dmesg_decode_iso_line_with_data_only():
    (event,) = _sxids("sxid_gpud-pr338_dmesg-decode-iso_data-only.txt")
    assert (event["switch"], event["pci"], event["code"], event["fatal"]) == (
        "nvidia-nvswitch1",
        "0000:84:00.0",
        12028,
        None,
    )
    assert event["timestamp"] == "2025-01-25T10:34:54,859532+00:00"
    assert event["message"].startswith("Data {0x000001c0")


def test_sxid_journal_line_and_upper_case_non_fatal_of_the_guides_convention():
    text = (
        "Jul 06 12:00:05 dgx01 kernel: nvidia-nvswitch2: SXid (PCI:0000:C4:00.0): 12028, Non-Fatal, Link 07 "
        "egress non-posted PRIV error (First)\n"
        "Jul 06 12:00:06 dgx01 kernel: NVRM: Xid (PCI:0000:3b:00): 74, pid=1, NVLink error\n"
    )
    (event,) = kernel.parse_sxid_events(text)
    assert (event["host"], event["timestamp"], event["pci"], event["fatal"], event["link"]) == (
        "dgx01",
        "Jul 06 12:00:05",
        "0000:c4:00.0",
        False,
        7,
    )
    # the Xid on the next line is the Xid parser's, not an SXid
    assert [e["code"] for e in kernel.parse_xid_events(text)] == [74]


def test_sxid_none_in_a_log_without_nvswitch_lines():
    assert kernel.parse_sxid_events("[    1.0] Linux version 6.1.0\n[ 2.0] NVRM: Xid (PCI:0000:3b:00): 79, x\n") == []
    assert kernel.parse_sxid_events("") == []


# NVIDIA Xid lines: real samples and their sources in tests/fixtures/kernel/SOURCES.md ("Xid lines").


def _xids(name):
    return kernel.parse_xid_events((KERNEL_FIXTURES / name).read_text(encoding="utf-8"))


def test_real_dmesg_ctime_xids_keep_their_time_process_and_action_and_skip_other_lines():
    events = _xids("xid_gpud-xid-readme_dmesg-ctime_EXCERPT.txt")
    assert [(e["code"], e["pid"], e["process"]) for e in events] == [
        (13, None, None),
        (13, None, None),
        (13, None, None),
        (109, 1797828, "pt_main_thread"),
        (31, 626486, "pt_main_thread"),
        (109, 1158578, "pt_main_thread"),
    ]
    assert {e["pci_bus"] for e in events} == {"0000:cb:00"}
    assert events[0]["timestamp"] == "Fri Aug 30 11:43:09 2024" and events[0]["host"] is None
    assert events[0]["message"] == "Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter"
    assert [e["action"] for e in events] == ["restart_app"] * 3 + ["reset_gpu", "restart_app", "reset_gpu"]
    assert all(e["caused_by_code"] is None for e in events)


def test_real_syslog_xids_carry_the_syslog_time_and_host():
    events = _xids("xid_gpu-operator-issue1146_syslog_dbe_EXCERPT.txt")
    assert [(e["code"], e["pci_bus"], e["timestamp"], e["host"]) for e in events] == [
        (48, "0000:07:00", "Dec  2 11:38:47", "worker4"),
        (64, "0000:07:00", "Dec  2 11:38:47", "worker4"),
    ]
    assert events[0]["message"].startswith("An uncorrectable double bit error (DBE)")
    assert [e["action"] for e in events] == ["reset_gpu", "reset_gpu"]


def test_real_xid_45_lines_name_the_xid_they_clean_up_after():
    events = _xids("xid_open-gpu-kernel-modules-issue1150_xid45_EXCERPT.txt")
    assert len(events) == 7 and {e["code"] for e in events} == {45}
    assert [(e["pci_bus"], e["caused_by_code"]) for e in events[:4]] == [
        ("0000:dc:00", 149),
        ("0000:ed:00", 145),
        ("0000:ba:00", 145),
        ("0000:97:00", 145),
    ]
    assert {e["action"] for e in events} == {"ignore"}  # Xid 45's own catalogue action
