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


# Resource name prefix per port link layer; IBM Redpaper REDP-5610 names the DGX-1 IB resources shared_ib0..3.
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


def _node_ports(host, infiniband, wanted_hcas):
    """Return [(hca, port dict, active)] for every port of the node's HCAs (or of wanted_hcas)."""
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
    return [
        (name, port, f"{name}/{port.get('port')}" in active)
        for name in names
        for port in hcas[name].get("ports") or []
        if isinstance(port, dict)
    ]


def rdma_config_list(hostvars, nodes, hcas=None, rdma_hca_max=100, prefixes=None):
    """Build the RDMA shared device plugin configList from the nodes' infiniband facts.

    Resources are keyed by HCA port identity (the rail), never by which ports happen to be Active:
    every HCA port seen on any node, of one link layer, in natural order (mlx5_0/1, mlx5_1/1, ...,
    mlx5_10/1) is numbered once for the whole cluster, so mlx5_2/1 is shared_ib2 on every node even
    where its link is Down today. Each resource selects its port by netdev name (selectors.ifNames);
    netdev names that differ between nodes are merged into the resource's list, and a netdev name
    that belongs to two different HCA ports on two nodes is an error (one device in two resources).
    """
    if not nodes:
        raise AnsibleFilterError("no RDMA nodes: the node group is empty")
    prefixes = prefixes or DEFAULT_PREFIXES
    layers, if_names, owners, any_active = {}, {}, {}, False
    for host in nodes:
        infiniband = _facts(hostvars, host).get("infiniband")
        if not isinstance(infiniband, dict):
            raise AnsibleFilterError(
                f"node {host} has no ansible_facts.infiniband: collect facts first or set "
                "rdma_shared_device_plugin_config_list"
            )
        for hca, port, active in _node_ports(host, infiniband, hcas or []):
            identity = (hca, port.get("port"))
            label = f"{hca}/{port.get('port')}"
            layer = port.get("link_layer")
            if layer not in prefixes:
                raise AnsibleFilterError(f"{label} on {host}: unknown link layer {layer!r}")
            seen_layer = layers.setdefault(identity, (layer, host))
            if seen_layer[0] != layer:
                raise AnsibleFilterError(
                    f"{label} is {layer} on {host} but {seen_layer[0]} on {seen_layer[1]}: one resource per "
                    "HCA port needs the same link layer on every node; set rdma_shared_device_plugin_config_list"
                )
            any_active = any_active or active
            netdev = port.get("netdev")
            if not netdev:
                if active:
                    raise AnsibleFilterError(
                        f"{label} on {host} is active but has no netdev to select; set "
                        "rdma_shared_device_plugin_config_list"
                    )
                continue
            owner = owners.setdefault(netdev, (label, host))
            if owner[0] != label:
                raise AnsibleFilterError(
                    f"netdev {netdev} is {label} on {host} but {owner[0]} on {owner[1]}: it would select two "
                    "HCA ports; rename the netdevs (udev) or set rdma_shared_device_plugin_config_list"
                )
            names = if_names.setdefault(identity, [])
            if netdev not in names:
                names.append(netdev)
    if not any_active:
        raise AnsibleFilterError(f"no active RDMA port on any of {', '.join(nodes)}")
    resources, counters = [], {}
    for identity in sorted(layers, key=lambda item: (_natural_key(item[0]), str(item[1]))):
        layer = layers[identity][0]
        index = counters.get(layer, 0)
        counters[layer] = index + 1
        if identity in if_names:
            resources.append(
                {
                    "resourceName": f"{prefixes[layer]}{index}",
                    "rdmaHcaMax": int(rdma_hca_max),
                    "selectors": {"ifNames": if_names[identity]},
                }
            )
    return sorted(resources, key=lambda item: _natural_key(item["resourceName"]))


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
    """Spectrum Scale CSI static volumeHandle: '<cluster id>;<file-system UID>;path=<path>' (IBM Redpaper REDP-5610)."""
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
