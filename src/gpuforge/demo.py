"""`gpuforge demo`: lab up -> lab services -> provision -> validate (report only) -> benchmark -> alerts -> k8s
render -> report.

Every stage runs even when an earlier optional one failed, and is reported. The summary keeps apart what the
toolkit did and what it found: a stage whose playbook failed only on a verdict - the benchmark's assert over runs
without a result, each on a node whose fault was found - is ``faults``, not ``failed``; the cluster's faults are one
verdict line, with the faults the lab injected on purpose (the spec's, and the link the benchmark degrades in a lab
of 3 GPU nodes or more) said found or not. The demo exits non-zero when the toolkit failed (an Ansible error, an
unreachable host, a stage that raised) or missed an injected fault; found faults alone exit 0. Re-running reuses the
lab (cluster.up is idempotent).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from gpuforge import paths, report
from gpuforge.runner import RunRequest, new_run_id, run_playbook, stage_entry, write_summary

DEMO_SPEC = paths.LAB_DIR / "specs" / "demo.yml"
# Validation must not stop the demo on the faulty node: record failures, do not fail the play.
REPORT_ONLY_VARS = ["gpuforge_validate_report_only=true"]
# A healthy node whose link the benchmark degrades (tc) during the ib_write_bw pairs: the attribution
# must name it, apart from the hardware faults validation finds on gpu03. Only in a lab of 3 GPU nodes or more
# (degraded_node): the attribution tells a slow node from a slow partner by the pairs without it, and with two GPU
# nodes every pair has both, so a degraded link could not be placed at either end.
DEGRADED_NODE = "gpu02"
MIN_GPU_NODES_TO_ATTRIBUTE = 3
# Written by playbooks/runbooks/alerts.yml into the alerts stage's run directory (its gpuforge_artifacts_dir):
# Prometheus's /api/v1/alerts document (role gpu_monitoring).
ALERTS_STAGE = "alerts"
ALERTS_FILE = Path(ALERTS_STAGE) / "monitoring" / "alerts.json"  # relative to the demo's run directory
# Stages without which the later ones have nothing to run on (the demo says so and goes on collecting).
REQUIRED_STAGES = ("lab", "lab-services", "provision")
# The asserts whose failure is the toolkit's verdict on the cluster, not a failure of the toolkit: validate.yml's
# over the node verdicts (when not report-only) and roles/gpuforge_bench's over runs that produced no result.
UNHEALTHY_TASK = "Fail when a node is unhealthy"
NO_RESULT_TASK = "Fail when a benchmark run produced no result"
# The checks that find each lab fault type beyond the registry's own entries (lab/profiles/SCHEMA.md, "Which
# check fails for each fault"): the diagnostics' and the other modules' faults.
OTHER_FAULT_CHECKS = {
    "thermal_slowdown": ("throttle",),
    "row_remap_failure": ("row_remap",),
    "remapped_rows": ("row_remap",),
    "gdr_slow": ("gdr_ib_write_bw",),
    "gdr_unavailable": ("gdr_ib_write_bw",),
    "dcgm_diag_failure": ("dcgm_diag",),
    "host_bandwidth_degraded": ("nvbandwidth",),
    "sm_missing": ("subnet_manager",),
    "sm_duplicate_master": ("subnet_manager",),
}


@dataclass
class Stage:
    name: str
    status: str  # ok | faults (ran; failed only on the cluster's verdict) | failed (the toolkit failed) | skipped
    rc: int
    detail: str = ""
    summary: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Injected:
    """A fault the demo put there on purpose: on `node`, `what` (as the spec names it), found by a FAIL of one of
    `checks` on that node, or (checks empty) by the benchmark attribution naming the node slow."""

    node: str
    what: str
    checks: tuple = ()


def fault_checks() -> dict:
    """Lab fault type -> the checks that fail for it: the check registry's entries, then OTHER_FAULT_CHECKS."""
    from gpuforge.paths import collection_import

    registry = collection_import("plugins.module_utils.gpuforge_registry")
    found = {check.lab_fault[0]: tuple(check.names) for check in registry.CHECKS if check.lab_fault}
    return {**found, **OTHER_FAULT_CHECKS}


def degraded_node(spec_path: Path) -> str | None:
    """DEGRADED_NODE where the spec has it among at least MIN_GPU_NODES_TO_ATTRIBUTE GPU nodes, else None."""
    from gpuforge.lab import spec
    from gpuforge.lab.profiles import load_profile

    gpu_nodes = [
        node.name for node in spec.from_file(spec_path).nodes if spec.machine_kind(load_profile(node.profile)) == "gpu"
    ]
    return DEGRADED_NODE if DEGRADED_NODE in gpu_nodes and len(gpu_nodes) >= MIN_GPU_NODES_TO_ATTRIBUTE else None


def injected_faults(spec_path: Path, degraded: str | None = None) -> list[Injected]:
    """The spec's faults per node, and the link the benchmark degrades on ``degraded`` (degraded_node's answer)."""
    from gpuforge.lab import spec

    checks = fault_checks()
    injected = []
    for node in spec.from_file(spec_path).nodes:
        for fault in node.faults:
            kind = str(fault.get("type"))
            where = ", ".join(f"{key} {value}" for key, value in fault.items() if key not in ("type", "message"))
            injected.append(Injected(node.name, f"{kind} ({where})" if where else kind, checks.get(kind, ())))
    if degraded:
        injected.append(Injected(degraded, "link degraded during ib_write_bw (tc netem)"))
    return injected


def _lab_stage(spec_path: Path) -> Stage:
    from gpuforge.lab import cluster, spec

    started = time.monotonic()
    nodes = cluster.up(spec.from_file(spec_path))
    return Stage("lab", "ok", 0, f"{len(nodes)} nodes up in {time.monotonic() - started:.0f}s")


def _playbook_stage(name: str, request: RunRequest, run_dir: Path, view_factory: Callable) -> Stage:
    summary = run_playbook(request, run_dir / name, view_factory(f"{name}: {request.playbook}"))
    status = "ok" if summary["rc"] == 0 else "failed"
    detail = summary["status"]
    if summary["failed_tasks"]:
        first = summary["failed_tasks"][0]
        detail += f"; first failure: {first['host']} / {first['task']}: {first['msg'][:120]}"
    return Stage(name, status, summary["rc"], detail, summary)


def _k8s_stage(inventory: Path) -> Stage:
    from gpuforge import k8s

    # Where `gpuforge k8s render` writes too: the lab has no API server, so these files are the result.
    out_dir = paths.ARTIFACTS_DIR / "k8s"
    try:
        written = k8s.render(inventory, out_dir)
    except Exception as exc:  # a renderer failure is reported, it does not stop the demo
        return Stage("k8s", "failed", 1, str(exc))
    return Stage("k8s", "ok", 0, f"{len(written)} manifests in {out_dir}")


def run(options, view_factory: Callable, log: Callable[[str], None] = print) -> int:
    run_dir = paths.ARTIFACTS_DIR / new_run_id()
    run_dir.mkdir(parents=True, exist_ok=True)
    stages: list[Stage] = []
    started = time.time()

    def base(command: str, playbook: str, extra: list[str] | None = None) -> RunRequest:
        return RunRequest(
            command=command,
            playbook=playbook,
            inventory=Path(options.inventory),
            limit=options.limit,
            tags=options.tags,
            extra_vars=[*(options.extra_vars or []), *(extra or [])],
            check=options.check,
            diff=options.diff,
        )

    log(f"demo: artifacts in {run_dir}")
    try:
        degraded = degraded_node(Path(options.spec))
        injected = injected_faults(Path(options.spec), degraded)  # what the summary must report found
        if degraded is None:
            log(
                f"demo: no link degraded during ib_write_bw: the lab has fewer than {MIN_GPU_NODES_TO_ATTRIBUTE} GPU "
                f"nodes (or no {DEGRADED_NODE}), so a slow link could not be placed at one end"
            )
        stages.append(_lab_stage(Path(options.spec)))
    except Exception as exc:  # podman/mirror errors, a bad spec: nothing else can run
        stages.append(Stage("lab", "failed", 1, str(exc)))
        return _finish(run_dir, stages, started, log)
    # The site's existing infrastructure (the Storage Scale cluster GPU nodes join), stood in for by the lab.
    lab_services = base("lab-services", "services.yml")
    lab_services.playbooks_dir = paths.LAB_DIR / "playbooks"
    stages.append(_playbook_stage("lab-services", lab_services, run_dir, view_factory))
    stages.append(_playbook_stage("provision", base("provision", "site.yml"), run_dir, view_factory))
    if stages[-1].status == "failed":
        log(f"demo: provisioning failed ({stages[-1].detail}); continuing to collect what can be collected")
    stages.append(
        _playbook_stage("validate", base("validate", "validate.yml", REPORT_ONLY_VARS), run_dir, view_factory)
    )
    # lab/playbooks/benchmark.yml: playbooks/benchmark.yml with the lab's link degradation of DEGRADED_NODE hooked in.
    bench = base("bench", "benchmark.yml", [f"gpuforge_bench_netem_node={degraded}"] if degraded else [])
    bench.playbooks_dir = paths.LAB_DIR / "playbooks"
    stages.append(_playbook_stage("benchmark", bench, run_dir, view_factory))
    # Last of the node stages: by now the monitoring installed by site.yml has scraped the faulty node for minutes.
    stages.append(_playbook_stage(ALERTS_STAGE, base("runbook alerts", "runbooks/alerts.yml"), run_dir, view_factory))
    stages.append(_k8s_stage(Path(options.inventory)))
    return _finish(run_dir, stages, started, log, injected)


def _finish(run_dir: Path, stages: list[Stage], started: float, log, injected=None) -> int:
    _write_run_summary(run_dir, stages, started)
    try:
        # The records so far (validation, benchmark), to tell a stage that failed on found faults from one the
        # toolkit failed; the summary is written again with what that says.
        stages = judge_stages(stages, report.load(run_dir))
        summary = _write_run_summary(run_dir, stages, started)
        files = report.build(run_dir)
    except ValueError as exc:  # gpuforge_records.RecordError: a result file the records do not read
        log(f"demo: no report: {exc} (the stages' results are in {run_dir})")
        return 1
    summary["artifacts"].update(report_html=str(files.html), report_md=str(files.markdown))
    verdict = cluster_verdict(files.data, injected or [])
    summary["rc"] = demo_rc(stages, verdict)
    summary["status"] = "failed" if summary["rc"] else "successful"
    write_summary(run_dir, summary)
    for line in summary_lines(
        stages, files.data, files.html, bench_attribution(run_dir), firing_alerts(run_dir / ALERTS_FILE), verdict
    ):
        log(line)
    return summary["rc"]


def _write_run_summary(run_dir: Path, stages: list[Stage], started: float) -> dict:
    """The demo's summary.json: rc 1 while a stage failed as the toolkit's failure (demo_rc decides at the end)."""
    failed = any(stage.status == "failed" for stage in stages)
    finished = time.time()
    summary = {
        "schema_version": 1,
        "run_id": run_dir.name,
        "command": "demo",
        "playbook": None,
        "rc": 1 if failed else 0,
        "status": "failed" if failed else "successful",
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(finished)),
        "duration_s": round(finished - started, 3),
        "hosts": {},
        "failed_tasks": [task for stage in stages for task in stage.summary.get("failed_tasks", [])],
        "stages": [stage_entry(run_dir.name, s.name, s.status, s.rc, s.detail) for s in stages],
        "artifacts": {"run_dir": str(run_dir)},
    }
    write_summary(run_dir, summary)
    return summary


def found_faults(data) -> dict[str, list[str]]:
    """Node -> the faults found on it: its failed checks that are root causes (validation), then what the benchmark
    attribution names slow on a node with no failed check (a link or node validation cannot see)."""
    found: dict[str, list[str]] = {}
    failed = [check for check in data.checks or [] if check.status == "FAIL"]
    names = {(check.host, check.name) for check in failed}
    for check in failed:
        if not any((check.host, cause) in names for cause in check.caused_by):
            found.setdefault(check.host, []).append(check.name)
    faulty = set(found)
    for record in data.attributions:
        if record["verdict"] == "FAIL" and not faulty & set(record["nodes"]):
            for node in record["nodes"]:
                found.setdefault(node, []).append(f"{record['benchmark']} slow {record['subject']} {record['name']}")
    return found


def _failed_by(data) -> dict[str, set[str]]:
    """Node -> the names of its failed checks (root causes and consequences alike)."""
    failed: dict[str, set[str]] = {}
    for check in data.checks or []:
        if check.status == "FAIL":
            failed.setdefault(check.host, set()).add(check.name)
    return failed


def _names(message: str, name: str) -> bool:
    """Whether message names the run `name` whole (p2p-gpu1 is not named by p2p-gpu10)."""
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", message) is not None


def _verdict_failure(task: dict, data, found: dict) -> str | None:
    """Why a failed task is the cluster's verdict (a one-line account), or None when the toolkit failed."""
    if task.get("status") != "failed":
        return None  # unreachable
    if task.get("task") == UNHEALTHY_TASK:
        return f"unhealthy nodes: {', '.join(sorted(found))}" if found else None  # none found: not a verdict
    if task.get("task") != NO_RESULT_TASK:
        return None
    message = str(task.get("msg", ""))
    runs = [run for run in data.runs if run["verdict"] == "FAIL" and _names(message, run["name"])]
    if not runs:
        return None
    explained = []
    for run in runs:
        faulty = [node for node in run["nodes"] if node in found]
        if not faulty:
            return None  # a run without a result on healthy nodes: the toolkit's (or the lab's) failure
        explained.append(f"{run['name']} ({', '.join(faulty)})")
    return "runs without a result on nodes with faults found: " + ", ".join(explained)


def judge_stages(stages: list[Stage], data) -> list[Stage]:
    """The stages, a failed playbook stage made ``faults`` where every failed task is a verdict on faults found
    (_verdict_failure) and no host was unreachable; any other failure stays ``failed`` - the toolkit's."""
    found = found_faults(data)
    judged = []
    for stage in stages:
        tasks = stage.summary.get("failed_tasks") or []
        hosts = stage.summary.get("hosts") or {}
        unreachable = any((counts or {}).get("unreachable") for counts in hosts.values())
        if stage.status != "failed" or not tasks or unreachable:
            judged.append(stage)
            continue
        accounts = [_verdict_failure(task, data, found) for task in tasks]
        if any(account is None for account in accounts):
            judged.append(stage)
            continue
        judged.append(replace(stage, status="faults", detail="; ".join(dict.fromkeys(accounts))))
    return judged


@dataclass
class ClusterVerdict:
    verdict: str  # FAIL when a fault was found, else PASS
    found: dict  # node -> faults found (found_faults)
    injected_found: list
    injected_missed: list

    @property
    def count(self) -> int:
        return sum(len(faults) for faults in self.found.values())


def cluster_verdict(data, injected: list[Injected]) -> ClusterVerdict:
    """The faults found, and which injected faults they found: a spec fault by a FAIL of its check on its node
    (a fault type without a known check: any failed check there), the degraded link by the attribution."""
    found = found_faults(data)
    failed = _failed_by(data)
    slow_nodes = {
        node
        for record in data.attributions
        if record["verdict"] == "FAIL" and record["subject"] == "node"
        for node in record["nodes"]
    }
    hits, misses = [], []
    for fault in injected:
        if fault.checks:
            hit = bool(failed.get(fault.node, set()) & set(fault.checks))
        elif fault.what.startswith("link degraded"):
            hit = fault.node in slow_nodes
        else:
            hit = bool(failed.get(fault.node))
        (hits if hit else misses).append(fault)
    return ClusterVerdict("FAIL" if found else "PASS", found, hits, misses)


def demo_rc(stages: list[Stage], verdict: ClusterVerdict) -> int:
    """1 when the toolkit failed (a stage ``failed``) or missed an injected fault; found faults alone are 0."""
    return 1 if any(stage.status == "failed" for stage in stages) or verdict.injected_missed else 0


def verdict_lines(stages: list[Stage], verdict: ClusterVerdict) -> list[str]:
    """The cluster's verdict (found faults, the injected ones found or missed), then the toolkit's own outcome."""
    injected = len(verdict.injected_found) + len(verdict.injected_missed)
    if verdict.verdict == "PASS":
        line = "cluster verdict: PASS, no fault found"
    else:
        line = f"cluster verdict: FAIL, {verdict.count} fault{'s' if verdict.count != 1 else ''} found"
    if injected:
        state = "all found" if not verdict.injected_missed else f"{len(verdict.injected_missed)} not found"
        line += f" ({injected} injected, {state})"
    lines = [line]
    lines += [f"  {node}: {', '.join(faults)}" for node, faults in sorted(verdict.found.items())]
    lines += [f"  injected, not found: {fault.node}: {fault.what}" for fault in verdict.injected_missed]
    failed = [stage for stage in stages if stage.status == "failed"]
    if failed:
        lines.append(f"toolkit: FAILED in {', '.join(stage.name for stage in failed)} (see the stages above)")
    else:
        lines.append(
            "toolkit: every stage ran"
            + (" (failures were the cluster's faults)" if any(stage.status == "faults" for stage in stages) else "")
        )
    return lines


def bench_attribution(run_dir: Path) -> dict[str, str]:
    """benchmark -> the attribution's one-line summary, from the benchmark stage's summary.json."""
    for path in sorted(run_dir.glob("benchmark/bench/*/summary.json")):
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        return {
            name: str(part.get("summary", ""))
            for name, part in document.items()
            if isinstance(part, dict) and part.get("results")
        }
    return {}


def firing_alerts(path: Path) -> dict[str, list[str]] | None:
    """Node (the alert's instance label) -> names of its firing alerts, from a Prometheus /api/v1/alerts
    document; None when there is no readable document (the alerts stage did not run or failed)."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        alerts = document["data"]["alerts"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    firing: dict[str, set[str]] = {}
    for alert in alerts if isinstance(alerts, list) else []:
        if not isinstance(alert, dict):
            continue
        labels = alert.get("labels") if isinstance(alert.get("labels"), dict) else {}
        if alert.get("state") == "firing" and labels.get("alertname"):
            firing.setdefault(str(labels.get("instance", "-")), set()).add(str(labels["alertname"]))
    return {node: sorted(names) for node, names in sorted(firing.items())}


def summary_lines(
    stages: list[Stage],
    data,
    html_path: Path,
    attribution: dict[str, str] | None = None,
    alerts: dict[str, list[str]] | None = None,
    verdict: ClusterVerdict | None = None,
) -> list[str]:
    lines = ["", "== gpuforge demo summary"]
    lines += [f"stage {stage.name:<10} {stage.status:<8} {stage.detail}" for stage in stages]
    if verdict is not None:
        lines += verdict_lines(stages, verdict)
    if data.checks is None:
        lines.append("nodes: validation not run")
    else:
        verdicts = data.verdicts  # gpuforge_records.node_verdicts
        healthy = sorted(host for host, entry in verdicts.items() if entry["healthy"])
        lines.append(f"nodes healthy: {len(healthy)}/{len(verdicts)} ({', '.join(healthy) or 'none'})")
        failed = [check for check in data.checks if check.status == "FAIL"]
        failed_names = {(check.host, check.name) for check in failed}
        # Root causes first, each with the checks that failed only because of it indented under it.
        for check in failed:
            if any((check.host, cause) in failed_names for cause in check.caused_by):
                continue
            observed = json.dumps(check.observed) if isinstance(check.observed, dict | list) else check.observed
            lines.append(f"  fault: {check.host}: {check.name}: {observed} ({check.fault or check.remedy})")
            for consequence in failed:
                if consequence.host == check.host and check.name in consequence.caused_by:
                    lines.append(f"    caused by it: {consequence.name}: {consequence.fault or consequence.remedy}")
    for series in data.nccl or []:
        peak = max((busbw for _, busbw in series.points), default=0)
        lines.append(f"NCCL {series.label}: peak bus bandwidth {peak:g} GB/s over {len(series.points)} sizes")
    if not data.nccl:
        lines.append("NCCL: not run")
    for point in data.resnet50 or []:
        precision = point.source.rsplit("-", 1)[-1] if not point.source.endswith("gpu") else ""
        label = f"{point.gpus} GPU(s)" + (f" {precision}" if precision else "")
        lines.append(f"ResNet-50 {label}: {point.images_per_sec:g} images/sec")
    if not data.resnet50:
        lines.append("ResNet-50: not run")
    if attribution:
        degraded = [
            fault.node
            for fault in ([*verdict.injected_found, *verdict.injected_missed] if verdict else [])
            if fault.what.startswith("link degraded")
        ]
        why = f" (link of {degraded[0]} degraded on purpose during ib_write_bw)" if degraded else ""
        lines.append(f"benchmark attribution{why}:")
        lines += [f"  {name}: {text}" for name, text in sorted(attribution.items())]
    if alerts is None:
        lines.append("monitoring alerts: not read")
    else:
        lines.append(f"monitoring alerts firing (Prometheus): {'none' if not alerts else ''}".rstrip())
        lines += [f"  {node}: {', '.join(names)}" for node, names in alerts.items()]
    lines.append(f"report: {html_path}")
    return lines
