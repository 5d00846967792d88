"""kernel_module: decisions from lsmod output, modprobe calls, boot files, check mode and errors."""

from __future__ import annotations

from functools import partial

import pytest
from ansible_collections.gpuforge.cluster.plugins.modules import kernel_module


class FakeKernel:
    """Answers lsmod from a module table and applies modprobe / modprobe -r to it."""

    def __init__(self, loaded: dict[str, list[str]] | None = None, modprobe_rc: int = 0, lsmod_text: str | None = None):
        self.loaded = dict(loaded or {})  # name -> modules it depends on
        self.modprobe_rc = modprobe_rc
        self.lsmod_text = lsmod_text
        self.calls: list[tuple[list[str], dict]] = []

    def lsmod(self) -> str:
        lines = ["Module                  Size  Used by"]
        for name in self.loaded:
            users = [other for other, deps in self.loaded.items() if name in deps]
            lines.append(f"{name:<19} {16384:>8}  {len(users)}" + (" " + ",".join(users) if users else ""))
        return "\n".join(lines) + "\n"

    def __call__(self, args, **kwargs):
        self.calls.append((args, kwargs))
        if args[0].endswith("lsmod"):
            return 0, self.lsmod_text if self.lsmod_text is not None else self.lsmod(), ""
        if self.modprobe_rc:
            return self.modprobe_rc, "", "modprobe: FATAL: Module nvidia is in use."
        if args[1] == "-r":
            self.loaded.pop(args[2].replace("-", "_"), None)
        else:
            self.loaded[args[1].replace("-", "_")] = []
        return 0, "", ""

    @property
    def modprobe_calls(self) -> list[list[str]]:
        return [args for args, _ in self.calls if args[0].endswith("modprobe")]


@pytest.fixture
def run_module(ansible_module):
    return partial(ansible_module, kernel_module, bin_path="/usr/sbin/{}".format)


def test_loads_missing_module_with_dash_name(run_module):
    kernel = FakeKernel({"nvidia": []})
    result = run_module({"name": "nvidia-uvm"}, kernel)
    assert result["changed"] is True
    assert (result["loaded_before"], result["loaded"]) == (False, True)
    assert kernel.modprobe_calls == [["/usr/sbin/modprobe", "nvidia-uvm"]]
    assert all(kw["environ_update"] == {"LC_ALL": "C"} for _, kw in kernel.calls)
    assert "nvidia_uvm" in kernel.loaded


def test_loaded_module_is_left_alone(run_module):
    kernel = FakeKernel({"nvidia": [], "nvidia_uvm": ["nvidia"]})
    result = run_module({"name": "nvidia"}, kernel)
    assert result["changed"] is False
    assert result["used_by"] == ["nvidia_uvm"]
    assert kernel.modprobe_calls == []


def test_unloads_and_check_mode_does_not(run_module):
    kernel = FakeKernel({"nouveau": []})
    result = run_module({"name": "nouveau", "state": "absent"}, kernel, check_mode=True)
    assert (result["changed"], result["loaded"]) == (True, False)
    assert kernel.modprobe_calls == [] and "nouveau" in kernel.loaded
    result = run_module({"name": "nouveau", "state": "absent"}, kernel)
    assert kernel.modprobe_calls == [["/usr/sbin/modprobe", "-r", "nouveau"]]
    assert result["diff"] == {"before": "loaded: True\n", "after": "loaded: False\n"}
    assert run_module({"name": "nouveau", "state": "absent"}, kernel)["changed"] is False


def test_params_passed_and_persisted(run_module, tmp_path):
    kernel = FakeKernel()
    args = {
        "name": "nvidia",
        "params": "NVreg_EnableStreamMemOPs=1",
        "persistent": "present",
        "modules_load_dir": str(tmp_path / "modules-load.d"),
        "modprobe_dir": str(tmp_path / "modprobe.d"),
    }
    result = run_module(args, kernel)
    assert kernel.modprobe_calls == [["/usr/sbin/modprobe", "nvidia", "NVreg_EnableStreamMemOPs=1"]]
    assert sorted(result["files_changed"]) == [
        str(tmp_path / "modprobe.d/nvidia.conf"),
        str(tmp_path / "modules-load.d/nvidia.conf"),
    ]
    assert (tmp_path / "modules-load.d/nvidia.conf").read_text() == "# Managed by gpuforge (kernel_module)\nnvidia\n"
    assert (tmp_path / "modprobe.d/nvidia.conf").read_text().endswith("options nvidia NVreg_EnableStreamMemOPs=1\n")
    again = run_module(args, kernel)
    assert again["changed"] is False and again["files_changed"] == []


def test_persistent_absent_keeps_files_it_did_not_write(run_module, tmp_path):
    (tmp_path / "modprobe.d").mkdir()
    (tmp_path / "modules-load.d").mkdir()
    foreign = tmp_path / "modprobe.d/nvidia.conf"
    foreign.write_text("options nvidia NVreg_DynamicPowerManagement=0x02\n")
    ours = tmp_path / "modules-load.d/nvidia.conf"
    ours.write_text("# Managed by gpuforge (kernel_module)\nnvidia\n")
    args = {
        "name": "nvidia",
        "state": "absent",
        "persistent": "absent",
        "modules_load_dir": str(tmp_path / "modules-load.d"),
        "modprobe_dir": str(tmp_path / "modprobe.d"),
    }
    result = run_module(args, FakeKernel())
    assert result["files_changed"] == [str(ours)]
    assert not ours.exists() and foreign.exists()


def test_modprobe_failure_names_users(run_module):
    kernel = FakeKernel({"nvidia": [], "nvidia_uvm": ["nvidia"]}, modprobe_rc=1)
    result = run_module({"name": "nvidia", "state": "absent"}, kernel, expect_failure=True)
    assert result["msg"] == (
        "could not unload kernel module nvidia (used by nvidia_uvm): modprobe: FATAL: Module nvidia is in use."
    )
    assert result["rc"] == 1


def test_unreadable_lsmod_fails_with_reason(run_module):
    result = run_module({"name": "nvidia"}, FakeKernel(lsmod_text="garbage\n"), expect_failure=True)
    assert result["msg"].startswith("could not read the loaded modules from lsmod: lsmod: missing the")


def test_modprobe_that_does_not_load_is_reported(run_module):
    class Silent(FakeKernel):
        def __call__(self, args, **kwargs):
            if args[0].endswith("modprobe"):
                self.calls.append((args, kwargs))
                return 0, "", ""
            return super().__call__(args, **kwargs)

    result = run_module({"name": "nvidia"}, Silent(), expect_failure=True)
    assert "lsmod still shows kernel module nvidia as not loaded" in result["msg"]
