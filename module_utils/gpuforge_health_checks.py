"""The check registry's node-side checks (module_utils/gpuforge_registry.py HEALTH_CHECKS): what gpuforge-health judges
and a one-off validation has no input for - the boards of the node's first healthy run, the node's mount table, and
what a job left on the GPUs when it ended (memory still in use, processes still running).

Each judge is ``judge(sources, expected) -> gpuforge_checks.node_check`` as the registry's standalone checks are:
``sources`` maps the entry's source names to their content (the nvidia_smi facts, a file's or a command's text, or a
gpuforge_registry.Unreadable with the reason: the check fails naming it), ``expected`` holds the entry's spec keys.
Stdlib only, Python 3.8+: it runs on the node without Ansible.
"""

from __future__ import annotations

import re

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import FAIL, PASS, node_check
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_smi_xml import document_root

__all__ = [
    "REMEDY_BUS_IDS",
    "REMEDY_MEMORY",
    "REMEDY_MOUNTS",
    "REMEDY_PROCESSES",
    "judge_gpu_bus_ids",
    "judge_gpu_memory_released",
    "judge_gpu_processes_exited",
    "judge_mounts_present",
    "mount_points",
    "parse_gpu_processes",
]

REMEDY_BUS_IDS = "Check lspci -d 10de: and the kernel log for that bus; reseat or RMA the board, then power-cycle"
REMEDY_MEMORY = "nvidia-smi shows the processes; kill what the job left behind, or reset the GPU (nvidia-smi -r)"
REMEDY_PROCESSES = (
    "The job's processes outlived it: kill them (the PIDs are in the record), find why the job's cleanup missed them "
    "(Slurm: proctrack/cgroup), then resume the node"
)
REMEDY_MOUNTS = "mount -a (or the site's automounter); check the NFS/Spectrum Scale server and the client's log"


def _read(name: str, text, parser, what: str, fix: str):
    """(parsed, None) of a source's text, or (None, a failed check naming why it could not be read)."""
    from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_registry import Unreadable

    try:
        if isinstance(text, Unreadable) or text is None:
            raise ParseError(str(text or f"{what} was not read"))
        return parser(text), None
    except ParseError as exc:
        return None, node_check(name, FAIL, None, None, f"{what} unknown: {exc}", fix)


# --- parsers ---------------------------------------------------------------------------------------------------


def parse_gpu_processes(text: str) -> dict:
    """The processes of `nvidia-smi -q -x`, per GPU bus ID: {bus_id: [{pid, type, name, used_memory_mib}]}, every GPU
    listed (an empty list: none). Each <gpu> holds <processes> with one <process_info> per process: pid, type
    (C compute, G graphics, M+C both), process_name, used_memory ("9212 MiB", or "N/A" without the permission to
    read it); drivers with MIG support add gpu_instance_id and compute_instance_id (N/A outside MIG)."""
    root = document_root(text)
    found = {}
    for gpu in root.findall("gpu"):
        listed = []
        for info in gpu.findall("processes/process_info"):
            memory = (info.findtext("used_memory") or "").split()
            listed.append(
                {
                    "pid": int(info.findtext("pid")) if (info.findtext("pid") or "").strip().isdigit() else None,
                    "type": (info.findtext("type") or "").strip() or None,
                    "name": (info.findtext("process_name") or "").strip() or None,
                    "used_memory_mib": int(memory[0]) if memory and memory[0].isdigit() else None,
                }
            )
        found[gpu.get("id") or f"gpu{len(found)}"] = listed
    return found


# The kernel writes a mount point with space, tab, newline and backslash as \ooo octal escapes (\040 for a space)
# and every other byte as it is, UTF-8 included (fs/proc_namespace.c, show_mountinfo: seq_path_root with
# " \t\n\\"); only those escapes are decoded, so a UTF-8 name stays what it is.
_MOUNTINFO_ESCAPE = re.compile(r"\\([0-7]{3})")


def mount_points(mountinfo: str) -> list:
    """Mount points of /proc/self/mountinfo (field 5; octal escapes such as \\040 for a space decoded), sorted."""
    points = set()
    for line in (mountinfo or "").splitlines():
        fields = line.split()
        if len(fields) > 4:
            points.add(_MOUNTINFO_ESCAPE.sub(lambda match: chr(int(match.group(1), 8)), fields[4]))
    return sorted(points)


# --- judges ------------------------------------------------------------------------------------------------------


def _gpu_key(gpu: dict) -> str:
    """A GPU's name in a check's observed value: its bus ID as nvidia-smi prints it."""
    from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_node_health

    return gpuforge_node_health.gpu_key(gpu)


def _gpus(smi) -> tuple:
    smi = smi if isinstance(smi, dict) else {}
    gpus = [g for g in smi.get("gpus") or [] if isinstance(g, dict)]
    lost = [g for g in smi.get("unreachable_gpus") or [] if isinstance(g, dict)]
    return gpus, lost


def judge_gpu_bus_ids(sources: dict, expected: dict) -> dict:
    """Every board of expected gpu_bus_ids (the inventory's list, or the boards of the node's first healthy run)
    still listed by nvidia-smi; a board that fell off the bus counts as listed (gpu_fallen_off_bus names it)."""
    from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_node_health import bus_key

    wanted = list(expected.get("gpu_bus_ids") or [])
    gpus, lost = _gpus(sources["nvidia_smi"])
    have = {bus_key(_gpu_key(g)) for g in gpus} | {bus_key(g.get("bus_id")) for g in lost}
    gone = sorted(b for b in wanted if bus_key(b) not in have)
    return node_check(
        "gpu_bus_ids",
        FAIL if gone else PASS,
        gone,
        sorted(wanted),
        f"GPU(s) {', '.join(gone)} no longer listed by nvidia-smi",
        REMEDY_BUS_IDS,
    )


def judge_gpu_memory_released(sources: dict, expected: dict) -> dict:
    """GPU memory in use after a job (nvidia-smi FB Memory Usage/Used): more than gpu_memory_used_max_mib means a
    process of the job still holds it, or the driver did not free it."""
    max_mib = expected["gpu_memory_used_max_mib"]
    held = {}
    for gpu in _gpus(sources["nvidia_smi"])[0]:
        used = (gpu.get("memory") or {}).get("used_mib")
        if isinstance(used, (int, float)) and used > max_mib:
            held[_gpu_key(gpu)] = used
    return node_check(
        "gpu_memory_released",
        FAIL if held else PASS,
        held,
        f"<= {max_mib} MiB used per GPU",
        f"GPU memory still in use after the job on {', '.join(sorted(held))}",
        REMEDY_MEMORY,
    )


def judge_gpu_processes_exited(sources: dict, expected: dict) -> dict:
    """No process left on a GPU after a job (nvidia-smi -q -x <processes>), but those named in
    gpu_process_names_allowed (a site's resident agent, matched on the process name or its last path part)."""
    fix = "Run nvidia-smi -q -x on the node: the driver must answer (see nvidia_smi_readable)"
    found, failed = _read(
        "gpu_processes_exited", sources.get("gpu_processes"), parse_gpu_processes, "GPU processes", fix
    )
    if failed:
        return failed
    allowed = set(expected.get("gpu_process_names_allowed") or [])
    left = {}
    for bus, processes in sorted(found.items()):
        for p in processes:
            name = p.get("name") or ""
            if name in allowed or name.rsplit("/", 1)[-1] in allowed:
                continue
            left.setdefault(bus, []).append(f"{p.get('pid')} {name}".strip())
    detail = "; ".join(f"{bus}: {', '.join(pids)}" for bus, pids in left.items())
    return node_check(
        "gpu_processes_exited",
        FAIL if left else PASS,
        left,
        "no process on any GPU after the job" + (f" but {', '.join(sorted(allowed))}" if allowed else ""),
        f"process(es) left on the GPUs after the job: {detail}",
        REMEDY_PROCESSES,
    )


def judge_mounts_present(sources: dict, expected: dict) -> dict:
    """Each mount point of expected mounts is in the node's mount table (/proc/self/mountinfo)."""
    wanted = list(expected.get("mounts") or [])
    fix = "Read /proc/self/mountinfo on the node (world-readable on Linux)"
    points, failed = _read("mounts_present", sources.get("mountinfo"), mount_points, "mount table", fix)
    if failed:
        return failed
    points = set(points)
    missing = sorted(m for m in wanted if (m.rstrip("/") or "/") not in points)
    return node_check(
        "mounts_present",
        FAIL if missing else PASS,
        missing,
        sorted(wanted),
        f"not mounted: {', '.join(missing)}",
        REMEDY_MOUNTS,
    )
