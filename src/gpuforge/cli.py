"""The `gpuforge` command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpuforge import __version__
from gpuforge.lab.mirror import MirrorError
from gpuforge.lab.podman import PodmanError


def _lab(args: argparse.Namespace) -> int:
    from gpuforge.lab import cluster, spec

    if args.lab_command == "up":
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
    lab_commands.add_parser("prepare", help="image, network, mirror and hardware documents; prints the image tag")
    lab_commands.add_parser("down", help="remove the lab's containers and network")
    lab_commands.add_parser("status", help="list lab nodes and their state")
    lab.set_defaults(handler=_lab)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except (PodmanError, MirrorError, ValueError, FileNotFoundError) as exc:
        print(f"gpuforge: error: {exc}", file=sys.stderr)
        return 2
