"""Only validation samples clock event reasons (issue 18: the toolkit's own speed).

nvidia_smi_facts samples the clock event reasons 20 times, 500 ms apart, by default: 10 s per node and call, and so
does gpu_node_check when it reads the GPUs itself (gather: true). Validation judges them (thermal and power
slowdown); every other caller needs the GPU list, the driver release or the topology, and a converge calls it on
every GPU node (the driver's verify, Slurm's gres.conf, the container smoke test), so those calls set
clock_event_samples: 0.
"""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
MODULE = "gpuforge.cluster.nvidia_smi_facts"
# gpu_node_check reads nvidia-smi as nvidia_smi_facts does, sampling included, when it gathers.
CHECK_MODULE = "gpuforge.cluster.gpu_node_check"
# Where sampling is the point: validation's node checks read the clock event reasons.
SAMPLING_ALLOWED = {"playbooks/tasks/validate_node.yml"}


def _tasks(node):
    """Every task mapping in a task file, blocks and their rescue/always included."""
    if isinstance(node, list):
        for item in node:
            yield from _tasks(item)
    elif isinstance(node, dict):
        if any(key in node for key in ("block", "rescue", "always")):
            for key in ("block", "rescue", "always"):
                yield from _tasks(node.get(key) or [])
        else:
            yield node


def _calls():
    files = sorted((ROOT / "roles").glob("*/tasks/*.yml")) + sorted((ROOT / "playbooks").rglob("*.yml"))
    for path in files:
        for task in _tasks(yaml.safe_load(path.read_text(encoding="utf-8")) or []):
            args = task.get(MODULE)
            if args is None and (task.get(CHECK_MODULE) or {}).get("gather"):
                args = task[CHECK_MODULE]
            if MODULE in task or args is not None:
                yield path.relative_to(ROOT).as_posix(), task.get("name", ""), args or {}


def test_the_scan_finds_the_known_callers():
    found = {path for path, _, _ in _calls()}
    assert {"roles/nvidia_driver/tasks/verify.yml", "roles/slurm/tasks/main.yml"} <= found
    assert found >= SAMPLING_ALLOWED


def test_only_validation_samples_clock_events():
    sampling = [
        f"{path}: {name!r}"
        for path, name, args in _calls()
        if path not in SAMPLING_ALLOWED and args.get("clock_event_samples", 20) != 0
    ]
    assert not sampling, "set clock_event_samples: 0 (10 s per node otherwise): " + "; ".join(sampling)
