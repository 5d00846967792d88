"""`gpuforge demo`: lab up -> lab services -> provision -> validate (report only) -> benchmark -> alerts -> k8s
render -> report.

Every stage runs even when an earlier optional one failed, and is reported; only a failed lab or
provisioning makes the demo exit non-zero. Re-running reuses the lab (cluster.up is idempotent).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gpuforge import paths, report
from gpuforge.runner import RunRequest, new_run_id, run_playbook, write_summary

DEMO_SPEC = paths.LAB_DIR / "specs" / "demo.yml"
# Validation must not stop the demo on the faulty node: record failures, do not fail the play.
REPORT_ONLY_VARS = ["gpuforge_validate_report_only=true"]
# A healthy node whose link the benchmark degrades (tc) during the ib_write_bw pairs: the attribution
# must name it, apart from the hardware faults validation finds on gpu03.
DEGRADED_NODE = "gpu02"
BENCH_VARS = [f"gpuforge_bench_netem_node={DEGRADED_NODE}"]
# Written by playbooks/runbooks/alerts.yml into the alerts stage's run directory (its gpuforge_artifacts_dir):
# Prometheus's /api/v1/alerts document (role gpu_monitoring).
ALERTS_STAGE = "alerts"
ALERTS_FILE = Path(ALERTS_STAGE) / "monitoring" / "alerts.json"  # relative to the demo's run directory
# Stages whose failure fails the demo; the later ones are reported either way.
REQUIRED_STAGES = ("lab", "lab-services", "provision")


@dataclass
class Stage:
    name: str
    status: str  # ok | failed | skipped
    rc: int
    detail: str = ""
    summary: dict = field(default_factory=dict)


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
        stages.append(_lab_stage(Path(options.spec)))
    except Exception as exc:  # podman/mirror errors: nothing else can run
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
    bench = base("bench", "benchmark.yml", BENCH_VARS)
    bench.playbooks_dir = paths.LAB_DIR / "playbooks"
    stages.append(_playbook_stage("benchmark", bench, run_dir, view_factory))
    # Last of the node stages: by now the monitoring installed by site.yml has scraped the faulty node for minutes.
    stages.append(_playbook_stage(ALERTS_STAGE, base("runbook alerts", "runbooks/alerts.yml"), run_dir, view_factory))
    stages.append(_k8s_stage(Path(options.inventory)))
    return _finish(run_dir, stages, started, log)


def _finish(run_dir: Path, stages: list[Stage], started: float, log) -> int:
    failed_hard = any(stage.status == "failed" for stage in stages if stage.name in REQUIRED_STAGES)
    finished = time.time()
    summary = {
        "schema_version": 1,
        "run_id": run_dir.name,
        "command": "demo",
        "playbook": None,
        "rc": 1 if failed_hard else 0,
        "status": "failed" if failed_hard else "successful",
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(finished)),
        "duration_s": round(finished - started, 3),
        "hosts": {},
        "failed_tasks": [task for stage in stages for task in stage.summary.get("failed_tasks", [])],
        "stages": [{"name": s.name, "status": s.status, "rc": s.rc, "detail": s.detail} for s in stages],
        "artifacts": {"run_dir": str(run_dir)},
    }
    write_summary(run_dir, summary)
    try:
        files = report.build(run_dir)
    except ValueError as exc:  # gpuforge_records.RecordError: a result file the records do not read
        log(f"demo: no report: {exc} (the stages' results are in {run_dir})")
        return 1
    summary["artifacts"].update(report_html=str(files.html), report_md=str(files.markdown))
    write_summary(run_dir, summary)
    for line in summary_lines(
        stages, files.data, files.html, bench_attribution(run_dir), firing_alerts(run_dir / ALERTS_FILE)
    ):
        log(line)
    return summary["rc"]


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
) -> list[str]:
    lines = ["", "== gpuforge demo summary"]
    lines += [f"stage {stage.name:<10} {stage.status:<8} {stage.detail}" for stage in stages]
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
        lines.append(f"benchmark attribution (link of {DEGRADED_NODE} degraded on purpose during ib_write_bw):")
        lines += [f"  {name}: {text}" for name, text in sorted(attribution.items())]
    if alerts is None:
        lines.append("monitoring alerts: not read")
    else:
        lines.append(f"monitoring alerts firing (Prometheus): {'none' if not alerts else ''}".rstrip())
        lines += [f"  {node}: {', '.join(names)}" for node, names in alerts.items()]
    lines.append(f"report: {html_path}")
    return lines
