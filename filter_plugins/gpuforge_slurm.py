"""Jinja2 filters for the slurm role: Slurm GPU type names and gres.conf lines from nvidia_smi facts, and the nodes
sinfo shows out of service.

Stdlib only and free of Ansible imports so the template logic is unit-testable as plain functions.
"""

from __future__ import annotations

import re

# Product-name words that are brands or packaging, not the model (nvidia-smi "Product Name").
_NAME_NOISE = {"nvidia", "tesla", "grid", "geforce", "quadro"}


def slurm_gpu_type(product_name: str | None) -> str:
    """Slurm GRES Type from an nvidia-smi product name: 'Tesla V100-SXM2-16GB' -> 'v100'.

    'NVIDIA H100 80GB HBM3' -> 'h100', 'NVIDIA A100-SXM4-40GB' -> 'a100', 'GRID T4-16C' -> 't4'.
    Unknown or empty names give 'gpu' so the line stays valid.
    """
    words = [w for w in re.split(r"\s+", (product_name or "").strip()) if w and w.lower() not in _NAME_NOISE]
    if not words:
        return "gpu"
    model = re.sub(r"[^a-z0-9]", "", words[0].split("-")[0].lower())
    return model or "gpu"


def _cpu_ids(affinity: str) -> list[int]:
    """'0-19,40-59' -> [0..19, 40..59]; anything unreadable ('N/A', None) -> []."""
    ids: list[int] = []
    for part in (affinity or "").split(","):
        part = part.strip()
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not match:
            return []
        start = int(match.group(1))
        end = int(match.group(2) or start)
        ids.extend(range(start, end + 1))
    return ids


def _ranges(numbers: list[int]) -> str:
    """[0,1,2,5] -> '0-2,5'."""
    out: list[str] = []
    numbers = sorted(set(numbers))
    start = prev = None
    for n in [*numbers, None]:
        if start is None:
            start = prev = n
        elif n is not None and n == prev + 1:
            prev = n
        else:
            out.append(str(start) if start == prev else f"{start}-{prev}")
            start = prev = n
    return ",".join(out)


def slurm_cores(affinity: str | None, total_cores: int, vcpus: int) -> str:
    """Slurm logical core indexes (gres.conf Cores=) for a topo -m CPU affinity string.

    Linux numbers the first hardware thread of every core 0..cores-1 and the sibling threads after
    them, so CPU id modulo the node's core count is the Slurm core index ('0-19,40-59' on a node with
    40 cores and 80 CPUs -> '0-19'). Returns '' when the affinity is unreadable or names CPUs the node
    does not have (a lab container sees the host's CPUs, not the simulated ones): gres.conf then
    leaves Cores= out and Slurm lets every core use the GPU.
    """
    total, vcpus = int(total_cores or 0), int(vcpus or 0)
    ids = _cpu_ids(affinity or "")
    if total <= 0 or not ids or max(ids) >= vcpus:
        return ""
    return _ranges([cpu % total for cpu in ids])


def slurm_gres_lines(gpus: list, total_cores: int = 0, vcpus: int = 0, gpu_type: str | None = None) -> list[str]:
    """gres.conf lines for one node from ansible_facts.nvidia_smi.gpus.

    One line per run of GPUs with consecutive minor numbers, the same type and the same cores:
    'Name=gpu Type=v100 File=/dev/nvidia[0-3] Cores=0-19'. File= uses the minor number (the device
    node is /dev/nvidia<minor>), falling back to the index when nvidia-smi did not print it.
    Cores= is left out when the affinity is not usable on this node (see slurm_cores); vcpus is the
    node's CPU count and bounds the CPU ids an affinity may name.
    """
    rows = []
    for gpu in sorted(gpus or [], key=lambda g: (g.get("minor_number") is None, g.get("minor_number"), g["index"])):
        minor = gpu.get("minor_number")
        minor = gpu["index"] if minor is None else minor
        kind = gpu_type or slurm_gpu_type(gpu.get("product_name"))
        cores = slurm_cores(gpu.get("cpu_affinity"), total_cores, vcpus)
        rows.append((minor, kind, cores))
    lines = []
    group: list[tuple] = []
    for row in [*rows, None]:
        if group and (row is None or row[1:] != group[-1][1:] or row[0] != group[-1][0] + 1):
            first, last = group[0][0], group[-1][0]
            devices = f"/dev/nvidia{first}" if first == last else f"/dev/nvidia[{first}-{last}]"
            line = f"Name=gpu Type={group[0][1]} File={devices}"
            if group[0][2]:
                line += f" Cores={group[0][2]}"
            lines.append(line)
            group = []
        if row is not None:
            group.append(row)
    return lines


def slurm_gres_count(gpus: list, gpu_type: str | None = None) -> str:
    """slurm.conf Gres= value for a node: 'gpu:v100:8' (types joined by ',' on mixed nodes); '' without GPUs."""
    counts: dict[str, int] = {}
    for gpu in gpus or []:
        kind = gpu_type or slurm_gpu_type(gpu.get("product_name"))
        counts[kind] = counts.get(kind, 0) + 1
    return ",".join(f"gpu:{kind}:{n}" for kind, n in counts.items())


def slurm_out_of_service(lines: list, ready_states: list) -> list:
    """The lines of `sinfo --noheader --Node --format "%N|%T|%E"` (node, state, reason) whose state is not one of
    ready_states, as they are: 'gpu02|drained|gres/gpu count reported lower than configured (0 < 8)'.

    A node listed once per partition is kept once. A line with no state field, and a state with a flag suffix
    ('idle*': not responding; sinfo(1), NODE STATE CODES), count as out of service.
    """
    ready = set(ready_states or [])
    out: list[str] = []
    for line in lines or []:
        fields = str(line).split("|", 2)
        if (len(fields) < 2 or fields[1].strip() not in ready) and line not in out:
            out.append(line)
    return out


class FilterModule:
    def filters(self):
        return {
            "slurm_gpu_type": slurm_gpu_type,
            "slurm_cores": slurm_cores,
            "slurm_gres_lines": slurm_gres_lines,
            "slurm_gres_count": slurm_gres_count,
            "slurm_out_of_service": slurm_out_of_service,
        }
