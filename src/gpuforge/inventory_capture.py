"""`gpuforge inventory capture NODE`: a known-good node's hardware, written as inventory variables.

The node's ``nvidia_smi`` and ``infiniband`` facts (the nvidia_smi_facts and infiniband_facts modules, run on
NODE through ansible-runner, or read from a JSON file with ``--from-facts``) become a YAML snippet for
``host_vars/NODE.yml`` or ``group_vars/<group of identical nodes>.yml``:

- ``gpuforge_expected_system`` and its ``gpuforge_expected_systems`` entry: GPU SKU and count, every HCA with
  the link of each Active port, and the GPU<->HCA NUMA groups that nvidia-smi topo -m shows;
- ``gpuforge_expected_gpu_count``, ``gpuforge_gpu_architecture`` and (NVSwitch systems) ``gpuforge_gpu_nvswitch``,
  which the driver role reads;
- a ``gpuforge_expected_gpu_skus`` entry when the GPU model is not in the role defaults, and the link speeds
  the system uses when one of them is not.

A table set in an inventory replaces the role default (roles/gpuforge/defaults/main/expected_hardware.yml) for
the hosts it applies to, so the snippet carries every entry its system refers to; the inventory check
(filter_plugins/gpuforge_inventory.py) accepts it as it is.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from gpuforge import paths

EXPECTED_HARDWARE = paths.PROJECT_ROOT / "roles" / "gpuforge" / "defaults" / "main" / "expected_hardware.yml"
# nvidia_driver picks the kernel module flavour from these names (roles/nvidia_driver/vars/main.yml).
ARCHITECTURES = ("Kepler", "Maxwell", "Pascal", "Volta", "Turing", "Ampere", "Ada", "Hopper", "Blackwell")
# 4X InfiniBand rates (IBTA) by the rate ibstat prints, for link speeds the defaults do not have.
IB_RATE_NAMES = {10: "SDR", 20: "DDR", 40: "QDR", 56: "FDR", 100: "EDR", 200: "HDR", 400: "NDR", 800: "XDR"}
BRAND_PREFIXES = ("NVIDIA ", "Tesla ")

CAPTURE_PLAYBOOK = """---
- name: Capture the GPU and InfiniBand facts of a known-good node
  hosts: all
  gather_facts: false
  become: {become}
  tasks:
    - name: GPU facts
      gpuforge.cluster.nvidia_smi_facts:
        fail_on_error: false
    - name: InfiniBand facts
      gpuforge.cluster.infiniband_facts:
        fail_on_missing: false
"""


class CaptureError(RuntimeError):
    """The facts cannot describe a node (no GPU, mixed GPU models, the node could not be reached...)."""


@dataclass
class Capture:
    node: str
    system: str
    variables: dict
    notes: list[str] = field(default_factory=list)
    source: str = ""


def _node_health():
    """module_utils/gpuforge_node_health (the judge the captured spec is written for)."""
    return paths.collection_import("plugins.module_utils.gpuforge_node_health")


def default_tables(path: Path = EXPECTED_HARDWARE) -> dict:
    """gpuforge_expected_gpu_skus / _link_speeds / _systems from the role defaults (untemplated)."""
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return {
        "skus": dict(data.get("gpuforge_expected_gpu_skus") or {}),
        "link_speeds": dict(data.get("gpuforge_expected_link_speeds") or {}),
        "systems": dict(data.get("gpuforge_expected_systems") or {}),
    }


# ---------------------------------------------------------------------------------------------------
# Facts in.

# ansible-core 2.19 wraps a persistent fact cache's values as {"__payload__": "<the facts as JSON>"}
# (ansible.builtin.jsonfile's files, as ansible.cfg configures the cache).
FACT_CACHE_PAYLOAD_KEY = "__payload__"


def load_facts(path: Path) -> dict:
    """{nvidia_smi, infiniband} from a JSON file: the facts themselves, {ansible_facts: ...} (a module's
    result), or a host's file in ansible.cfg's fact cache (.gpuforge/facts/s1_<host> with ansible-core 2.19, whose
    cache plugins store the facts as a JSON string under FACT_CACHE_PAYLOAD_KEY)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if isinstance(data, dict) and isinstance(data.get(FACT_CACHE_PAYLOAD_KEY), str):
            data = json.loads(data[FACT_CACHE_PAYLOAD_KEY])
    except (OSError, ValueError) as exc:
        raise CaptureError(f"cannot read facts from {path}: {exc}") from exc
    if isinstance(data, dict) and isinstance(data.get("ansible_facts"), dict):
        data = data["ansible_facts"]
    if not isinstance(data, dict) or "nvidia_smi" not in data:
        raise CaptureError(
            f"{path} holds no nvidia_smi facts: give the JSON of the nvidia_smi_facts and infiniband_facts "
            "results ({nvidia_smi: ..., infiniband: ...}) or the node's file in .gpuforge/facts/"
        )
    return {"nvidia_smi": data.get("nvidia_smi") or {}, "infiniband": data.get("infiniband") or {}}


def gather_facts(node: str, inventory: Path, *, become: bool = True, envvars: dict | None = None) -> dict:
    """Run nvidia_smi_facts and infiniband_facts on `node` (an inventory host) through ansible-runner."""
    import ansible_runner

    env = {
        "ANSIBLE_CONFIG": str(paths.PROJECT_ROOT / "ansible.cfg"),
        # ansible-playbook beside this interpreter (the venv's).
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "ANSIBLE_NOCOLOR": "1",
        **(envvars or {}),
    }
    with tempfile.TemporaryDirectory(prefix="gpuforge-capture-") as private:
        playbook = Path(private) / "capture.yml"
        playbook.write_text(CAPTURE_PLAYBOOK.format(become=str(bool(become)).lower()), encoding="utf-8")
        runner = ansible_runner.run(
            private_data_dir=private,
            project_dir=str(paths.PROJECT_ROOT),
            playbook=str(playbook),
            inventory=str(Path(inventory).resolve()),
            limit=node,
            envvars=env,
            quiet=True,  # ansible-runner's own fact cache in `private`: the shared one is left as it was
        )
        facts: dict = {}
        problems = []
        for event in runner.events:
            data = event.get("event_data") or {}
            result = data.get("res") or {}
            if event.get("event") == "runner_on_ok":
                facts.update(result.get("ansible_facts") or {})
            elif event.get("event") in ("runner_on_failed", "runner_on_unreachable"):
                problems.append(f"{data.get('host')}: {data.get('task')}: {result.get('msg', result)}")
        if problems or runner.status != "successful" or "nvidia_smi" not in facts:
            detail = "; ".join(problems) or runner.stdout.read()[-1500:].strip()
            raise CaptureError(f"could not read the facts of {node} from {inventory} ({runner.status}): {detail}")
    return {"nvidia_smi": facts.get("nvidia_smi") or {}, "infiniband": facts.get("infiniband") or {}}


# ---------------------------------------------------------------------------------------------------
# Facts -> expected hardware.


def sku_key(product_name: str) -> str:
    """Key of gpuforge_expected_gpu_skus for a product name: brand prefix off, spaces to dashes."""
    name = (product_name or "").strip()
    for prefix in BRAND_PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix) :]
    return re.sub(r"\s+", "-", name)


def _sku(gpus: list[dict], skus: dict, notes: list[str]) -> tuple[str, dict | None]:
    models = sorted({g.get("product_name") for g in gpus if g.get("product_name")})
    if len(models) != 1:
        raise CaptureError(
            f"the node's GPUs are {models or 'unreadable'}: a system has one GPU model, so capture a node whose "
            "GPUs nvidia-smi reads and that has one model"
        )
    model = models[0]
    for key, entry in skus.items():
        if isinstance(entry, dict) and entry.get("gpu_model") == model:
            return key, None
    key = sku_key(model)
    if key in skus:
        notes.append(f"GPU {model!r} is named {skus[key].get('gpu_model')!r} in the defaults' SKU {key}")
        return key, None
    first = gpus[0]
    pcie = first.get("pcie") or {}
    links = [(g.get("nvlink") or {}).get("active_links") for g in gpus]
    links = [n for n in links if isinstance(n, int)]
    entry = {
        "gpu_model": model,
        "memory_mib": (first.get("memory") or {}).get("total_mib"),
        "pcie_gen_max": pcie.get("gen_max"),
        "pcie_width_max": pcie.get("width_max"),
        "nvlink_links": min(links) if links else 0,
        "ecc": all((g.get("ecc") or {}).get("mode_current") == "Enabled" for g in gpus),
    }
    if any(g.get("persistence_mode") != "Enabled" for g in gpus):
        entry["persistence_mode"] = False
        notes.append("persistence mode was off on this node: the new SKU expects it off (persistence_mode: false)")
    entry["xid_fatal"] = "{{ gpuforge_expected_xid_fatal }}"
    notes.append(f"GPU {model!r} is not in the role defaults: the snippet adds SKU {key}")
    if not links:
        notes.append("no NVLink state was read (nvidia-smi nvlink --status): nvlink_links is 0, NVLinks go unchecked")
    return key, {k: v for k, v in entry.items() if v is not None}


def _link(port: dict, speeds: dict, added: dict) -> str:
    rate, layer = port.get("rate_gbit_per_s"), port.get("link_layer")
    for table in (speeds, added):
        for key, speed in table.items():
            if isinstance(speed, dict) and speed.get("rate_gbit_per_s") == rate and speed.get("link_layer") == layer:
                return key
    if not isinstance(rate, (int, float)) or layer not in ("InfiniBand", "Ethernet"):
        raise CaptureError(f"port {port.get('port')} reports rate {rate!r} and link layer {layer!r}")
    name = f"{rate:g}GbE" if layer == "Ethernet" else IB_RATE_NAMES.get(rate, f"IB{rate:g}G")
    while name in speeds or name in added:
        name += "-captured"
    added[name] = {"rate_gbit_per_s": rate, "link_layer": layer}
    return name


def _hcas(infiniband: dict, speeds: dict, notes: list[str]) -> tuple[list[dict], dict]:
    hcas, added = [], {}
    for hca in infiniband.get("hcas") or []:
        if not isinstance(hca, dict) or not hca.get("name"):
            continue
        ports, down = [], []
        for port in hca.get("ports") or []:
            if port.get("state") == "Active":
                ports.append({"port": port.get("port") or 1, "link": _link(port, speeds, added)})
            else:
                down.append(f"{hca['name']}/{port.get('port')} {port.get('state')}/{port.get('phys_state')}")
        if ports:
            hcas.append({"name": hca["name"], "ports": ports})
        if down:
            left_out = "its port(s)" if ports else f"HCA {hca['name']}"
            notes.append(
                f"{', '.join(down)} when captured: {left_out} left out of the spec; add them if they should be up"
            )
    return sorted(hcas, key=lambda h: _natural(h["name"])), added


def _natural(name: str):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _numa_groups(gpus: list[dict], hca_names: list[str], notes: list[str]) -> list[dict]:
    """GPUs grouped by NUMA node (or CPU affinity when topo -m has no NUMA column), each with the HCAs that
    are on the same socket as every GPU of the group (the codes gpu_node_check accepts)."""
    if not any(g.get("nics") or g.get("numa_affinity") is not None or g.get("cpu_affinity") for g in gpus):
        notes.append("no nvidia-smi topo -m facts: numa_affinity is not captured")
        return []
    same_socket = set(_node_health().SAME_SOCKET_CODES)
    groups: dict = {}
    for gpu in sorted(gpus, key=lambda g: g.get("index", 0)):
        numa = gpu.get("numa_affinity")
        key = ("numa", str(numa)) if numa is not None else ("cpu", gpu.get("cpu_affinity"))
        groups.setdefault(key, []).append(gpu)
    result = []
    for ordinal, ((kind, value), members) in enumerate(groups.items()):
        numa = int(value) if kind == "numa" and str(value).isdigit() else ordinal
        if kind == "cpu":
            notes.append(f"topo -m has no NUMA column: GPUs with CPU affinity {value} are numbered NUMA {numa}")
        hcas = [h for h in hca_names if all((g.get("nics") or {}).get(h) in same_socket for g in members)]
        result.append({"gpus": [g.get("index") for g in members], "hcas": hcas, "numa": numa})
    return result


def capture(facts: dict, node: str, *, system: str | None = None, tables: dict | None = None) -> Capture:
    """The expected hardware of `node` from its {nvidia_smi, infiniband} facts."""
    tables = tables or default_tables()
    smi = facts.get("nvidia_smi") or {}
    gpus = [g for g in smi.get("gpus") or [] if isinstance(g, dict)]
    if not gpus:
        errors = "; ".join(str(e) for e in smi.get("errors") or []) or "none reported"
        raise CaptureError(f"{node}: nvidia-smi lists no GPU (errors: {errors}); capture a node whose driver works")
    notes: list[str] = []
    for error in (facts.get("infiniband") or {}).get("errors") or []:
        notes.append(f"infiniband_facts: {error}")
    name = system or f"{node.split('.')[0]}-captured"
    sku, new_sku = _sku(gpus, tables["skus"], notes)
    hcas, new_links = _hcas(facts.get("infiniband") or {}, tables["link_speeds"], notes)
    spec: dict = {"gpu_sku": sku, "gpu_count": len(gpus)}
    if hcas:
        spec["hcas"] = hcas
    numa = _numa_groups(gpus, [h["name"] for h in hcas], notes)
    if numa:
        spec["numa_affinity"] = numa
    variables: dict = {"gpuforge_expected_system": name, "gpuforge_expected_gpu_count": len(gpus)}
    architecture = gpus[0].get("architecture")
    if architecture in ARCHITECTURES:
        variables["gpuforge_gpu_architecture"] = architecture
    else:
        notes.append(
            f"nvidia-smi reports architecture {architecture!r}: set gpuforge_gpu_architecture "
            f"({', '.join(ARCHITECTURES)}) yourself"
        )
    if any(g.get("fabric_state") for g in gpus):
        variables["gpuforge_gpu_nvswitch"] = True  # Fabric State is reported on NVSwitch systems only
    variables["gpuforge_expected_systems"] = {name: spec}
    if new_sku:
        variables["gpuforge_expected_gpu_skus"] = {sku: new_sku}
    if new_links:
        used = {port["link"] for hca in hcas for port in hca["ports"]}
        variables["gpuforge_expected_link_speeds"] = {
            key: value for key, value in {**tables["link_speeds"], **new_links}.items() if key in used
        }
    return Capture(node=node, system=name, variables=variables, notes=notes)


# ---------------------------------------------------------------------------------------------------
# Snippet out.


class _Dumper(yaml.SafeDumper):
    """Block sequences indented under their key (yamllint's indent-sequences)."""

    def increase_indent(self, flow=False, indentless=False):
        return super().increase_indent(flow, False)


def render(result: Capture) -> str:
    lines = [
        f"Expected hardware of {result.node}, captured by `gpuforge inventory capture {result.node}`"
        + (f" from {result.source}." if result.source else "."),
        f"Put it in host_vars/{result.node}.yml (this node) or group_vars/<group>.yml (nodes built the same way).",
        "Tables set in an inventory replace the role defaults (roles/gpuforge/defaults/main/expected_hardware.yml) "
        "for the hosts they apply to, so this holds every entry its system refers to. Check the inventory with "
        "playbooks/validate_inventory.yml, then judge the nodes with 'gpuforge validate'.",
        *(f"Note: {note}" for note in result.notes),
    ]
    header = ["---"]
    for line in lines:
        header += textwrap.wrap(line, width=110, initial_indent="# ", subsequent_indent="#   ", break_on_hyphens=False)
    body = yaml.dump(
        result.variables, Dumper=_Dumper, sort_keys=False, default_flow_style=None, width=110, allow_unicode=True
    )
    return "\n".join(header) + "\n" + body
