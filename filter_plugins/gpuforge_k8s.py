"""Jinja2 filters that turn node facts into Kubernetes add-on configuration.

The facts shapes are the ones gpuforge's fact modules return:
  ansible_facts.infiniband = {hcas: [{name, ca_type, ports: [{port, state, phys_state, rate,
                              link_layer, netdev, ...}]}], active_ports: ["mlx5_0/1", ...]}
  ansible_facts.nvidia_smi = {..., gpu_product_label: "Tesla-V100-SXM2-16GB"}
Errors are raised as AnsibleFilterError with a message that names the node and what is missing.
"""

from __future__ import annotations

import re

try:
    from ansible.errors import AnsibleFilterError
except ImportError:  # pragma: no cover - ansible is always present where these filters run

    class AnsibleFilterError(Exception):
        """Stand-in when ansible is not importable."""


# Resource name prefix per port link layer; seed 001 names the DGX-1 IB resources shared_ib0..3.
DEFAULT_PREFIXES = {"InfiniBand": "shared_ib", "Ethernet": "shared_roce"}
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _natural_key(name):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _facts(hostvars, host):
    try:
        node = hostvars[host]
    except KeyError as exc:
        raise AnsibleFilterError(f"host {host!r} is not in the inventory") from exc
    facts = node.get("ansible_facts") or {}
    return facts if isinstance(facts, dict) else {}


def _active_ports(host, infiniband, wanted_hcas):
    """Return [(hca, port dict)] for the node's active ports, HCAs in natural order."""
    hcas = {hca.get("name"): hca for hca in infiniband.get("hcas") or [] if isinstance(hca, dict)}
    active = set(infiniband.get("active_ports") or [])
    names = sorted(hcas, key=_natural_key)
    if wanted_hcas:
        missing = [name for name in wanted_hcas if name not in hcas]
        if missing:
            raise AnsibleFilterError(
                f"node {host} has no HCA named {', '.join(missing)} (it has {', '.join(names) or 'none'})"
            )
        names = sorted(wanted_hcas, key=_natural_key)
    ports = []
    for name in names:
        hca_ports = [p for p in hcas[name].get("ports") or [] if f"{name}/{p.get('port')}" in active]
        if wanted_hcas and not hca_ports:
            raise AnsibleFilterError(f"HCA {name} on node {host} has no active port")
        ports.extend((name, port) for port in hca_ports)
    return ports


def rdma_config_list(hostvars, nodes, hcas=None, rdma_hca_max=100, prefixes=None):
    """Build the RDMA shared device plugin configList from the nodes' infiniband facts.

    One resource per active port index and link layer: the i-th active InfiniBand port of every
    node (HCAs in natural order) becomes shared_ib<i>, selected by its netdev name (ifNames).
    Netdev names that differ between nodes are merged into the same resource's ifNames list.
    """
    if not nodes:
        raise AnsibleFilterError("no RDMA nodes: the node group is empty")
    prefixes = prefixes or DEFAULT_PREFIXES
    resources = {}
    for host in nodes:
        infiniband = _facts(hostvars, host).get("infiniband")
        if not isinstance(infiniband, dict):
            raise AnsibleFilterError(
                f"node {host} has no ansible_facts.infiniband: collect facts first or set "
                "rdma_shared_device_plugin_config_list"
            )
        counters = {}
        for hca, port in _active_ports(host, infiniband, hcas or []):
            layer = port.get("link_layer")
            if layer not in prefixes:
                raise AnsibleFilterError(f"{hca}/{port.get('port')} on {host}: unknown link layer {layer!r}")
            if not port.get("netdev"):
                raise AnsibleFilterError(
                    f"{hca}/{port.get('port')} on {host} is active but has no netdev to select; set "
                    "rdma_shared_device_plugin_config_list"
                )
            index = counters.get(layer, 0)
            counters[layer] = index + 1
            names = resources.setdefault(f"{prefixes[layer]}{index}", [])
            if port["netdev"] not in names:
                names.append(port["netdev"])
    if not resources:
        raise AnsibleFilterError(f"no active RDMA port on any of {', '.join(nodes)}")
    return [
        {"resourceName": name, "rdmaHcaMax": int(rdma_hca_max), "selectors": {"ifNames": if_names}}
        for name, if_names in sorted(resources.items(), key=lambda item: _natural_key(item[0]))
    ]


def gpu_product_label(hostvars, host):
    """The nvidia.com/gpu.product label value of a node, from its nvidia_smi facts."""
    facts = _facts(hostvars, host)
    nvidia = facts.get("nvidia_smi")
    label = nvidia.get("gpu_product_label") if isinstance(nvidia, dict) else None
    label = label or facts.get("gpu_product_label")
    if not label:
        raise AnsibleFilterError(
            f"node {host} has no GPU product label in ansible_facts.nvidia_smi: collect facts first"
        )
    if len(label) > 63 or not LABEL_VALUE.match(label):
        raise AnsibleFilterError(f"node {host}: GPU product label {label!r} is not a valid label value")
    return label


def scale_volume_handle(cluster_id, filesystem_uid, path):
    """Spectrum Scale CSI static volumeHandle: '<cluster id>;<file-system UID>;path=<path>' (seed 001)."""
    if not str(cluster_id).isdigit():
        raise AnsibleFilterError(f"Spectrum Scale cluster id {cluster_id!r} is not numeric")
    if not re.match(r"^[0-9A-F]{8}:[0-9A-F]{8}$", str(filesystem_uid)):
        raise AnsibleFilterError(f"file-system UID {filesystem_uid!r} is not like 099B6A7A:5EB99743 (mmlsfs --uid)")
    if not str(path).startswith("/"):
        raise AnsibleFilterError(f"static volume path {path!r} is not absolute")
    return f"{cluster_id};{filesystem_uid};path={path}"


def _version_key(version):
    major, minor = str(version).lstrip("v").split(".")[:2]
    return int(major), int(minor)


def supported_k8s_versions(minimum):
    """Kubernetes major.minor versions kubernetes-validate has schemas for, from `minimum` on."""
    from kubernetes_validate.utils import all_versions

    versions = {".".join(v.split(".")[:2]) for v in all_versions()}
    return sorted((v for v in versions if _version_key(v) >= _version_key(minimum)), key=_version_key)


def k8s_version_check(version, minimum):
    """Return the major.minor of `version`, or raise naming the supported versions."""
    supported = supported_k8s_versions(minimum)
    parts = str(version).lstrip("v").split(".")
    major_minor = ".".join(parts[:2]) if len(parts) >= 2 and all(p.isdigit() for p in parts[:2]) else None
    if major_minor not in supported:
        raise AnsibleFilterError(
            f"Unknown Kubernetes version {version!r}: gpuforge renders and validates for {', '.join(supported)} "
            f"(the schemas kubernetes-validate ships, from {minimum} on)"
        )
    return major_minor


class FilterModule:
    """gpuforge Kubernetes add-on filters."""

    def filters(self):
        return {
            "gpuforge_rdma_config_list": rdma_config_list,
            "gpuforge_gpu_product_label": gpu_product_label,
            "gpuforge_scale_volume_handle": scale_volume_handle,
            "gpuforge_k8s_version_check": k8s_version_check,
        }
