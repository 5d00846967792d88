"""selinux_relabel: one restorecon -R -v over the paths and the hook's files, changed from its Relabeled lines.

restorecon's lines are libselinux's format (selinux_restorecon.c: "Relabeled|Would relabel <path> from <old> to
<new>"); where SELinux is disabled restorecon prints nothing and exits 0 (policycoreutils setfiles.c).
"""

from __future__ import annotations

import os
from functools import partial

import pytest
from ansible_collections.gpuforge.cluster.plugins.modules import selinux_relabel

DEVICE = "system_u:object_r:device_t:s0"
XSERVER = "system_u:object_r:xserver_misc_device_t:s0"
KUBELET = "system_u:object_r:container_var_lib_t:s0"


class FakeNode:
    """nvidia-container-cli -k list prints hook_files; restorecon answers `relabel` (path -> old context)."""

    def __init__(self, hook_files=(), relabel=None, cli_rc=0, restorecon_rc=0):
        self.hook_files, self.relabel = list(hook_files), dict(relabel or {})
        self.cli_rc, self.restorecon_rc = cli_rc, restorecon_rc
        self.calls: list[list[str]] = []
        self.kwargs: list[dict] = []

    def __call__(self, argv, **kwargs):
        argv = list(argv)
        self.calls.append(argv)
        self.kwargs.append(kwargs)
        tool = os.path.basename(argv[0])
        if tool == "nvidia-container-cli":
            assert argv[1:] == ["-k", "list"]
            if self.cli_rc:
                return self.cli_rc, "", "nvidia-container-cli: initialization error: nvml error: driver not loaded\n"
            return 0, "".join(f"{path}\n" for path in self.hook_files), ""
        if tool == "restorecon":
            if self.restorecon_rc:
                return (
                    self.restorecon_rc,
                    "",
                    "restorecon: Could not set context for /dev/x:  Operation not supported\n",
                )
            word = "Would relabel" if "-n" in argv else "Relabeled"
            targets = [arg for arg in argv[1:] if not arg.startswith("-")]
            lines = [
                f"{word} {path} from {old} to {XSERVER if path.endswith(('nvidia0', 'nvidiactl')) else KUBELET}\n"
                for path, old in self.relabel.items()
                if any(path == t or path.startswith(t + "/") for t in targets)
            ]
            return 0, "".join(lines), ""
        raise AssertionError(f"unexpected command {argv}")


def bins(*present):
    return lambda name: f"/usr/bin/{name}" if name in present else None


@pytest.fixture
def tree(tmp_path):
    """A /dev and a kubelet directory with a few files under tmp_path."""
    for path in ("dev/nvidia0", "dev/nvidiactl", "var/lib/kubelet/pods/a", "usr/bin/nvidia-smi"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("", encoding="ascii")
    return tmp_path


@pytest.fixture
def run(ansible_module):
    def run(node, args, present=("restorecon",), **kwargs):
        return partial(ansible_module, selinux_relabel, bin_path=bins(*present))(args, node, **kwargs)

    return run


def test_relabels_and_reports_changed(run, tree):
    dev, kubelet = str(tree / "dev"), str(tree / "var/lib/kubelet")
    node = FakeNode(relabel={f"{dev}/nvidia0": DEVICE})
    result = run(node, {"paths": [dev, kubelet]})
    assert result["changed"] is True
    assert node.calls == [["/usr/bin/restorecon", "-R", "-v", dev, kubelet]]
    assert node.kwargs[0]["environ_update"] == {"LC_ALL": "C"}
    assert result["relabeled"] == [{"path": f"{dev}/nvidia0", "from": DEVICE, "to": XSERVER}]
    assert result["missing"] == [] and result["container_cli"] is None and result["hook_files"] == []


def test_nothing_to_relabel_is_unchanged(run, tree):
    node = FakeNode()
    result = run(node, {"paths": [str(tree / "dev")]}, diff=True)
    assert result["changed"] is False and result["relabeled"] == []
    assert result["diff"] == {"before": "", "after": ""}


def test_check_mode_asks_restorecon_not_to_change(run, tree):
    dev = str(tree / "dev")
    node = FakeNode(relabel={f"{dev}/nvidiactl": DEVICE, f"{dev}/nvidia0": "<no context>"})
    result = run(node, {"paths": [dev]}, check_mode=True, diff=True)
    assert node.calls == [["/usr/bin/restorecon", "-R", "-v", "-n", dev]]
    assert result["changed"] is True
    assert [entry["path"] for entry in result["relabeled"]] == [f"{dev}/nvidiactl", f"{dev}/nvidia0"]
    assert result["relabeled"][1]["from"] is None
    assert result["diff"]["before"] == f"{dev}/nvidiactl {DEVICE}\n{dev}/nvidia0 <no context>\n"
    assert result["diff"]["after"] == f"{dev}/nvidiactl {XSERVER}\n{dev}/nvidia0 {XSERVER}\n"


def test_missing_paths_are_skipped(run, tree):
    dev = str(tree / "dev")
    node = FakeNode()
    result = run(node, {"paths": [dev, str(tree / "var/lib/nothing"), dev]})
    assert node.calls == [["/usr/bin/restorecon", "-R", "-v", dev]]
    assert result["missing"] == [str(tree / "var/lib/nothing")]
    node.calls.clear()
    result = run(node, {"paths": [str(tree / "absent")]})
    assert node.calls == [] and result["changed"] is False and result["missing"] == [str(tree / "absent")]


def test_no_container_cli_no_hook_files(run, tree):
    node = FakeNode(hook_files=["/never/asked"])
    result = run(node, {"paths": [str(tree / "dev")], "hook_files_from_container_cli": True})
    assert [os.path.basename(argv[0]) for argv in node.calls] == ["restorecon"]
    assert result["container_cli"] is None


def test_hook_files_join_the_one_restorecon(run, tree):
    dev = str(tree / "dev")
    smi = str(tree / "usr/bin/nvidia-smi")
    node = FakeNode(
        hook_files=[f"{dev}/nvidiactl", smi, str(tree / "usr/lib/libcuda.so.535.183.01")], relabel={smi: DEVICE}
    )
    result = run(node, {"paths": [dev]}, present=("restorecon", "nvidia-container-cli"))
    assert node.calls == [
        ["/usr/bin/nvidia-container-cli", "-k", "list"],
        ["/usr/bin/restorecon", "-R", "-v", dev, smi],  # /dev/nvidiactl is relabelled with /dev
    ]
    assert result["container_cli"] == "/usr/bin/nvidia-container-cli"
    assert result["hook_files"] == [f"{dev}/nvidiactl", smi, str(tree / "usr/lib/libcuda.so.535.183.01")]
    assert result["missing"] == [str(tree / "usr/lib/libcuda.so.535.183.01")]
    assert result["changed"] is True and result["relabeled"][0]["path"] == smi


def test_hook_files_can_be_left_out(run, tree):
    node = FakeNode(hook_files=[str(tree / "usr/bin/nvidia-smi")])
    run(
        node,
        {"paths": [str(tree / "dev")], "hook_files_from_container_cli": False},
        present=("restorecon", "nvidia-container-cli"),
    )
    assert [os.path.basename(argv[0]) for argv in node.calls] == ["restorecon"]


def test_container_cli_failure(run, tree):
    node = FakeNode(cli_rc=1)
    result = run(
        node, {"paths": [str(tree / "dev")]}, present=("restorecon", "nvidia-container-cli"), expect_failure=True
    )
    assert result["msg"].startswith("`/usr/bin/nvidia-container-cli -k list` failed on ")
    assert "(rc 1): nvidia-container-cli: initialization error: nvml error: driver not loaded" in result["msg"]
    assert "\nFix: nvidia-container-cli needs the NVIDIA driver loaded" in result["msg"]
    assert [os.path.basename(argv[0]) for argv in node.calls] == ["nvidia-container-cli"]


def test_restorecon_failure(run, tree):
    dev = str(tree / "dev")
    result = run(FakeNode(restorecon_rc=255), {"paths": [dev]}, expect_failure=True)
    assert result["msg"].startswith(f"`/usr/bin/restorecon -R -v {dev}` failed on ")
    assert "(rc 255): restorecon: Could not set context for /dev/x:  Operation not supported" in result["msg"]
    assert "\nFix: restorecon could not read or set a label" in result["msg"]


def test_restorecon_missing(run, tree):
    result = run(FakeNode(), {"paths": [str(tree / "dev")]}, present=(), expect_failure=True)
    assert result["msg"].startswith("restorecon not found in PATH on ") and "install policycoreutils" in result["msg"]


def test_relative_path_is_refused(run):
    node = FakeNode()
    result = run(node, {"paths": ["dev"]}, expect_failure=True)
    assert result["msg"] == "paths[0] must be an absolute path, got 'dev'"
    assert node.calls == []


def test_other_lines_are_kept_and_capped(run, tree):
    dev = str(tree / "dev")
    warnings = "".join(f"Warning no default label for {dev}/x{n}\n" for n in range(60))
    result = run(lambda argv, **kw: (0, warnings, ""), {"paths": [dev]})
    assert result["changed"] is False
    assert result["messages"][0] == f"Warning no default label for {dev}/x0"
    assert len(result["messages"]) == 51 and result["messages"][-1] == "... (10 more lines)"
