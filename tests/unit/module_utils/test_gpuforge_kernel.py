"""lsmod and NVIDIA Xid kernel-log parsers."""

from __future__ import annotations

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
