"""Simulated NVIDIA DCGM command line: `dcgmi diag -r <level> [-j]`, `dcgmi -v`, and `nv-hostengine`
(one module for both; the lab's wrapper names the command in GPUFORGE_SIM_PROG).

`nv-hostengine` is the DCGM daemon the `nvidia-dcgm` unit runs (`-n`: stay in the foreground); it records
its pid in the run directory. `dcgmi` talks to it: with no host engine running it prints the real client's
two lines, "Error: unable to establish a connection to the specified host: localhost" / "Error: Unable to
connect to host engine. Host engine connection invalid/disconnected." (NVIDIA/DCGM issues 43 and 57), and
exits 250 (lab value: DCGM's negative status -6 as an unsigned byte, the way NVIDIA/DCGM issue 158 reads
226 as -30).

`dcgmi diag -r N -j` prints the JSON document of the installed DCGM major version (its version comes from
<lib dir>/dcgm.json, which the lab mirror generates from the registry package):
* DCGM 4.x: `{"DCGM Diagnostic": {"test_categories": [...]}, "entity_groups": [...], "metadata": {...}}`
  with `entity_group`/`entity_group_id`/`entity_id` results and a `test_summary` per test
  (NVIDIA/DCGM testing/python3/dcgm_diag_schema.json; a DCGM 4.2.3 capture in tests/fixtures/dcgmi/);
* DCGM 3.x: `{"DCGM GPU Diagnostic": {"test_categories": [...]}}` with `"gpu_id": "<n>"` results and the
  3.x display names (NVIDIA/DCGM issues 55 and 139).
Tests per level (DCGM 4 names; NVIDIA/DCGM nvvs/src/NvidiaValidationSuite.cpp FillTestVectors):
r1 software; r2 + memory, pcie; r3 + diagnostic,
targeted_stress, targeted_power, memory_bandwidth; r4 + memtest, pulse_test. A GPU that fell off the bus
or is missing is not in the diagnostic's group.

Fault `dcgm_diag_failure` {gpu, test, optional level} (lab/profiles/SCHEMA.md): that test fails on that GPU
(profile index) in every run of `level` or higher (default: the first level that runs the test), with a
warning naming the GPU. Without -j the table is not simulated: dcgmi prints a note and exits 0.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time

from gpuforge_sim.hardware import faults_of, lib_dir, load_hardware, run_dir, visible_gpus

NO_HOST_ENGINE = (
    "Error: unable to establish a connection to the specified host: localhost\n"
    "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n"
)
NO_HOST_ENGINE_RC = 250
DEFAULT_VERSION = "4.4.1"
# (DCGM 4 name, category, first level, DCGM 3 display name)
TESTS = (
    ("software", "Deployment", 1, "Page Retirement/Row Remap"),
    ("memory", "Hardware", 2, "GPU Memory"),
    ("pcie", "Integration", 2, "PCIe"),
    ("diagnostic", "Hardware", 3, "Diagnostic"),
    ("targeted_stress", "Stress", 3, "Targeted Stress"),
    ("targeted_power", "Stress", 3, "Targeted Power"),
    ("memory_bandwidth", "Stress", 3, "Memory Bandwidth"),
    ("memtest", "Hardware", 4, "Memtest"),
    ("pulse_test", "Stress", 4, "Pulse Test"),
)
# DCGM 3.x runs the software checks as separate Deployment tests (NVIDIA/DCGM issue 55, DCGM 3.0.4 output); a
# software fault fails the row remap one (FAILURE_TEXT).
DEPLOYMENT_3X = (
    "Denylist",
    "NVML Library",
    "CUDA Main Library",
    "Permissions and OS Blocks",
    "Persistence Mode",
    "Environment Variables",
    "Page Retirement/Row Remap",
    "Graphics Processes",
    "Inforom",
)
TEST_LEVELS = {name: level for name, _category, level, _old in TESTS}
LEVEL_NAMES = {"short": 1, "quick": 1, "medium": 2, "long": 3, "xlong": 4}
# Lab wording of a failure per test (the real text names the same things: GPU, what failed, what to do).
FAILURE_TEXT = {
    "software": "GPU {gpu}: page retirement/row remap check failed: pending retirements. Reset the GPU.",
    "memory": "GPU {gpu}: memory test found mismatches (DBE) in framebuffer memory. Drain and RMA.",
    "pcie": "GPU {gpu}: PCIe replay rate above the limit; host-to-GPU bandwidth below the minimum.",
    "diagnostic": "GPU {gpu}: GEMM results mismatched between iterations (compute fault).",
    "targeted_stress": "GPU {gpu}: did not reach the target performance under stress.",
    "targeted_power": "GPU {gpu}: did not reach the target power draw (power capping or a hardware fault).",
    "memory_bandwidth": "GPU {gpu}: memory bandwidth below the SKU minimum.",
    "memtest": "GPU {gpu}: memtest pattern errors in framebuffer memory.",
    "pulse_test": "GPU {gpu}: pulse test detected a power-delivery fault.",
}


def pid_file() -> str:
    return os.path.join(run_dir(), "nv-hostengine.pid")


def host_engine_running() -> bool:
    try:
        with open(pid_file(), encoding="ascii") as handle:
            pid = int(handle.read().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    return True


def own_version() -> str:
    """The installed DCGM version without epoch or revision (<lib dir>/dcgm.json), else a lab default."""
    try:
        with open(os.path.join(lib_dir(), "dcgm.json"), encoding="utf-8") as handle:
            version = str(json.load(handle)["version"])
    except (OSError, ValueError, KeyError):
        return DEFAULT_VERSION
    return version.split(":")[-1].split("-")[0]


def _failures(hw: dict, level: int) -> dict:
    """{(profile index, test): fault} of the dcgm_diag_failure faults that show at this level."""
    found = {}
    for fault in faults_of(hw, "dcgm_diag_failure"):
        test = fault.get("test")
        if test not in TEST_LEVELS:
            continue
        if level >= int(fault.get("level") or TEST_LEVELS[test]):
            found[(int(fault.get("gpu", -1)), test)] = fault
    return found


def diag_document(hw: dict, level: int, version: str) -> dict:
    """The JSON document `dcgmi diag -r level -j` prints for this hardware (shape of the DCGM major)."""
    gpus = [g for g in visible_gpus(hw) if not g.get("fallen_off_bus")]
    failures = _failures(hw, level)
    major = int(version.split(".")[0] or 4)
    categories: list = []
    for name, category, first, old_name in TESTS:
        if first > level:
            continue
        if major < 4 and name == "software":
            categories.append(_deployment_3x(gpus, failures))
            continue
        results = []
        for gpu in gpus:
            failed = (gpu["profile_index"], name) in failures
            if major >= 4:
                result = {"entity_group": "GPU", "entity_group_id": 1, "entity_id": gpu["index"]}
            else:
                result = {"gpu_id": str(gpu["index"])}
            result["status"] = "Fail" if failed else "Pass"
            if failed:
                text = FAILURE_TEXT[name].format(gpu=gpu["index"])
                result["warnings"] = [
                    {"error_category": 1, "error_id": 0, "error_severity": 2, "warning": text}
                    if major >= 4
                    else {"warning": text}
                ]
            results.append(result)
        test = {"name": name if major >= 4 else old_name, "results": results}
        if major >= 4:
            test["test_summary"] = {"status": "Fail" if any(r["status"] == "Fail" for r in results) else "Pass"}
        entry = next((c for c in categories if c["category"] == category), None)
        if entry is None:
            entry = {"category": category, "tests": []}
            categories.append(entry)
        entry["tests"].append(test)
    if major < 4:
        return {"DCGM GPU Diagnostic": {"test_categories": categories}}
    prefix = str((hw.get("gpu") or {}).get("serial_prefix") or "")
    return {
        "DCGM Diagnostic": {"test_categories": categories},
        "entity_groups": [
            {
                "entities": [
                    {"device_id": "0000", "entity_id": g["index"], "serial_num": f"{prefix}{g['profile_index']}"}
                    for g in gpus
                ],
                "entity_group": "GPU",
                "entity_group_id": 1,
            }
        ],
        "metadata": {"Driver Version Detected": _driver_version(), "version": version},
    }


def _deployment_3x(gpus: list, failures: dict) -> dict:
    tests = []
    for old_name in DEPLOYMENT_3X:
        results = []
        for gpu in gpus:
            failed = old_name == TESTS[0][3] and (gpu["profile_index"], "software") in failures
            result = {"gpu_id": str(gpu["index"]), "status": "Fail" if failed else "Pass"}
            if failed:
                result["warnings"] = [{"warning": FAILURE_TEXT["software"].format(gpu=gpu["index"])}]
            results.append(result)
        tests.append({"name": old_name, "results": results})
    return {"category": "Deployment", "tests": tests}


def _driver_version() -> str:
    try:
        with open(os.path.join(lib_dir(), "nvidia-driver.json"), encoding="utf-8") as handle:
            return str(json.load(handle)["driver_version"])
    except (OSError, ValueError, KeyError):
        return ""


def _level(value: str):
    if value.isdigit() and 1 <= int(value) <= 4:
        return int(value)
    return LEVEL_NAMES.get(value.lower())


def diag_main(argv: list, out, err) -> int:
    level, as_json = None, False
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-r", "--run") and i + 1 < len(argv):
            level = _level(argv[i + 1])
            if level is None:
                err.write(f"Error: invalid diagnostic level or test name '{argv[i + 1]}'\n")
                return 2
            i += 2
            continue
        if arg in ("-j", "--json"):
            as_json = True
        i += 1
    if level is None:
        err.write("Error: dcgmi diag needs -r <level> (1-4 or short/medium/long/xlong)\n")
        return 2
    if not host_engine_running():
        err.write(NO_HOST_ENGINE)
        return NO_HOST_ENGINE_RC
    document = diag_document(load_hardware(), level, own_version())
    if not as_json:
        out.write("Successfully ran diagnostic for group.\n(gpuforge lab: the table is not simulated; use -j)\n")
        return 0
    out.write(json.dumps(document, indent=4) + "\n")
    return 0


def hostengine_main(argv: list, out, serve: bool = True) -> int:
    """nv-hostengine: record the pid and stay up (-n: in the foreground, as the unit runs it)."""
    os.makedirs(run_dir(), exist_ok=True)
    if not serve:
        with open(pid_file(), "w", encoding="ascii") as handle:
            handle.write(str(os.getpid()))
        return 0
    if "-n" not in argv and os.fork() > 0:
        out.write("Started host engine version " + own_version() + " using port number: 5555\n")
        return 0
    with open(pid_file(), "w", encoding="ascii") as handle:
        handle.write(str(os.getpid()))

    def stop(_signum, _frame):
        with contextlib.suppress(OSError):
            os.unlink(pid_file())
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    while True:
        time.sleep(3600)


def main(argv: list | None = None, out=None, err=None, serve: bool = True) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    out = out or sys.stdout
    err = err or sys.stderr
    if os.environ.get("GPUFORGE_SIM_PROG") == "nv-hostengine":
        return hostengine_main(argv, out, serve)
    if argv[:1] in (["-v"], ["--version"]):
        out.write(f"Version : {own_version()}\nBuild Type : Release (gpuforge lab)\n")
        return 0
    if argv[:1] == ["diag"]:
        return diag_main(argv[1:], out, err)
    err.write("gpuforge lab dcgmi: only 'dcgmi diag -r <level> [-j]' and 'dcgmi -v' are simulated\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
