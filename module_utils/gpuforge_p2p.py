"""p2pBandwidthLatencyTest (NVIDIA CUDA samples): parse its output and judge GPU peer-to-peer bandwidth.

The program prints its devices (``Device: 0, Tesla V100-SXM2-16GB, pciBusID: 1a, ...``), which pairs can
access each other (``Device=0 CAN Access Peer Device=1``), then matrices, each a title line, a column header
(``D\\D 0 1 ...``; ``GPU 0 1 ...`` and a second ``CPU 0 1 ...`` block for latencies) and one row per device:

* ``P2P Connectivity Matrix`` (1: peer access possible);
* ``Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)`` and ``...P2P=Enabled Bandwidth Matrix (GB/s)``
  (CUDA 9 era, Dell EMC Ready Solutions for AI Figure 41) or ``...P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)``
  (current samples; ``(P2P Reads)`` with ``--p2p_read``);
* ``Bidirectional P2P=Disabled/Enabled Bandwidth Matrix (GB/s)``;
* ``P2P=Disabled Latency Matrix (us)`` and ``P2P=Enabled Latency Matrix (us)`` / ``... (P2P Writes) ...``.

Formats: tests/fixtures/p2p/ (Dell EMC Ready Solutions for AI and a current public output, sources in SOURCES.md there).

Verdict: with P2P enabled a pair that can access its peer copies GPU to GPU instead of staging through host
memory, so its P2P=Enabled bandwidth must exceed the P2P=Disabled one of the same pair. How much it must
exceed it is a per-SKU figure: REFERENCES holds, per GPU product, the lowest enabled/disabled ratio over
the peer pairs of a reference run (a reference document's or a published one, named with it). A pair passes at
``tolerance`` (0.9) times that ratio; a SKU without a reference must at least not be slower with P2P than
without it (ratio 1, a logical floor, not a vendor figure). A site threshold in GB/s
(``min_unidirectional_gbyte_per_s``, ``min_bidirectional_gbyte_per_s``) is judged as well where given.

Stdlib only, Python 3.8; gpuforge_errors and gpuforge_options ship with it.
"""

from __future__ import annotations

import re

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import FAIL, PASS, bench_check
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import worst_status as overall_status
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_options import (
    boolean,
    integer,
    number,
    record,
    string,
)

__all__ = [
    "EXPECT",
    "REFERENCES",
    "judge_p2p",
    "nvlinks_by_pair",
    "overall_status",
    "pair_ratios",
    "parse_p2p",
]


# The p2p_bandwidth module's `expect` option.
EXPECT = record(
    {
        "sku": string(),
        "gpus": integer(minimum=1),
        "min_ratio": number(above=0),
        "tolerance": number(above=0, maximum=1),
        "min_unidirectional_gbyte_per_s": number(above=0),
        "min_bidirectional_gbyte_per_s": number(above=0),
        "require_p2p": boolean(),
    }
)

# Per GPU product: the lowest P2P=Enabled / P2P=Disabled bandwidth ratio over the peer pairs of a reference
# run, unidirectional and bidirectional (tests/unit/module_utils/test_gpuforge_p2p.py recomputes each from
# its fixture).
REFERENCES = {
    # Dell EMC Ready Solutions for AI Figure 41: PowerEdge C4140, 4x V100-SXM2 over NVLink,
    # CUDA 9.1 samples. Lowest pairs: 1->2 unidirectional 34.18 / 9.96 GB/s, 0->1 bidirectional 75.25 / 10.42.
    # Every pair of that system has two NVLinks (NV2). A hybrid cube-mesh (DGX-1, HGX-1) also has NV1 pairs, which
    # move about half as much over the same host staging: with the node's `nvidia-smi topo -m`, each pair needs the
    # ratio per NVLink (nvlinks_per_pair) times its own NVLink count (judge_p2p's nvlinks).
    "Tesla V100-SXM2-16GB": {
        "uni": 3.43,
        "bi": 7.22,
        "nvlinks_per_pair": 2,
        "source": "Dell EMC Ready Solutions for AI Figure 41, p2pBandwidthLatencyTest on 4x V100-SXM2",
    },
    # github.com/LLMServe/DistServe/issues/3 (comment of 2024-06-11): 8x A100-SXM4-80GB, NVSwitch (NV12),
    # current cuda-samples. Lowest pairs: 2->0 unidirectional (P2P writes) 269.09 / 20.21 GB/s, 3->0
    # bidirectional 417.51 / 28.45 GB/s.
    "NVIDIA A100-SXM4-80GB": {
        "uni": 13.31,
        "bi": 14.68,
        "nvlinks_per_pair": 12,
        "source": "github.com/LLMServe/DistServe/issues/3, p2pBandwidthLatencyTest on 8x A100-SXM4-80GB",
    },
}
DEFAULT_TOLERANCE = 0.9

_TITLES = (
    (re.compile(r"^P2P Connectivity Matrix"), "connectivity"),
    (re.compile(r"^Unidirectional P2P=Disabled Bandwidth"), "uni_disabled"),
    (re.compile(r"^Unidirectional P2P=Enabled Bandwidth \(P2P Reads\)"), "uni_enabled_reads"),
    (re.compile(r"^Unidirectional P2P=Enabled Bandwidth"), "uni_enabled"),
    (re.compile(r"^Bidirectional P2P=Disabled Bandwidth"), "bi_disabled"),
    (re.compile(r"^Bidirectional P2P=Enabled Bandwidth"), "bi_enabled"),
    (re.compile(r"^P2P=Disabled Latency"), "latency_disabled"),
    (re.compile(r"^P2P=Enabled Latency \(P2P Reads\)"), "latency_enabled_reads"),
    (re.compile(r"^P2P=Enabled Latency"), "latency_enabled"),
)
_DEVICE = re.compile(r"^Device:\s*(\d+),\s*(.*?),\s*pciBusID:\s*([0-9a-fA-F]+),\s*pciDeviceID:\s*([0-9a-fA-F]+),")
_DOMAIN = re.compile(r"pciDomainID:\s*([0-9a-fA-F]+)")
_ACCESS = re.compile(r"^Device=(\d+)\s+(CAN|CANNOT)\s+Access Peer Device=(\d+)")
_HEADER = re.compile(r"^(D\\D|GPU|CPU)((?:\s+\d+)+)\s*$")
_ROW = re.compile(r"^(\d+)((?:\s+-?\d+(?:\.\d+)?)+)\s*$")


def parse_p2p(text: str) -> dict:
    """Devices, peer access and every matrix (rows in device order; latency matrices also ``<name>_cpu``).

    Raises ParseError when no matrix is found. A row whose width differs from its header's, or a matrix
    with missing rows (a truncated output), is recorded in ``errors`` and that matrix is dropped.
    """
    devices, access, matrices, errors = [], [], {}, []
    current, columns, rows = None, None, []

    def close():
        if current is None or columns is None:
            return
        if len(rows) != len(columns) or [index for index, _values in rows] != list(columns):
            errors.append(f"{current}: {len(rows)} rows for {len(columns)} devices (truncated output?)")
            return
        matrices[current] = [values for _index, values in rows]

    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        title = next((key for pattern, key in _TITLES if pattern.match(line)), None)
        if title:
            close()
            current, columns, rows = title, None, []
            continue
        match = _DEVICE.match(line)
        if match:
            domain = _DOMAIN.search(line)
            devices.append(
                {
                    "index": int(match.group(1)),
                    "name": match.group(2).strip(),
                    "pci_bus_id": match.group(3).lower(),
                    "pci_device_id": match.group(4).lower(),
                    "pci_domain_id": domain.group(1).lower() if domain else None,
                }
            )
            continue
        match = _ACCESS.match(line)
        if match:
            access.append({"from": int(match.group(1)), "to": int(match.group(3)), "can": match.group(2) == "CAN"})
            continue
        if current is None:
            continue
        match = _HEADER.match(line)
        if match:
            if match.group(1) == "CPU":  # the latency matrix's CPU block follows its GPU block
                close()
                current = f"{current}_cpu" if not current.endswith("_cpu") else current
                rows = []
            columns = [int(word) for word in match.group(2).split()]
            continue
        match = _ROW.match(line)
        if match and columns is not None:
            values = [float(word) for word in match.group(2).split()]
            if len(values) != len(columns):
                errors.append(f"{current}: row {match.group(1)} has {len(values)} values for {len(columns)} devices")
                columns = None  # the matrix is dropped; rows until the next title are ignored
                continue
            if current == "connectivity":
                values = [int(value) for value in values]
            rows.append((int(match.group(1)), values))
            continue
    close()
    if not matrices:
        raise ParseError(
            "no p2pBandwidthLatencyTest matrix found (no 'P2P Connectivity Matrix' or 'Bandwidth Matrix' section)"
        )
    names = sorted({device["name"] for device in devices})
    return {
        "kind": "p2p",
        "devices": devices,
        "gpus": len(devices) or len(next(iter(matrices.values()))),
        "sku": names[0] if len(names) == 1 else None,
        "access": access,
        "matrices": matrices,
        "errors": errors,
    }


def _peer_pairs(result: dict) -> list:
    """Ordered pairs (i, j), i != j, that can access each other: the connectivity matrix, else the
    ``CAN Access Peer`` lines."""
    connectivity = result["matrices"].get("connectivity")
    size = result["gpus"]
    pairs = []
    for i in range(size):
        for j in range(size):
            if i == j:
                continue
            if connectivity is not None:
                if connectivity[i][j]:
                    pairs.append((i, j))
            elif any(a["from"] == i and a["to"] == j and a["can"] for a in result["access"]):
                pairs.append((i, j))
    return pairs


def pair_ratios(result: dict, kind: str) -> list:
    """[{pair, enabled_gbyte_per_s, disabled_gbyte_per_s, ratio}] over the peer pairs, for kind ``uni`` or ``bi``."""
    enabled = result["matrices"].get(f"{kind}_enabled")
    disabled = result["matrices"].get(f"{kind}_disabled")
    if enabled is None or disabled is None:
        return []
    rows = []
    for i, j in _peer_pairs(result):
        on, off = enabled[i][j], disabled[i][j]
        rows.append(
            {
                "pair": f"{i}->{j}",
                "enabled_gbyte_per_s": on,
                "disabled_gbyte_per_s": off,
                "ratio": round(on / off, 2) if off > 0 else None,
            }
        )
    return rows


_REMEDY = (
    "P2P is enabled but slow between these GPUs: check nvidia-smi topo -m (NVLink vs PCIe), nvidia-smi nvlink "
    "--status for down links, and on PCIe systems that ACS/IOMMU is not forcing peer traffic through the root "
    "complex"
)


_NVLINK_CELL = re.compile(r"^NV(\d+)$")


def nvlinks_by_pair(topology: dict) -> dict:
    """{"i->j": NVLink count} of every GPU pair from parse_topo_matrix's result (``nvidia-smi topo -m``): a cell
    ``NV<k>`` is k links, any other (PIX, PXB, PHB, NODE, SYS) none."""
    links = {}
    for gpu in topology.get("gpus", []):
        for peer, cell in gpu["links"].items():
            match = _NVLINK_CELL.match(cell)
            links[f"{gpu['index']}->{int(peer[3:])}"] = int(match.group(1)) if match else 0
    return links


def judge_p2p(result: dict, expect: dict | None = None, nvlinks: dict | None = None) -> list:
    """Checks: device count, peer access (``require_p2p``), and per kind (uni, bi) the enabled/disabled
    ratio of every peer pair and the site's absolute floor. OptionError for a malformed expect.

    nvlinks ({"i->j": count}, nvlinks_by_pair) scales a SKU reference to each pair's NVLink count, so the NV1 pairs
    of a hybrid cube-mesh are not held to the NV2 figure; a pair without NVLink needs the logical floor 1."""
    expect = EXPECT("expect", expect or {})
    checks = []
    if expect.get("gpus") is not None:
        status = PASS if result["gpus"] >= expect["gpus"] else FAIL
        checks.append(
            bench_check(
                "p2p_gpus",
                status,
                result["gpus"],
                f">= {expect['gpus']}",
                "" if status == PASS else "the test saw fewer GPUs than the node has: check CUDA_VISIBLE_DEVICES",
            )
        )
    if expect.get("require_p2p"):
        size = result["gpus"]
        pairs = set(_peer_pairs(result))
        missing = [f"{i}->{j}" for i in range(size) for j in range(size) if i != j and (i, j) not in pairs]
        checks.append(
            bench_check(
                "p2p_access",
                FAIL if missing else PASS,
                missing or "every pair",
                "every GPU pair can access its peer",
                ""
                if not missing
                else "peer access is off for these pairs: check nvidia-smi topo -p2p r, the IOMMU/ACS settings and "
                "that the GPUs share an NVLink or PCIe switch",
            )
        )
    sku = expect.get("sku") or result.get("sku")
    reference = REFERENCES.get(sku or "")
    tolerance = expect.get("tolerance", DEFAULT_TOLERANCE)
    for kind, floor_key in (("uni", "min_unidirectional_gbyte_per_s"), ("bi", "min_bidirectional_gbyte_per_s")):
        rows = pair_ratios(result, kind)
        if not rows:
            continue
        if expect.get("min_ratio") is not None:
            needed = dict.fromkeys((row["pair"] for row in rows), expect["min_ratio"])
            wanted = f"{expect['min_ratio']:g} x P2P=Disabled bandwidth for every peer pair (min_ratio)"
        elif reference and nvlinks and reference.get("nvlinks_per_pair"):
            per_link = reference[kind] * tolerance / reference["nvlinks_per_pair"]
            needed = {row["pair"]: max(1.0, round(per_link * nvlinks.get(row["pair"], 0), 2)) for row in rows}
            wanted = (
                f"{per_link:.2f} x P2P=Disabled bandwidth per NVLink of the pair (nvidia-smi topo -m), at least 1: "
                f"{tolerance:g} x {reference[kind]} over the {reference['nvlinks_per_pair']} NVLinks per pair of "
                f"{reference['source']}"
            )
        elif reference:
            needed = dict.fromkeys((row["pair"] for row in rows), round(reference[kind] * tolerance, 2))
            wanted = (
                f"{round(reference[kind] * tolerance, 2):g} x P2P=Disabled bandwidth for every peer pair "
                f"({tolerance:g} x {reference[kind]} from {reference['source']})"
            )
        else:
            needed = dict.fromkeys((row["pair"] for row in rows), 1.0)
            wanted = (
                f"1 x P2P=Disabled bandwidth for every peer pair (no reference for {sku or 'this GPU'}: enabled must "
                "not be slower than disabled)"
            )
        slow = [row for row in rows if row["ratio"] is None or row["ratio"] < needed[row["pair"]]]
        worst = min(rows, key=lambda row: -1 if row["ratio"] is None else row["ratio"] / needed[row["pair"]])
        checks.append(
            bench_check(
                f"p2p_{kind}_ratio",
                FAIL if slow else PASS,
                {
                    "worst": {**worst, "needed_ratio": needed[worst["pair"]]},
                    "slow_pairs": [row["pair"] for row in slow],
                },
                f"P2P=Enabled >= {wanted}",
                _REMEDY if slow else "",
            )
        )
        if expect.get(floor_key) is not None:
            floor = expect[floor_key]
            low = [row for row in rows if row["enabled_gbyte_per_s"] < floor]
            checks.append(
                bench_check(
                    f"p2p_{kind}_gbyte_per_s",
                    FAIL if low else PASS,
                    {
                        "lowest": min(rows, key=lambda row: row["enabled_gbyte_per_s"]),
                        "slow_pairs": [r["pair"] for r in low],
                    },
                    f">= {floor:g} GB/s P2P=Enabled for every peer pair ({floor_key}, site threshold)",
                    _REMEDY if low else "",
                )
            )
    return checks
