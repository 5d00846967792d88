"""gpuforge-health: a fast subset of the node validation, run on the node by Slurm (HealthCheckProgram, Prolog,
Epilog), by a Kubernetes DaemonSet, or by hand.

Stdlib only; runs on the node's Python 3.8+ without Ansible. It reads the node with the readers validation uses
(gpuforge_nvidia_smi_reader, gpuforge_infiniband_reader, gpuforge_kernel's parsers) and judges with the same
function (gpuforge_node_health.judge_node) against the same expected spec, which the node_health role writes to
the node as JSON from the same inventory data. What this module adds is only what a periodic check needs and a
one-off validation does not:

- profiles: which of the checks a run reports (``full`` for the periodic check, ``prolog`` and ``epilog`` for the
  quick checks around a job);
- kernel events since the last run: a state file keeps the Xid/SXid lines already judged, so a periodic run
  judges only new ones; a failing event stays failing ("latched") until the node reboots or an operator
  acknowledges it (``--acknowledge``) after the repair the Xid catalogue asks for;
- the check registry's HEALTH_CHECKS (gpuforge_registry.py, judged in gpuforge_health_checks.py), which validation has
  no input for: ``gpu_bus_ids`` (the boards the node had when it was first healthy), ``mounts_present``, and after a
  job ``gpu_memory_released`` and ``gpu_processes_exited`` (no process left on a GPU: nvidia-smi -q -x <processes>,
  from the same nvidia-smi run as the facts);
- Kubernetes: the verdict as the node's GpuHealthy and IbHealthy conditions and a NoSchedule taint
  (gpuforge_health_k8s, ``--kubernetes-node``);
- Prometheus: the record's verdicts as metrics for node-exporter's textfile collector (``--textfile-dir``);
- the Slurm hook: drain with ``Reason="gpuforge: <check>: <detail>"`` on FAIL, resume on PASS only a node whose
  reason gpuforge wrote.

The record it writes is a ``validation/<host>.json``-shaped host file with its node_check records
(gpuforge_records.node_report: the node_check records of schemas/node-check.schema.json and the node's verdict)..
"""

from __future__ import annotations

import argparse
import datetime
import fcntl
import json
import os
import socket
import sys
import time

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import FAIL, PASS
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import OptionError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_infiniband_reader import (
    InfinibandReader,
    InfinibandReadError,
    unavailable,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_kernel import (
    ParseError,
    parse_lsmod,
    parse_sxid_events,
    parse_xid_events,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_node_health import gpu_key, judge_node
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_nvidia_smi_reader import NvidiaSmiReader
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_records import node_report
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_registry import (
    HEALTH_CHECKS,
    SOURCES,
    Unreadable,
    read_file,
    standalone,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import Tool, ToolNotRun
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_slurm import parse_show_node

__all__ = [
    "DRAIN_PREFIX",
    "PROFILES",
    "HealthConfig",
    "await_gpu_processes",
    "drain_reason",
    "judge_health",
    "new_kernel_events",
    "reason_checks",
    "slurm_update",
]

# Every Slurm drain reason gpuforge writes starts with this; a healthy run resumes only such nodes.
DRAIN_PREFIX = "gpuforge:"
# The checks each profile reports, in the order a drain reason names the first failure. Names are the check
# registry's: gpu_node_check's (gpuforge_registry.CHECK_NAMES) and gpuforge-health's own (HEALTH_CHECK_NAMES).
_GPU_QUICK = ("nvidia_smi_readable", "gpu_fallen_off_bus", "gpu_count", "gpu_bus_ids", "ecc_volatile_dbe")
_IB = ("infiniband_readable", "hcas_present", "ib_port_state", "ib_port_rate")
_KERNEL = ("kernel_log_readable", "xid", "sxid")
PROFILES = {
    # HealthCheckProgram / DaemonSet: everything the issue lists.
    "full": (
        *_GPU_QUICK,
        "ecc_enabled",
        "row_remap",
        "retired_pages",
        "throttle",
        *_KERNEL,
        *_IB,
        "lsmod_readable",
        "peermem_loaded",
        "mounts_present",
    ),
    # Before a job: no job on a board or port that is gone (no clock sampling, no kernel log).
    "prolog": _GPU_QUICK + _IB,
    # After a job: Xid/SXid during it, GPU memory given back and no process left on a GPU, no board lost.
    "epilog": (
        "nvidia_smi_readable",
        "gpu_fallen_off_bus",
        "gpu_count",
        "gpu_bus_ids",
        *_KERNEL,
        # A process left behind names the fault; the memory it holds is its consequence (caused_by).
        "gpu_processes_exited",
        "gpu_memory_released",
    ),
}
# How many kernel event lines the state file keeps (a bound on its size; the kernel ring buffer is bounded too).
SEEN_LINES_MAX = 4096
EXIT_PASS, EXIT_FAIL, EXIT_ERROR = 0, 1, 2
SCONTROL_FIX = "install the Slurm client (the slurm role does)"
# The Epilog's re-reads of a GPU process left after the job: one every second while the grace lasts
# (HealthConfig.epilog_process_grace_seconds). The driver tears a killed process's context down asynchronously, so
# nvidia-smi can list it for a moment after slurmstepd has reaped it; a process still there after the grace is one
# that escaped the job's cleanup.
EPILOG_REREAD_INTERVAL_SECONDS = 1.0


class HealthError(Exception):
    """A configuration or environment problem: no verdict (exit 2), the message names the fix."""


class HealthConfig:
    """The node's health configuration (the JSON the node_health role writes):

    {system, expected (the spec validation judges against), mounts [paths], gpu_bus_ids [bus IDs, optional],
    clock_event_samples, clock_event_interval_ms, gpu_memory_used_max_mib, gpu_process_names_allowed [process names
    that may stay on a GPU after a job], epilog_process_grace_seconds [how long the Epilog re-reads a process it found
    before it fails; 0: no re-read], root (where the check registry's file sources are read: / on a node)}."""

    KEYS = {
        "system": (str, type(None)),
        "expected": dict,
        "mounts": list,
        "gpu_bus_ids": list,
        "clock_event_samples": int,
        "clock_event_interval_ms": int,
        "gpu_memory_used_max_mib": int,
        "gpu_process_names_allowed": list,
        "epilog_process_grace_seconds": (int, float),
        "root": str,
    }

    def __init__(self, data, where: str):
        if not isinstance(data, dict):
            raise HealthError(f"{where}: a JSON object expected; re-run the node_health role")
        for key, kind in self.KEYS.items():
            if key in data and (not isinstance(data[key], kind) or isinstance(data[key], bool)):
                raise HealthError(f"{where}: {key} has the wrong type; re-run the node_health role")
        if "expected" not in data:
            raise HealthError(f"{where}: no expected spec; re-run the node_health role")
        self.system = data.get("system")
        self.expected = data["expected"]
        self.mounts = [str(m) for m in data.get("mounts") or []]
        self.gpu_bus_ids = [str(b) for b in data.get("gpu_bus_ids") or []]
        self.clock_event_samples = data.get("clock_event_samples", 10)
        self.clock_event_interval_ms = data.get("clock_event_interval_ms", 100)
        self.gpu_memory_used_max_mib = data.get("gpu_memory_used_max_mib", 16)
        self.gpu_process_names_allowed = [str(n) for n in data.get("gpu_process_names_allowed") or []]
        self.epilog_process_grace_seconds = data.get("epilog_process_grace_seconds", 5)
        if not 0 <= self.epilog_process_grace_seconds <= 60:
            raise HealthError(
                f"{where}: epilog_process_grace_seconds must be 0 to 60 (a bound on the Epilog's wait); re-run the "
                "node_health role with node_health_epilog_process_grace_seconds in that range"
            )
        self.root = data.get("root", "/")  # the registry's file sources are read under it (/ on a node)

    @classmethod
    def load(cls, path: str) -> HealthConfig:
        try:
            with open(path, encoding="utf-8") as handle:
                return cls(json.load(handle), path)
        except OSError as exc:
            raise HealthError(f"cannot read {path} ({exc.strerror}): install it with the node_health role") from exc
        except ValueError as exc:
            raise HealthError(f"{path} is not JSON ({exc}): re-run the node_health role") from exc


# --- kernel events since the last run ------------------------------------------------------------------------


def new_kernel_events(xids: list, sxids: list, state: dict, boot_id: str):
    """(Xid events to judge, SXid events to judge, the state to keep).

    state: {boot_id, seen: [event lines judged before], latched: {xid: [events], sxid: [events]}}. Events whose
    line was seen before are not new; latched events (new ones of an earlier run that failed it) are judged
    again until acknowledge() or a new boot (another boot_id: the kernel log started over)."""
    if state.get("boot_id") != boot_id:
        state = {}
    seen = list(state.get("seen") or [])
    latched = state.get("latched") or {}
    counted = {}
    for line in seen:
        counted[line] = counted.get(line, 0) + 1
    fresh = {"xid": [], "sxid": []}
    for kind, events in (("xid", xids), ("sxid", sxids)):
        for event in events:
            line = event.get("line") or ""
            if counted.get(line):
                counted[line] -= 1
                continue
            fresh[kind].append(event)
            seen.append(line)
    judged = {kind: list(latched.get(kind) or []) + fresh[kind] for kind in fresh}
    kept = {"boot_id": boot_id, "seen": seen[-SEEN_LINES_MAX:], "latched": latched, "fresh": fresh}
    return judged["xid"], judged["sxid"], kept


def latch(state: dict, checks: list, judged: bool = True) -> dict:
    """The state to write: the fresh events of a kind whose check failed join the latched ones (judged=False: the
    kernel log was not read, the latched events are kept as they are)."""
    failed = {c["name"] for c in checks if c["status"] == FAIL}
    latched = {kind: list((state.get("latched") or {}).get(kind) or []) for kind in ("xid", "sxid")}
    for kind in ("xid", "sxid") if judged else ():
        if kind in failed:
            latched[kind] += [_slim(e) for e in state["fresh"][kind]]
        else:
            latched[kind] = []  # judged again with the fresh ones and passed: nothing left to latch
    return {"boot_id": state["boot_id"], "seen": state["seen"], "latched": latched}


def _slim(event: dict) -> dict:
    keep = ("timestamp", "pci_bus", "code", "pid", "process", "message", "line", "switch", "pci", "fatal", "link")
    return {k: event.get(k) for k in keep if k in event}


# --- one run --------------------------------------------------------------------------------------------------


def judge_health(
    profile,
    config,
    facts,
    kernel_text,
    lsmod_text,
    mountinfo,
    state,
    boot_id,
    unreadable=None,
    node="node",
    checked_at=None,
    file_root=None,
    smi_xml=None,
):
    """The profile's checks of judge_node's verdict on the facts (new kernel events only) and the registry's
    HEALTH_CHECKS; in the full profile also the check registry's standalone checks whose spec keys are given, as
    gpu_node_check runs them (gpuforge_registry.standalone(): their file sources read under file_root, / on a node;
    smi_xml: the nvidia-smi -q -x document the facts came from, whose <processes> gpu_processes_exited reads),
    with their records and the node's verdict (gpuforge_records.node_report: checks, records, verdict,
    healthy, failed_checks, caused_failures, reasons) and `state`, the state file to write (`state` in: the one
    read)."""
    unreadable = dict(unreadable or {})
    names = PROFILES[profile]
    xids, sxids = [], []
    read_kernel = kernel_text is not None
    if read_kernel:
        try:
            xids, sxids = parse_xid_events(kernel_text), parse_sxid_events(kernel_text)
        except ParseError as exc:
            unreadable["kernel_log"] = str(exc)
            read_kernel = False
    if read_kernel:
        xids, sxids, kept = new_kernel_events(xids, sxids, state, boot_id)
    else:  # the events wait for the next run that reads the kernel log
        kept = {"boot_id": boot_id, "seen": list(state.get("seen") or []), "latched": state.get("latched") or {}}
        kept["fresh"] = {"xid": [], "sxid": []}
        if state.get("boot_id") != boot_id:
            kept.update(seen=[], latched={})
    lsmod = None
    if lsmod_text is not None:
        try:
            lsmod = parse_lsmod(lsmod_text)
        except ParseError as exc:
            unreadable["lsmod"] = str(exc)
    expected = dict(config.expected)
    if "peermem_loaded" not in names:
        expected["peermem"] = False  # lsmod is not read: judge_node must not judge a module table it lacks
    if "kernel_log" not in unreadable and kernel_text is None:
        unreadable["kernel_log"] = "not read in this profile"
    if "lsmod" not in unreadable and lsmod is None:
        unreadable["lsmod"] = "not read in this profile"
    verdict = judge_node(
        facts["nvidia_smi"],
        facts["infiniband"],
        lsmod,
        xids,
        expected,
        unreadable=unreadable,
        sxid_events=sxids,
        node=node,
        system=config.system,
    )
    by_name = {c["name"]: c for c in verdict["checks"]}
    smi = facts["nvidia_smi"] if isinstance(facts["nvidia_smi"], dict) else {}
    gpus = [g for g in smi.get("gpus") or [] if isinstance(g, dict)]
    lost = [g for g in smi.get("unreachable_gpus") or [] if isinstance(g, dict)]
    wanted = config.gpu_bus_ids or list(state.get("baseline_gpu_bus_ids") or [])
    # gpuforge-health's own checks: the registry's HEALTH_CHECKS, each judged when its profile reports it and its
    # input is there (bus IDs to compare, mounts asked for, GPUs listed, the -q -x document read).
    own_expected = {
        "gpu_bus_ids": wanted,
        "mounts": config.mounts,
        "gpu_memory_used_max_mib": config.gpu_memory_used_max_mib,
        "gpu_process_names_allowed": config.gpu_process_names_allowed,
    }
    own_sources = {
        "nvidia_smi": facts["nvidia_smi"],
        "mountinfo": Unreadable("/proc/self/mountinfo could not be read") if mountinfo is None else mountinfo,
        "gpu_processes": smi_xml,
    }
    has_input = {
        "gpu_bus_ids": bool(wanted) and smi.get("gpus") is not None and not smi.get("errors"),
        "mounts_present": bool(config.mounts),
        "gpu_memory_released": bool(gpus),
        "gpu_processes_exited": smi_xml is not None,
    }
    for entry in HEALTH_CHECKS:
        name = entry.names[0]
        if name in names and has_input[name]:
            by_name[name] = entry.judge({n: own_sources[n] for n in entry.needs}, own_expected)
    memory, left = by_name.get("gpu_memory_released"), by_name.get("gpu_processes_exited")
    if memory and left and memory["status"] == FAIL and left["status"] == FAIL:
        memory["caused_by"] = "gpu_processes_exited"  # the processes left behind hold that memory
    bus_ids = by_name.get("gpu_bus_ids")
    if bus_ids and bus_ids["status"] == FAIL and by_name.get("gpu_count", {}).get("status") == FAIL:
        bus_ids["caused_by"] = "gpu_count"  # the count names the fault, this check the boards
    if profile == "full" and file_root is not None:
        for check in standalone():
            if any(key in expected for key in check.expected) and all(
                SOURCES[n].kind == "file" or n == "nvidia_smi" for n in check.needs
            ):  # as gpu_node_check hands them: files read under the root, the nvidia_smi facts as gathered
                sources = {
                    n: facts["nvidia_smi"] if n == "nvidia_smi" else read_file(file_root, SOURCES[n].read)
                    for n in check.needs
                }
                judged = check.judge(sources, expected)
                by_name[judged["name"]] = judged
                names = (*names, judged["name"])
    checks = [by_name[name] for name in names if name in by_name]
    result = {"checks": checks, **node_report(checks, node, config.system, checked_at)}
    result["state"] = latch(kept, checks, judged=read_kernel)
    baseline = state.get("baseline_gpu_bus_ids")
    if not baseline and result["healthy"] and gpus and not lost:
        baseline = sorted(gpu_key(g) for g in gpus)
    result["state"]["baseline_gpu_bus_ids"] = baseline or []
    return result


def _processes_left(result: dict) -> bool:
    """Whether gpu_processes_exited failed on processes it saw (not on an unreadable process list)."""
    return any(
        c["name"] == "gpu_processes_exited" and c["status"] == FAIL and c.get("observed") for c in result["checks"]
    )


def await_gpu_processes(
    result: dict,
    judge_again,
    grace_seconds: float,
    sleep=time.sleep,
    interval_seconds: float = EPILOG_REREAD_INTERVAL_SECONDS,
):
    """(result, re-reads): while the Epilog's result fails gpu_processes_exited on a process it saw and the grace
    lasts, wait interval_seconds and judge again (judge_again(): gather and judge_health once more, through the same
    runner). At most ceil(grace / interval) re-reads: a bounded wait, and none at all on a node with no process
    left, so the Epilog of a healthy node costs nothing more."""
    waited, rereads = 0.0, 0
    while _processes_left(result) and waited < grace_seconds:
        step = min(interval_seconds, grace_seconds - waited)
        sleep(step)
        waited += step
        rereads += 1
        result = judge_again()
    return result, rereads


def drain_reason(result: dict, limit: int = 200) -> str:
    """'gpuforge: <first failed check>: <its fault>' (+ the other failed checks' names), at most `limit` chars."""
    failed = [c for c in result["checks"] if c["status"] == FAIL and not c.get("caused_by")]
    failed = failed or [c for c in result["checks"] if c["status"] == FAIL]
    if not failed:
        return ""
    first = failed[0]
    more = f" (+{', '.join(c['name'] for c in failed[1:])})" if failed[1:] else ""
    head = f"{DRAIN_PREFIX} {first['name']}: "
    detail = " ".join(str(first.get("fault") or "failed").split())
    room = max(limit - len(head) - len(more), 20)
    if len(detail) > room:
        detail = detail[: room - 3] + "..."
    return f"{head}{detail}{more}"


def reason_checks(reason: str) -> list:
    """The checks a drain_reason() names: the first after the prefix, and those of a trailing '(+a, b)'."""
    head = reason[len(DRAIN_PREFIX) :].strip() if reason.startswith(DRAIN_PREFIX) else ""
    names = [head.split(":", 1)[0].strip()] if head else []
    if head.endswith(")") and " (+" in head:
        names += [n.strip() for n in head[head.rindex(" (+") + 3 : -1].split(",")]
    return [n for n in names if n]


def _run(runner, argv: list):
    """(rc, out, err) of a Slurm command (gpuforge_run.Tool); one that cannot be started is a HealthError."""
    try:
        return Tool(runner, argv[0], SCONTROL_FIX, on_error="raise").run(argv[1:])
    except ToolNotRun as exc:
        raise HealthError(str(exc)) from exc


def slurm_update(runner, node: str, result: dict, resume: bool = True) -> str:
    """Drain this node with drain_reason() when the run failed; when it passed and `resume` (a run of every check:
    the full profile, not the Prolog's or Epilog's subset, which did not judge what the node was drained for), resume
    it only when it is drained with a reason gpuforge wrote (an operator's drain stays) and this run judged every
    check the reason names: an Epilog's drain for GPU processes or memory a job left behind, which the periodic check
    cannot judge while jobs run, stays until an operator resumes the node. Returns what it did."""
    scontrol = runner.get_bin_path("scontrol")
    if not scontrol:
        raise HealthError(f"scontrol not found on {node}: {SCONTROL_FIX}")
    rc, out, err = _run(runner, [scontrol, "show", "node", "-o", node])
    if rc != 0:
        raise HealthError(f"scontrol show node -o {node} failed (exit {rc}): {(err or out).strip()[:200]}")
    try:
        nodes = [n for n in parse_show_node(out) if n["name"] == node]
    except ParseError as exc:
        raise HealthError(f"could not read scontrol show node -o {node}: {exc}") from exc
    if not nodes:
        raise HealthError(f"scontrol show node lists no node named {node}: set --node to its Slurm NodeName")
    state = nodes[0]["state"]
    reason = nodes[0]["reason"] or ""
    ours = reason.startswith(DRAIN_PREFIX)
    if not result["healthy"]:
        wanted = drain_reason(result)
        if state["drain"]:
            return f"already drained ({reason})"  # the first reason stays: an operator's is never overwritten
        argv = [scontrol, "update", f"nodename={node}", "state=drain", f"reason={wanted}"]
        done = f"drained: {wanted}"
    elif state["drain"] and ours and resume:
        unjudged = sorted(set(reason_checks(reason)) - {c["name"] for c in result["checks"] if c["status"] != FAIL})
        if unjudged:  # drained for a job-end check (an Epilog's): only that check, or an operator, clears it
            return (
                f"left drained ({reason}): this run does not judge {', '.join(unjudged)}; resume it by hand once fixed"
            )
        argv = [scontrol, "update", f"nodename={node}", "state=resume"]
        done = f"resumed (was drained: {reason})"
    else:
        return "nothing to do"
    rc, out, err = _run(runner, argv)
    if rc != 0:
        raise HealthError(f"{' '.join(argv[1:])} failed (exit {rc}): {(err or out).strip()[:200]}")
    return done


# --- Prometheus ---------------------------------------------------------------------------------------------


def _label(value) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def metrics(record: dict, timestamp_seconds: float) -> str:
    """The record as Prometheus text exposition format (node-exporter's textfile collector): per check, failed and
    warning as 0/1; the node's verdict; when the run ended and how long it took. Labels: profile, check."""
    profile = _label(record["profile"])
    lines = [
        "# HELP gpuforge_health_check_failed 1 when the check failed in the last gpuforge-health run of the profile.",
        "# TYPE gpuforge_health_check_failed gauge",
    ]
    lines += [
        f'gpuforge_health_check_failed{{profile="{profile}",check="{_label(c["name"])}"}} {int(c["status"] == FAIL)}'
        for c in record["checks"]
    ]
    lines += [
        "# HELP gpuforge_health_check_warning 1 when the check warned in the last gpuforge-health run of the profile.",
        "# TYPE gpuforge_health_check_warning gauge",
    ]
    lines += [
        f'gpuforge_health_check_warning{{profile="{profile}",check="{_label(c["name"])}"}} '
        f"{int(c['status'] not in (PASS, FAIL))}"
        for c in record["checks"]
    ]
    lines += [
        "# HELP gpuforge_health_node_healthy 1 when the last gpuforge-health run of the profile did not fail the node.",
        "# TYPE gpuforge_health_node_healthy gauge",
        f'gpuforge_health_node_healthy{{profile="{profile}"}} {int(bool(record["healthy"]))}',
        "# HELP gpuforge_health_last_run_timestamp_seconds When the last gpuforge-health run of the profile ended.",
        "# TYPE gpuforge_health_last_run_timestamp_seconds gauge",
        f'gpuforge_health_last_run_timestamp_seconds{{profile="{profile}"}} {timestamp_seconds:.3f}',
        "# HELP gpuforge_health_run_duration_seconds How long the last gpuforge-health run of the profile took.",
        "# TYPE gpuforge_health_run_duration_seconds gauge",
        f'gpuforge_health_run_duration_seconds{{profile="{profile}"}} {record["seconds"]}',
    ]
    return "\n".join(lines) + "\n"


def _write_text(path: str, text: str) -> None:
    tmp = f"{path}.tmp{os.getpid()}"  # renamed over the file: node-exporter never reads half of one
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


# --- the command ----------------------------------------------------------------------------------------------


def _read_text(runner, command: list, unreadable: dict, source: str):
    path = runner.get_bin_path(command[0])
    if not path:
        unreadable[source] = f"{command[0]} not found on {socket.gethostname()}"
        return None
    try:
        rc, out, err = Tool(runner, path, f"install {command[0]}", on_error="raise").run(command[1:])
    except ToolNotRun as exc:
        unreadable[source] = str(exc)
        return None
    if rc != 0:
        unreadable[source] = f"{' '.join(command)} exited with code {rc}: {(err or out).strip()[:200]}"
        return None
    return out


def _query_xml(runner):
    """The nvidia-smi -q -x document of this run's gather (one nvidia-smi run for the facts and the processes), or
    None when it did not exit 0 (a GPU off the bus: the facts come from one run per GPU, the processes are not read)."""
    rc, out = (getattr(runner, "outputs", None) or {}).get(("-q", "-x"), (None, None))
    return out if rc == 0 else None


def _read_file(path: str):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def gather(runner, profile: str, config: HealthConfig) -> dict:
    """The nvidia_smi and infiniband facts, read as gpu_node_check's gather reads them (fewer views: no topology
    or NVLink; clock events sampled only in the full profile)."""
    samples = config.clock_event_samples if profile == "full" else 0
    smi = NvidiaSmiReader(
        runner,
        {
            "executable": "nvidia-smi",
            "topology": False,
            "nvlink": False,
            "clock_event_samples": samples,
            "clock_event_interval_ms": config.clock_event_interval_ms,
        },
    ).gather()
    infiniband = None
    if config.expected.get("hcas") and any(name in PROFILES[profile] for name in _IB):
        try:
            infiniband = InfinibandReader(runner, {"fail_on_missing": False, "devinfo": False}).facts()
        except InfinibandReadError as exc:
            infiniband = unavailable(str(exc))
    return {"nvidia_smi": smi, "infiniband": infiniband}


class _Locked:
    """An exclusive lock beside the state file: a Prolog and the periodic check may run at the same time."""

    def __init__(self, path: str):
        self.path = path + ".lock"
        self.handle = None

    def __enter__(self):
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        self.handle = open(self.path, "a")
        fcntl.flock(self.handle, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()


def _load_state(path: str) -> dict:
    text = _read_file(path)
    if not text:
        return {}
    try:
        state = json.loads(text)
    except ValueError:
        return {}  # a torn state file: start over (events are judged again, which fails safe)
    return state if isinstance(state, dict) else {}


def _write_json(path: str, data) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)
        handle.write("\n")
    os.replace(tmp, path)


def boot_id() -> str:
    return (_read_file("/proc/sys/kernel/random/boot_id") or "unknown").strip()


def _arguments(argv):
    parser = argparse.ArgumentParser(
        prog="gpuforge-health",
        description="Judge this node with a fast subset of gpuforge's validation checks; one line per failed "
        "check, a JSON record, exit 0 on PASS (warnings allowed), 1 on FAIL, 2 when it cannot judge.",
    )
    parser.add_argument("--profile", choices=sorted(PROFILES), default="full")
    parser.add_argument("--config", default="/etc/gpuforge/health.json")
    parser.add_argument("--state", default="/var/lib/gpuforge/health/state.json")
    parser.add_argument(
        "--record",
        default="/var/lib/gpuforge/health/last.json",
        help="where the record goes; the profile's own copy is <record without .json>-<profile>.json",
    )
    parser.add_argument(
        "--node",
        default=None,
        help="the node's name in records and Slurm (default: short hostname, or SLURMD_NODENAME)",
    )
    parser.add_argument("--slurm", action="store_true", help="drain this node on FAIL, resume a gpuforge drain on PASS")
    parser.add_argument(
        "--kubernetes-node",
        default=None,
        help="also set this Kubernetes node's GpuHealthy and IbHealthy conditions (in a pod: its service account)",
    )
    parser.add_argument("--kubernetes-taint", action="store_true", help="and a NoSchedule taint while it fails")
    parser.add_argument(
        "--textfile-dir",
        default=None,
        help="also write the verdicts as gpuforge_health_<profile>.prom there (node-exporter's textfile collector)",
    )
    parser.add_argument(
        "--acknowledge",
        action="store_true",
        help="forget the latched Xid/SXid events (after the GPU reset or reboot they asked for)",
    )
    return parser.parse_args(argv)


def run(argv, runner, out=sys.stdout, err=sys.stderr, now=None, sleep=time.sleep) -> int:
    """The command: `argv` its arguments, `runner` what starts the programs it reads (on the node, the launcher's
    LocalRunner: roles/node_health/files/gpuforge_health_local.py, which module_utils cannot hold)."""
    args = _arguments(argv)
    node = args.node or os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    started = time.monotonic()
    try:
        config = HealthConfig.load(args.config)
        with _Locked(args.state):
            state = _load_state(args.state)
            if args.acknowledge:
                state["latched"] = {}
                _write_json(args.state, state)
            facts = gather(runner, args.profile, config)
            unreadable: dict = {}
            names = PROFILES[args.profile]
            kernel = _read_text(runner, ["dmesg"], unreadable, "kernel_log") if "xid" in names else None
            lsmod = _read_text(runner, ["lsmod"], unreadable, "lsmod") if "peermem_loaded" in names else None
            mountinfo = _read_file("/proc/self/mountinfo") if "mounts_present" in names else None
            checked_at = (now or datetime.datetime.now(datetime.timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
            booted = boot_id()

            def judge(facts):
                try:
                    return judge_health(
                        args.profile,
                        config,
                        facts,
                        kernel,
                        lsmod,
                        mountinfo,
                        state,
                        booted,
                        unreadable,
                        node=node,
                        checked_at=checked_at,
                        file_root=config.root,
                        smi_xml=_query_xml(runner),
                    )
                except OptionError as exc:
                    raise HealthError(
                        f"{args.config}: {exc}; fix the inventory and re-run the node_health role"
                    ) from exc

            result = judge(facts)
            if args.profile == "epilog":  # the kernel log and the state as read: only nvidia-smi is read again
                result, rereads = await_gpu_processes(
                    result,
                    lambda: judge(gather(runner, args.profile, config)),
                    config.epilog_process_grace_seconds,
                    sleep,
                )
                if rereads:
                    err.write(f"gpuforge-health: read the GPU processes again {rereads} time(s) after the job\n")
            _write_json(args.state, result.pop("state"))
        run_id = f"gpuforge-health-{args.profile}"
        record = {
            "host": node,
            "system": config.system,
            "checked_at": checked_at,
            "profile": args.profile,
            "seconds": round(time.monotonic() - started, 3),
            **result,
            "records": [dict(r, run_id=run_id) for r in result["records"]],
        }
        base = args.record[:-5] if args.record.endswith(".json") else args.record
        _write_json(f"{base}-{args.profile}.json", record)
        if args.profile == "full":
            _write_json(args.record, record)
        if args.textfile_dir:
            path = os.path.join(args.textfile_dir, f"gpuforge_health_{args.profile}.prom")
            _write_text(path, metrics(record, time.time()))
        for check in result["checks"]:
            if check["status"] == FAIL:
                cause = f" (caused by {check['caused_by']})" if check.get("caused_by") else ""
                out.write(f"FAIL {node} {check['name']}: {' '.join(str(check['fault']).split())}{cause}\n")
        if args.kubernetes_node:
            from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_health_k8s as k8s

            try:
                done = k8s.NodeApi.in_cluster().update(args.kubernetes_node, record, checked_at, args.kubernetes_taint)
            except (k8s.ApiError, OSError) as exc:
                raise HealthError(f"could not update Kubernetes node {args.kubernetes_node}: {exc}") from exc
            err.write(f"gpuforge-health: Kubernetes node {args.kubernetes_node}: {', '.join(done)}\n")
        if args.slurm:
            done = slurm_update(runner, node, result, resume=args.profile == "full")
            err.write(f"gpuforge-health: {done}\n")
    except HealthError as exc:
        err.write(f"gpuforge-health on {node}: {exc}\n")
        return EXIT_ERROR
    except OSError as exc:
        err.write(
            f"gpuforge-health on {node}: cannot write {exc.filename} ({exc.strerror}): check the path and that it "
            "runs as root\n"
        )
        return EXIT_ERROR
    return EXIT_PASS if result["healthy"] else EXIT_FAIL
