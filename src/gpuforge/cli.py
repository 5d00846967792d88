"""The `gpuforge` command line: the lab, the playbooks (through ansible-runner), parsers and reports.

Playbook commands share -i/--limit/--tags/-e/--check/--diff/--json, write artifacts/<run-id>/ and exit
with ansible-runner's return code. docs/cli.md documents the commands and the JSON they write.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gpuforge import __version__, paths
from gpuforge.inventory_check import InventoryError, check_inventory
from gpuforge.lab.mirror import MirrorError
from gpuforge.lab.podman import PodmanError

# command -> playbook under playbooks/
PLAYBOOKS = {"provision": "site.yml", "validate": "validate.yml", "bench": "benchmark.yml"}
RUNBOOKS = ("rolling_upgrade", "health_sweep", "diagnostics", "alerts")
DEFAULT_INVENTORY = paths.LAB_INVENTORY_DIR / "hosts.yml"


def _lab(args: argparse.Namespace) -> int:
    from gpuforge.lab import cluster, spec

    if args.lab_command == "up":
        if not args.skip_doctor and not _preflight("lab up", print):
            return 1
        lab_spec = spec.from_file(Path(args.spec)) if args.spec else spec.from_counts(args.nodes, args.profile)
        nodes = cluster.up(lab_spec)
        _print_nodes(nodes)
        print(f"lab: inventory written to {cluster.inventory.HOSTS_FILE}")
        return 0
    if args.lab_command == "prepare":
        print(cluster.prepare())
        return 0
    if args.lab_command == "down":
        cluster.down()
        return 0
    nodes = cluster.status()
    if not nodes:
        print("lab: no nodes (run 'gpuforge lab up')")
        return 0
    _print_nodes(nodes)
    return 0


def _print_nodes(nodes) -> None:
    print(f"{'NODE':<12} {'PROFILE':<24} {'ADDRESS':<14} STATE")
    for node in nodes:
        print(f"{node.name:<12} {node.profile:<24} {node.ip:<14} {node.state}")


def _preflight(command: str, log) -> bool:
    """gpuforge doctor before the lab starts: False (and the failed checks logged) when it would fail."""
    from gpuforge import doctor

    return doctor.preflight(command, log=log)


def _doctor(args: argparse.Namespace) -> int:
    from gpuforge import doctor

    try:
        return doctor.main(json_output=args.json)
    except KeyboardInterrupt:
        print("gpuforge doctor: interrupted (its network and containers were removed)", file=sys.stderr)
        return 130


def _view_factory(args: argparse.Namespace):
    from gpuforge.progress import make_view

    return lambda title: make_view(title, json_output=args.json)


def _request(args: argparse.Namespace, command: str, playbook: str):
    from gpuforge.runner import RunRequest

    return RunRequest(
        command=command,
        playbook=playbook,
        inventory=Path(args.inventory).resolve(),
        limit=args.limit,
        tags=args.tags,
        extra_vars=args.extra_vars,
        check=args.check,
        diff=args.diff,
    )


def _emit(args: argparse.Namespace, summary: dict) -> int:
    if args.json:
        print(json.dumps(summary, indent=2))
        return summary["rc"]
    print(f"{summary['command']}: {summary['status']} (rc {summary['rc']}) in {summary['duration_s']:.0f}s")
    if summary.get("error"):
        print(f"  {summary['error']}")
    for task in summary["failed_tasks"]:
        print(f"  {task['status']}: {task['host']} / {task['task']}: {task['msg']}")
    for host, verdict in sorted((summary.get("validation") or {}).items()):  # gpuforge_records.node_verdicts
        print(f"  {host:<12} {verdict['verdict']:<7} {', '.join(verdict['failed_checks'])}")
        for reason in verdict["reasons"]:
            print(f"    {reason['verdict']} {reason['what']}: {reason['remedy']}")
    print(f"  artifacts: {summary['artifacts']['run_dir']}")
    return summary["rc"]


def _playbook(args: argparse.Namespace) -> int:
    from gpuforge.runner import new_run_id, run_playbook

    if args.command == "runbook":
        command, playbook = f"runbook {args.name}", f"runbooks/{args.name}.yml"
    else:
        command, playbook = args.command, PLAYBOOKS[args.command]
    request = _request(args, command, playbook)
    try:  # a missing or unparsable inventory, or a --limit that leaves no host, fails before anything runs
        check_inventory(request.inventory, request.limit, request.ansible_config)
    except InventoryError as exc:
        return _input_error(args, command, str(exc))
    run_dir = paths.ARTIFACTS_DIR / new_run_id()
    summary = run_playbook(request, run_dir, _view_factory(args)(command))
    return _emit(args, _require_hosts(summary, run_dir))


def _input_error(args: argparse.Namespace, command: str, message: str) -> int:
    """Nothing ran: the message on stderr (and, with --json, a small document on stdout); exit 1."""
    print(f"gpuforge {command}: {message}", file=sys.stderr)
    if args.json:
        print(json.dumps({"command": command, "rc": 1, "status": "inventory-error", "error": message}, indent=2))
    return 1


def _require_hosts(summary: dict, run_dir: Path) -> dict:
    """A run that processed no host (the plays' hosts: patterns matched nothing) checked nothing: a failure."""
    from gpuforge.runner import write_summary

    if summary["rc"] == 0 and not summary.get("hosts"):
        summary.update(
            rc=1,
            status="no-hosts",
            error="no host was processed: the playbook's hosts: patterns matched no host of the inventory "
            f"{summary.get('inventory')}"
            + (f" with --limit {summary['limit']!r}" if summary.get("limit") else "")
            + "; check -i and --limit",
        )
        write_summary(run_dir, summary)
    return summary


def _demo(args: argparse.Namespace) -> int:
    from gpuforge import demo

    log = (lambda line: print(line, file=sys.stderr)) if args.json else print
    if not args.skip_doctor and not _preflight("demo", log):
        return 1
    return demo.run(args, _view_factory(args), log=log)


def _report(args: argparse.Namespace) -> int:
    from gpuforge import report

    run_dir = Path(args.run_dir) if args.run_dir else report.latest_run_dir()
    try:
        files = report.build(run_dir, Path(args.out) if args.out else None)
    except ValueError as exc:  # gpuforge_records.RecordError: a result file of an unknown shape
        print(f"gpuforge report: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"html": str(files.html), "markdown": str(files.markdown)}))
    else:
        print(files.markdown.read_text(encoding="utf-8"))
        print(f"report: {files.html}")
    return 0


def _export(args: argparse.Namespace) -> int:
    from gpuforge.report import export

    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        print(f"gpuforge export: {run_dir} is not a directory", file=sys.stderr)
        return 2
    try:
        text = export.export(run_dir, args.format)
    except ValueError as exc:  # gpuforge_records.RecordError: a result file of an unknown shape
        print(f"gpuforge export: {exc}", file=sys.stderr)
        return 1
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"export: {args.out}")
    else:
        sys.stdout.write(text)
    return 0


def _parse(args: argparse.Namespace) -> int:
    from gpuforge import parsers

    if args.list:
        rows = parsers.listing()
        width = max(len(kind) for kind, _function, _what in rows)
        for kind, function, what in rows:
            print(f"{kind:<{width}}  {what}  [{function}]")
        return 0
    if args.kind is None or args.file is None:
        print("gpuforge parse: give KIND and FILE, or --list for the kinds", file=sys.stderr)
        return 2
    text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text(encoding="utf-8")
    try:
        result = parsers.parse(args.kind, text)
    except parsers.UnknownKind:
        raise
    except ValueError as exc:  # gpuforge_errors.ParseError
        print(f"gpuforge parse: {args.kind}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(parsers.jsonable(result), indent=2, sort_keys=True))
    return 0


def _k8s(args: argparse.Namespace) -> int:
    from gpuforge import k8s
    from gpuforge.k8s_render import RenderError

    out_dir = Path(args.out) if args.out else paths.ARTIFACTS_DIR / "k8s"
    try:
        written = k8s.render(Path(args.inventory).resolve(), out_dir, args.platform, args.k8s_version)
    except RenderError as exc:  # the failing task's message names the variable or node to fix
        print(f"k8s render failed: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"out_dir": str(out_dir), "files": [str(path) for path in written]}))
    else:
        for path in written:
            print(path)
        print(f"k8s render: {len(written)} manifests in {out_dir}")
    return 0


def _inventory(args: argparse.Namespace) -> int:
    """`inventory capture NODE`: a known-good node's hardware as inventory variables (YAML on stdout)."""
    from gpuforge import inventory_capture

    try:
        if args.from_facts:
            facts, source = inventory_capture.load_facts(Path(args.from_facts)), args.from_facts
        else:
            inventory = Path(args.inventory).resolve()
            facts = inventory_capture.gather_facts(args.node, inventory, become=args.become)
            source = f"the nvidia_smi_facts and infiniband_facts modules on {args.node} ({inventory})"
        result = inventory_capture.capture(facts, args.node, system=args.system)
    except inventory_capture.CaptureError as exc:
        print(f"gpuforge inventory capture: {exc}", file=sys.stderr)
        return 1
    result.source = source
    text = inventory_capture.render(result)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"inventory capture: {args.node} -> {args.out} (system {result.system})", file=sys.stderr)
    else:
        print(text, end="")
    for note in result.notes:
        print(f"inventory capture: note: {note}", file=sys.stderr)
    return 0


def _playbook_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-i", "--inventory", default=str(DEFAULT_INVENTORY), help="inventory (default: the lab's)")
    common.add_argument("--limit", help="host pattern, as ansible-playbook --limit")
    common.add_argument("--tags", help="comma-separated tags to run")
    common.add_argument("-e", "--extra-vars", action="append", default=[], metavar="KEY=VALUE|@FILE")
    common.add_argument("--check", action="store_true", help="dry run (ansible --check)")
    common.add_argument("--diff", action="store_true", help="show file/template differences")
    common.add_argument("--json", action="store_true", help="print only the run's summary JSON on stdout")
    return common


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpuforge", description=__doc__)
    parser.add_argument("--version", action="version", version=f"gpuforge {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    lab = commands.add_parser("lab", help="the podman lab cluster that stands in for GPU servers")
    lab_commands = lab.add_subparsers(dest="lab_command", required=True)
    up = lab_commands.add_parser("up", help="build (once) and start the lab; write inventories/lab/")
    up.add_argument("--nodes", type=int, default=2, help="number of nodes (default 2)")
    up.add_argument("--profile", action="append", default=[], help="hardware profile (repeat to alternate)")
    up.add_argument("--spec", help="YAML lab description (nodes with profiles, faults, groups)")
    up.add_argument("--skip-doctor", action="store_true", help="start without the gpuforge doctor checks")
    lab_commands.add_parser("prepare", help="image, network, mirror and hardware documents; prints the image tag")
    lab_commands.add_parser("down", help="remove the lab's containers and network")
    lab_commands.add_parser("status", help="list lab nodes and their state")
    lab.set_defaults(handler=_lab)

    common = _playbook_options()
    helps = {
        "provision": "provision the cluster (playbooks/site.yml)",
        "validate": "validate every node (playbooks/validate.yml); JSON per host in artifacts/",
        "bench": "run the benchmarks (playbooks/benchmark.yml)",
    }
    for name, text in helps.items():
        commands.add_parser(name, parents=[common], help=text).set_defaults(handler=_playbook)
    runbook = commands.add_parser("runbook", parents=[common], help="operator runbooks (playbooks/runbooks/)")
    runbook.add_argument("name", choices=RUNBOOKS)
    runbook.set_defaults(handler=_playbook)

    from gpuforge import burnin

    burnin.add_parser(commands, DEFAULT_INVENTORY)  # `gpuforge burnin` (src/gpuforge/burnin.py, docs/burnin.md)

    demo = commands.add_parser("demo", parents=[common], help="lab up, provision, validate, bench, k8s, report")
    demo.add_argument("--spec", default=str(paths.LAB_DIR / "specs" / "demo.yml"), help="lab spec file")
    demo.add_argument("--skip-doctor", action="store_true", help="start without the gpuforge doctor checks")
    demo.set_defaults(handler=_demo)

    doctor = commands.add_parser("doctor", help="check that this machine can run the lab (podman, DNS, disk...)")
    doctor.add_argument("--json", action="store_true", help="print the checks as JSON")
    doctor.set_defaults(handler=_doctor)

    report = commands.add_parser("report", help="HTML + Markdown report from a run's JSON artifacts")
    report.add_argument("run_dir", nargs="?", help="artifacts/<run-id> (default: the latest run)")
    report.add_argument("--out", help="directory for report.html/report.md (default: the run directory)")
    report.add_argument("--json", action="store_true", help="print the written paths as JSON")
    report.set_defaults(handler=_report)

    export = commands.add_parser("export", help="a run's results as JUnit XML, CTRF JSON or per-node verdicts")
    export.add_argument("--format", required=True, choices=("junit", "ctrf", "verdicts"))
    export.add_argument("run_dir", help="artifacts/<run-id> (or any folder holding validation/ and bench/ results)")
    export.add_argument("--out", help="file to write (default: standard output)")
    export.set_defaults(handler=_export)

    from gpuforge.k8s import DEFAULT_K8S_VERSION
    from gpuforge.k8s import PLATFORMS as k8s_platforms
    from gpuforge.parsers import PARSERS

    parse = commands.add_parser("parse", help="print a parser's JSON for a captured tool output")
    parse.add_argument("--list", action="store_true", help="list the kinds, what each reads and its parser")
    parse.add_argument("kind", nargs="?", choices=sorted(PARSERS))
    parse.add_argument("file", nargs="?", help="captured output ('-' for stdin)")
    parse.set_defaults(handler=_parse)

    k8s = commands.add_parser("k8s", help="Kubernetes add-on manifests")
    k8s_commands = k8s.add_subparsers(dest="k8s_command", required=True)
    render = k8s_commands.add_parser("render", help="render the add-on manifests from the inventory")
    render.add_argument("-i", "--inventory", default=str(DEFAULT_INVENTORY))
    render.add_argument("--out", help="output directory (default artifacts/k8s)")
    render.add_argument("--platform", choices=k8s_platforms, default="kubernetes")
    render.add_argument("--k8s-version", default=DEFAULT_K8S_VERSION, help="Kubernetes minor version")
    render.add_argument("--json", action="store_true")
    k8s.set_defaults(handler=_k8s)
    from gpuforge.k8s_verify import add_verify_parser

    add_verify_parser(k8s_commands, str(DEFAULT_INVENTORY))

    inventory = commands.add_parser("inventory", help="site inventory helpers")
    inventory_commands = inventory.add_subparsers(dest="inventory_command", required=True)
    capture = inventory_commands.add_parser(
        "capture", help="print a known-good node's hardware as inventory variables (its expected system)"
    )
    capture.add_argument("node", help="inventory host to read (or the name to write with --from-facts)")
    capture.add_argument("-i", "--inventory", default=str(DEFAULT_INVENTORY), help="inventory (default: the lab's)")
    capture.add_argument(
        "--from-facts",
        metavar="FILE",
        help="JSON of the node's nvidia_smi and infiniband facts (e.g. the node's fact cache file, "
        ".gpuforge/facts/s1_NODE) instead of running the fact modules on it",
    )
    capture.add_argument("--system", help="name of the expected system (default: NODE-captured)")
    capture.add_argument("--no-become", dest="become", action="store_false", help="run the modules without sudo")
    capture.add_argument("-o", "--out", help="write the YAML here (host_vars/NODE.yml) instead of stdout")
    inventory.set_defaults(handler=_inventory)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except (PodmanError, MirrorError, ValueError, FileNotFoundError) as exc:
        print(f"gpuforge: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"gpuforge {args.command}: interrupted", file=sys.stderr)
        return 130
