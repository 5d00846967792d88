"""Run one playbook through ansible-runner and record it under artifacts/<run-id>/.

The runner works in its own thread (run_async); its event_handler only puts events on a queue and the
calling thread consumes them, so the progress view never slows Ansible down. Each run leaves:

  <run_dir>/runner/            ansible-runner's private_data_dir (artifacts/<ident>/stdout, job_events/, ...)
  <run_dir>/summary.json       the versioned summary (docs/cli.md)
  <run_dir>/validation/*.json  the node reports validate.yml wrote
  <run_dir>/bench/<run>/*.json the results benchmark.yml wrote

The run directory is the playbooks' ``gpuforge_artifacts_dir`` (an extra var), so they write their results
into it and nothing decides by timestamps which files belong to the run: the run directory is the only input of
the summary and the report. A caller's own ``gpuforge_artifacts_dir`` is refused (run ansible-playbook directly to
write elsewhere).
"""

from __future__ import annotations

import json
import os
import queue
import shlex
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from gpuforge import paths
from gpuforge.progress import NullView, ProgressModel

# The verdict words (PASS, FAIL, UNKNOWN) written into stages and unreadable validation results.
_checks = paths.collection_import("plugins.module_utils.gpuforge_checks")
_records = paths.collection_import("plugins.module_utils.gpuforge_records")

# 2: "validation" holds each host's verdict (gpuforge_records.node_verdicts), not a recount of its checks.
SCHEMA_VERSION = 2


def new_run_id(now: datetime | None = None) -> str:
    """UTC timestamp + short uuid: sorts by time, unique across concurrent runs."""
    now = now or datetime.now(UTC)
    return f"{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass
class RunRequest:
    command: str
    playbook: str  # relative to playbooks_dir, e.g. "site.yml" or "runbooks/diagnostics.yml"
    inventory: Path = paths.LAB_INVENTORY_DIR / "hosts.yml"
    limit: str | None = None
    tags: str | None = None
    extra_vars: list[str] = field(default_factory=list)  # key=value or @file, as given on the command line
    check: bool = False
    diff: bool = False
    project_dir: Path = paths.PROJECT_ROOT
    playbooks_dir: Path = paths.PLAYBOOKS_DIR
    artifacts_root: Path = paths.ARTIFACTS_DIR
    ansible_config: Path = paths.PROJECT_ROOT / "ansible.cfg"


def split_extra_vars(values: list[str]) -> tuple[dict, list[str]]:
    """key=value pairs become a dict (strings, as ansible-playbook -e gives them); @file stays a path."""
    pairs: dict = {}
    files: list[str] = []
    for value in values:
        if value.startswith("@"):
            path = Path(value[1:]).expanduser().resolve()
            if not path.is_file():
                raise FileNotFoundError(f"extra-vars file not found: {path}")
            files.append(str(path))
        elif "=" in value:
            key, _, item = value.partition("=")
            pairs[key.strip()] = item
        else:
            raise ValueError(f"-e/--extra-vars takes key=value or @file, got {value!r}")
    return pairs, files


def _cmdline(request: RunRequest, var_files: list[str]) -> str | None:
    parts: list[str] = []
    for path in var_files:
        parts += ["-e", f"@{path}"]
    if request.check:
        parts.append("--check")
    if request.diff:
        parts.append("--diff")
    return shlex.join(parts) if parts else None


def _envvars(request: RunRequest, run_dir: Path) -> dict:
    venv_bin = str(Path(sys.executable).parent)
    return {
        "ANSIBLE_CONFIG": str(request.ansible_config),
        "CONTAINERS_CONF": str(paths.CONTAINERS_CONF),
        # ansible-playbook and the controller's Python modules live next to this interpreter.
        "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "GPUFORGE_RUN_DIR": str(run_dir),
        "ANSIBLE_NOCOLOR": "1",
    }


def load_validation(directory: Path) -> dict:
    """{host: its verdict} of the node_check records in <directory>/<host>.json, by gpuforge_records.node_verdicts
    (the one verdict function: verdict, healthy, failed_checks, caused_failures, reasons). A file that is not JSON
    or not records is UNKNOWN and not healthy, with the reason."""
    hosts: dict = {}
    if not directory.is_dir():
        return hosts
    for path in sorted(directory.glob("*.json")):
        try:
            records = _records.node_check_records(json.loads(path.read_text(encoding="utf-8")))
            hosts.update(_records.node_verdicts(records))
        except (OSError, ValueError) as exc:  # RecordError is a ValueError
            what = f"{path.name} unreadable: {exc}"
            reason = {"verdict": _checks.UNKNOWN, "what": what, "remedy": "rerun validate.yml"}
            hosts[path.stem] = {
                "verdict": _checks.UNKNOWN,
                "healthy": False,
                "failed_checks": [],
                "caused_failures": {},
                "reasons": [reason],
            }
    return hosts


def run_playbook(request: RunRequest, run_dir: Path, view=None) -> dict:
    """Run request.playbook; write run_dir/summary.json and return it (its "rc" is the runner's)."""
    import ansible_runner

    view = view or NullView()
    run_dir.mkdir(parents=True, exist_ok=True)
    playbook = request.playbooks_dir / request.playbook
    summary: dict = {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_dir.name,
        "command": request.command,
        "playbook": str(playbook.relative_to(request.project_dir)),
        "inventory": str(request.inventory),
        "limit": request.limit,
        "tags": request.tags,
        "check": request.check,
    }
    started = time.time()
    model = ProgressModel()
    if not playbook.is_file():
        return _finish(summary, run_dir, started, rc=1, status="missing-playbook", model=model, request=request)
    pairs, var_files = split_extra_vars(request.extra_vars)
    if "gpuforge_artifacts_dir" in pairs or _files_set(var_files, "gpuforge_artifacts_dir"):
        summary["error"] = (
            f"gpuforge_artifacts_dir is this run's directory ({run_dir}); leave it out of the extra vars "
            "(run ansible-playbook directly to write the results elsewhere)"
        )
        return _finish(summary, run_dir, started, rc=1, status="bad-extra-vars", model=model, request=request)
    pairs["gpuforge_artifacts_dir"] = str(run_dir)
    events: queue.Queue = queue.Queue()
    (run_dir / "runner").mkdir(exist_ok=True)
    thread, runner = ansible_runner.run_async(
        private_data_dir=str(run_dir / "runner"),
        project_dir=str(request.project_dir),
        playbook=str(playbook.relative_to(request.project_dir)),
        inventory=str(request.inventory),
        limit=request.limit,
        tags=request.tags,
        extravars=pairs or None,
        cmdline=_cmdline(request, var_files),
        envvars=_envvars(request, run_dir),
        ident="playbook",
        # Keep ansible.cfg's shared fact cache (.gpuforge/facts): ansible-runner's default is a cache per
        # run, and then `k8s render` and later runs would not see the facts validation gathered.
        fact_cache_type=None,
        quiet=True,
        event_handler=lambda event: events.put(event) or True,
    )
    with view:
        while thread.is_alive() or not events.empty():
            try:
                event = events.get(timeout=0.25)
            except queue.Empty:
                view.update(model, None)
                continue
            view.update(model, model.handle(event))
        thread.join()
    return _finish(summary, run_dir, started, rc=runner.rc, status=runner.status, model=model, request=request)


def _files_set(var_files: list[str], name: str) -> bool:
    """Whether one of the -e @files sets the variable ``name`` (YAML or JSON; an unreadable file: no)."""
    import yaml

    for path in var_files:
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(data, dict) and name in data:
            return True
    return False


def _listed(folder: Path) -> list[str]:
    return [str(path) for path in sorted(folder.rglob("*.json"))] if folder.is_dir() else []


def _finish(summary, run_dir, started, rc, status, model, request) -> dict:
    finished = time.time()
    validation, bench = _listed(run_dir / "validation"), _listed(run_dir / "bench")
    summary.update(
        rc=rc if rc is not None else 1,
        status=status,
        started=_iso(started),
        finished=_iso(finished),
        duration_s=round(finished - started, 3),
        hosts=model.hosts,
        failed_tasks=model.failed_tasks,
        artifacts={
            "run_dir": str(run_dir),
            "runner": str(run_dir / "runner"),
            "stdout": str(run_dir / "runner" / "artifacts" / "playbook" / "stdout"),
            "validation": validation,
            "bench": bench,
        },
    )
    if validation:
        summary["validation"] = load_validation(run_dir / "validation")
    write_summary(run_dir, summary)
    return summary


# What a stage of a multi-playbook command (demo, burnin) says of the cluster, as its stage_result record in
# summary.json's stages (gpuforge_records.stage_result_record): a stage that ran clean is PASS; one that failed, on the
# cluster's faults (demo's "faults") or as the toolkit's own failure ("failed"), is FAIL; a skipped one is UNKNOWN.
STAGE_STATUS_VERDICT = {"ok": _checks.PASS, "faults": _checks.FAIL, "failed": _checks.FAIL, "skipped": _checks.UNKNOWN}


def stage_entry(run_id: str, name: str, status: str, rc, detail: str) -> dict:
    """One summary.json ``stages`` entry: the stage's ``stage_result`` record, its verdict from its status."""
    return _records.stage_result_record(run_id, name, status, STAGE_STATUS_VERDICT[status], rc, detail)


def write_summary(run_dir: Path, summary: dict) -> Path:
    path = run_dir / "summary.json"
    path.write_text(json.dumps(summary, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    return path
