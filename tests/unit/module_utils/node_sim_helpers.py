"""A simulated lab node in-process: hardware.json from a profile + faults, the lab's nvidia-smi, ibstat,
simulated kernel (lsmod, dmesg, modprobe), and facts built with the module_utils parsers in the shape
of the nvidia_smi_facts / infiniband_facts modules. Shared by the node-health and gpu_node_check tests."""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import io
import json
import os
from pathlib import Path

import yaml
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_infiniband as ib
from ansible_collections.gpuforge.cluster.plugins.modules import nvidia_smi_facts
from gpuforge_sim import fabricmanager, ibstat, nvidia_smi

from gpuforge.lab.profiles import hardware_document, load_profile

ROOT = Path(__file__).resolve().parents[3]
SIMKERNEL = ROOT / "lab/image/overlay/usr/local/lib/gpuforge-lab/simkernel.py"
EXPECTED = ROOT / "roles/gpuforge/defaults/main/expected_hardware.yml"
PINS = ROOT / "roles/gpuforge/defaults/main/gpu_stack.yml"
# Lab nodes run Debian 12: the driver release pinned for it, and the branch validation expects of it.
LAB_DRIVER_RELEASE = yaml.safe_load(PINS.read_text(encoding="utf-8"))["gpuforge_nvidia_driver_versions"]["cuda"][
    "debian12"
]


@functools.cache
def lab_driver_data() -> str:
    """The nvidia-driver.json the lab mirror builds into the pinned nvidia-smi package (from the registry)."""
    from gpuforge.lab import mirror

    package = next(
        p
        for p in mirror.expand(mirror.load_definitions())
        if "/usr/bin/nvidia-smi" in (p.get("commands") or {}) and p["version"].startswith(LAB_DRIVER_RELEASE + "-")
    )
    return package["files"]["/usr/lib/gpuforge-lab/nvidia-driver.json"]


GPU_PROFILES = [
    "dgx1-v100-edr",
    "supermicro-4029gp-v100",
    "poweredge-c4140-v100",
    "vsphere-t4-vgpu-roce",
    "dgx-h100-ndr",
]


def nvbandwidth_minimums(profile: str) -> dict:
    """The nvbandwidth thresholds validate.yml hands the diagnostic for a lab node of this profile (its GPU SKU's
    entry of gpuforge_expected_nvbandwidth, roles/gpuforge/defaults/main/acceptance_checks.yml)."""
    systems = yaml.safe_load(EXPECTED.read_text(encoding="utf-8"))["gpuforge_expected_systems"]
    table = yaml.safe_load((EXPECTED.parent / "acceptance_checks.yml").read_text(encoding="utf-8"))
    return table["gpuforge_expected_nvbandwidth"][systems[profile]["gpu_sku"]]


def expected_for(system: str) -> dict:
    """The spec validate.yml hands gpu_node_check: SKU + system + link speeds + global thresholds."""
    data = yaml.safe_load(EXPECTED.read_text(encoding="utf-8"))
    spec = data["gpuforge_expected_systems"][system]
    limits = {
        **data["gpuforge_expected_memory_errors"],
        **data["gpuforge_expected_clock_events"],
        **data["gpuforge_expected_pcie_aer"],
    }
    merged = {**limits, **data["gpuforge_expected_gpu_skus"][spec["gpu_sku"]], **spec}
    merged.update(
        link_speeds=data["gpuforge_expected_link_speeds"],
        # expected_hardware.yml takes the branch from the driver pin (a template); the lab's is Debian 12's.
        driver_branch=LAB_DRIVER_RELEASE.split(".")[0],
        retired_pages_max=data["gpuforge_expected_retired_pages_max"],
        xid_fatal=data["gpuforge_expected_xid_fatal"],
        xid_fail_actions=data["gpuforge_expected_xid_fail_actions"],
        nvlink_error_max=data["gpuforge_expected_nvlink_error_max"],
        ib_link_flaps_max=data["gpuforge_expected_ib_link_flaps_max"],
    )
    return merged


class _SimModule:
    """The AnsibleModule methods NvidiaSmiFacts uses, answered by the simulated nvidia-smi."""

    def __init__(self, params: dict, smi):
        self.params = params
        self.smi = smi

    def get_bin_path(self, name):
        return "/usr/bin/nvidia-smi" if name == "nvidia-smi" else None

    def run_command(self, argv, **_kwargs):
        return self.smi(*argv[1:])


class SimNode:
    """Boot a lab node in tmp_path: env for the simulators, driver + peermem modules installed."""

    def __init__(self, tmp_path: Path, monkeypatch, profile: str, faults: list | None = None):
        for name in ("run", "lib/modules", "lib/kernel-modules", "etc", "log", "state", "persistenced"):
            (tmp_path / name).mkdir(parents=True, exist_ok=True)
        for env, sub in (
            ("RUN", "run"),
            ("LIB", "lib"),
            ("ETC", "etc"),
            ("LOG", "log"),
            ("STATE", "state"),
            ("PERSISTENCED_DIR", "persistenced"),
        ):
            monkeypatch.setenv(f"GPUFORGE_LAB_{env}", str(tmp_path / sub))
        monkeypatch.setenv("GPUFORGE_LAB_HARDWARE", str(tmp_path / "hardware.json"))
        monkeypatch.setenv("GPUFORGE_LAB_FM_LOG_DIR", str(tmp_path / "log"))
        document = hardware_document(load_profile(profile), faults or [])
        self.nvswitch = bool(document.get("system", {}).get("nvswitch"))
        (tmp_path / "hardware.json").write_text(json.dumps(document), encoding="utf-8")
        for name, depends, directory in (
            ("nvidia", [], "modules"),
            ("ib_core", [], "kernel-modules"),
            ("nvidia_peermem", ["nvidia", "ib_core"], "modules"),
        ):
            meta = {"size": 16384, "depends": depends, "version": LAB_DRIVER_RELEASE + "-1"}
            (tmp_path / "lib" / directory / f"{name}.ko").write_text(json.dumps(meta), encoding="utf-8")
        (tmp_path / "lib" / "nvidia-driver.json").write_text(lab_driver_data(), encoding="utf-8")
        # nvidia-persistenced "runs" as long as this test process does.
        (tmp_path / "persistenced" / "nvidia-persistenced.pid").write_text(str(os.getpid()), encoding="ascii")
        spec = importlib.util.spec_from_file_location(f"simkernel_{id(tmp_path)}", SIMKERNEL)
        self.kernel = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.kernel)
        with contextlib.redirect_stdout(io.StringIO()):
            self.kernel.boot()
        for module in ("nvidia", "nvidia-peermem"):
            with contextlib.redirect_stderr(io.StringIO()):
                self.kernel.modprobe_main([module])

    def _capture(self, main, argv):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            rc = main(argv)
        return rc, out.getvalue()

    def lsmod(self) -> str:
        return self._capture(self.kernel.lsmod_main, [])[1]

    def dmesg(self) -> str:
        return self._capture(self.kernel.dmesg_main, [])[1]

    @staticmethod
    def smi(*argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        rc = nvidia_smi.main(list(argv), out=out, err=err)
        return rc, out.getvalue(), err.getvalue()

    def nvidia_smi_facts(self, samples: int = 10) -> dict:
        """The facts the nvidia_smi_facts module gathers (fail_on_error false) from the simulated nvidia-smi:
        the module's own gather(), clock event samples taken back to back."""
        params = {
            "executable": "nvidia-smi",
            "topology": True,
            "nvlink": True,
            "clock_event_samples": samples,
            "clock_event_interval_ms": 0,
            "fail_on_error": False,
        }
        return nvidia_smi_facts.NvidiaSmiFacts(_SimModule(params, self.smi)).gather()

    def fabric_manager(self) -> str:
        """What `systemctl is-active nvidia-fabricmanager` prints once the driver role started the service: the
        lab's nv-fabricmanager started in-process (Type=simple: active while it runs; its exit 1 leaves the unit
        failed). The role starts it on NVSwitch systems only: elsewhere the unit stays inactive."""
        if not self.nvswitch:
            return "inactive"
        rc, _out = self._capture(lambda argv: fabricmanager.main(argv, serve=False), ["-c", "fabricmanager.cfg"])
        return "active" if rc == 0 else "failed"

    def infiniband_facts(self) -> dict:
        _rc, out = self._capture(ibstat.main, [])
        parsed = ib.parse_ibstat(out)
        return {"available": True, "hcas": parsed["cas"], "errors": parsed["errors"]}
