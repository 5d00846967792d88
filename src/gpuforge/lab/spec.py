"""What a lab is made of: nodes with a hardware profile, faults and inventory groups."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from gpuforge.lab import os_shapes
from gpuforge.lab.profiles import hardware_document, load_profile

# Node-name prefix and inventory groups by the kind of machine a profile describes.
ROLE_GROUPS = {
    "gpu": ["gpu_nodes", "slurm_compute", "spectrum_scale_clients", "nfs_clients", "k8s_workers"],
    "storage": ["storage_nodes", "nfs_servers", "spectrum_scale_cluster", "ib_subnet_manager"],
    "head": ["head_nodes", "slurm_controller", "monitoring_server"],
}


@dataclass
class NodeSpec:
    name: str
    profile: str
    faults: list[dict] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    # The OS shape of the node (lab/image/shapes.yml): debian12, ubuntu2204, ubuntu2404, rhel8, rhel9.
    os: str = "debian12"


@dataclass
class LabSpec:
    nodes: list[NodeSpec]

    def hardware(self, node: NodeSpec) -> dict:
        return hardware_document(load_profile(node.profile), node.faults)


def machine_kind(profile: dict) -> str:
    if (profile.get("gpu") or {}).get("count", 0):
        return "gpu"
    return "head" if profile["name"] == "head" else "storage"


def from_counts(nodes: int, profiles: list[str]) -> LabSpec:
    """`lab up --nodes N --profile A [--profile B]`: N nodes, profiles assigned in turn."""
    if nodes < 1:
        raise ValueError("--nodes must be at least 1")
    profiles = profiles or ["dgx1-v100-edr"]
    counters: dict[str, int] = {}
    result = []
    for index in range(nodes):
        profile_name = profiles[index % len(profiles)]
        kind = machine_kind(load_profile(profile_name))
        counters[kind] = counters.get(kind, 0) + 1
        result.append(NodeSpec(f"{kind}{counters[kind]:02d}", profile_name, [], list(ROLE_GROUPS[kind])))
    return LabSpec(result)


def from_file(path: Path) -> LabSpec:
    """A YAML lab description: {nodes: [{name, profile, os, faults: [...], groups: [...]}]}."""
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    nodes = []
    for entry in data.get("nodes", []):
        if "name" not in entry or "profile" not in entry:
            raise ValueError(f"{path}: every node needs 'name' and 'profile' (got {entry!r})")
        kind = machine_kind(load_profile(entry["profile"]))
        groups = entry.get("groups", ROLE_GROUPS[kind])
        shape = str(entry.get("os", "debian12"))
        if shape not in os_shapes.names():
            known = ", ".join(os_shapes.names())
            raise ValueError(f"{path}: node {entry['name']}: os must be one of {known} (got {shape!r})")
        nodes.append(NodeSpec(entry["name"], entry["profile"], list(entry.get("faults", [])), list(groups), shape))
    if not nodes:
        raise ValueError(f"{path}: no nodes defined")
    names = [node.name for node in nodes]
    if len(set(names)) != len(names):
        raise ValueError(f"{path}: node names must be unique: {names}")
    return LabSpec(nodes)
