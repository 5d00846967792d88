"""Simulated p2pBandwidthLatencyTest, the CUDA samples' GPU peer-to-peer test: `p2pBandwidthLatencyTest [--help]
[--p2p_read] [--sm_copy] [--numElems=N]`.

Output format: that of the program's printf statements in NVIDIA/cuda-samples, file
Samples/5_Domain_Specific/p2pBandwidthLatencyTest/p2pBandwidthLatencyTest.cu, at tags v12.5 (commit
9c688d7ff78455ed42e345124d1495aad6bf66de) and v13.0 (commit 3f1c50965017932fc81e6d94a3fc9e04c105b312): both print the
same lines (only their source formatting differs). The source archives gpuforge's benchmark_tools role builds from are
the same tags. Carried over as facts (the format, not the code):
* `[<sample name>]`, then per device `Device: %d, %s, pciBusID: %x, pciDeviceID: %x, pciDomainID:%x`;
* per ordered pair i != j `Device=%d CAN|CANNOT Access Peer Device=%d`, then the note on the memcpy fallback;
* `P2P Connectivity Matrix`: header `     D\\D` + `%6d` per column; rows `%6d\\t` + `%6d` per column (1 on the
  diagonal);
* bandwidth matrices (GB/s, 10^9 bytes): header `   D\\D` + `%6d ` per column; rows `%6d ` + `%6.02f ` per column;
  in order Unidirectional P2P=Disabled, P2P=Enabled (P2P Writes), with --p2p_read also (P2P Reads), Bidirectional
  P2P=Disabled and P2P=Enabled;
* latency matrices (us): a `   GPU` block and, after a blank line, a `   CPU` block, each laid out as the bandwidth
  ones; P2P=Disabled, P2P=Enabled (P2P Writes), with --p2p_read also (P2P Reads);
* the closing note; exit 0. A CUDA error prints `Cuda failure <file>:<line>: '<error string>'` and exits 1
  (EXIT_FAILURE); here: the driver is not loaded (cudaErrorNoDevice's string), at the device count's check.
Options are matched as the samples' checkCmdLineFlag matches them (leading dashes dropped, the name before any `=`,
case ignored);
others are ignored, as the program ignores them.

Values are lab values derived from the hardware document, not measurements, calibrated on the one real run the
project holds with every figure (Dell EMC Ready Solutions for AI Figure 41, PowerEdge C4140 4x V100-SXM2 NV2, CUDA
9.1 samples; tests/fixtures/p2p/SOURCES.md):
* GPUs: the driver's (gpu_missing dropped, renumbered; a gpu_fallen_off_bus GPU is not enumerated, as nvbandwidth's
  simulator does), in PCI order, CUDA_VISIBLE_DEVICES applied (indices);
* peer access: a pair with an active NVLink (NV<k> in the profile's topology, less the links an `nvlink_inactive`
  fault takes down) can access its peer; a pair without one can over PCIe when both GPUs sit under the same CPU socket
  (NUMA node); pairs across sockets (`SYS`) cannot - as on DGX-1, whose cross-socket pairs have no peer access;
* P2P=Disabled (staged through host memory): the slower GPU's host link (nvbandwidth's simulator: PCIe generation x
  width x 0.83, `pcie_link_degraded` and `host_bandwidth_degraded` applied) x 0.76 unidirectional (Dell: 9.9 GB/s
  on PCIe Gen3 x16) and x 0.8 bidirectional (Dell: 10.4 GB/s);
* P2P=Enabled over NVLink: active links x the profile's per-link rate (`nvlink.speed_gbyte_per_s`) x 0.925 (Dell:
  47.7 GB/s over NV2 of 25.781 GB/s links); over PCIe: the slower host link x 0.8; bidirectional 2 x unidirectional
  x 0.9 (Dell: 75-96 GB/s over NV2); a pair without peer access copies as with P2P disabled;
* the diagonal (a GPU to itself): the GPU's memory bandwidth (product datasheet, MEMORY_GBYTE_PER_S) x 0.8;
* latencies: constants of the same captures (local 3.6 us, staged 18.3 us, a peer write 6.6 us; CPU side 2.3, 7.5,
  2.2 us as the current samples' CPU block of the DistServe capture).
Link numbers of an `nvlink_inactive` fault map to peers as the lab lays them out: a GPU's links, in order, go to its
NVLink peers in GPU order, NV<k> taking k consecutive numbers (DGX-1 GPU 7: link 0 to GPU 3, 1-2 to GPU 4, 3 to
GPU 5, 4-5 to GPU 6). A pair's active link count is the lower of its two ends'.
"""

from __future__ import annotations

import os
import sys

from gpuforge_sim import driver_state
from gpuforge_sim.hardware import load_hardware, visible_gpus
from gpuforge_sim.nvbandwidth import host_gbyte_per_s

SAMPLE_NAME = "P2P (Peer-to-Peer) GPU Bandwidth Latency Test"
# A CUDA error names the source file as the build saw it (__FILE__; the stand-in has no build, so the path inside the
# cuda-samples tree) and the line of the check: v13.0's check of the device count.
SOURCE_FILE = "Samples/5_Domain_Specific/p2pBandwidthLatencyTest/p2pBandwidthLatencyTest.cu"
DEVICE_COUNT_CHECK_LINE = 610
NO_DEVICE = "no CUDA-capable device is detected"

STAGED_UNI = 0.76
STAGED_BI = 0.8
NVLINK_PER_LINK_EFFICIENCY = 0.925
PCIE_P2P_EFFICIENCY = 0.8
BIDIRECTIONAL_EFFICIENCY = 0.9
LOCAL_COPY_EFFICIENCY = 0.8
# Peak memory bandwidth in GB/s by GPU architecture, from NVIDIA's datasheets of the lab's products: Tesla V100 SXM2
# 900, Tesla T4 320, A100 80GB SXM 2039, H100 SXM 3350.
MEMORY_GBYTE_PER_S = {"Volta": 900.0, "Turing": 320.0, "Ampere": 2039.0, "Hopper": 3350.0}
LATENCY_US = {"local": 3.6, "staged": 18.3, "peer": 6.6}
CPU_LATENCY_US = {"local": 2.3, "staged": 7.5, "peer": 2.2}


def _flag(argv: list, name: str) -> str | None:
    """The argument naming option `name` as the samples' checkCmdLineFlag finds it: leading dashes dropped, the part
    before any `=` equal to the name, case ignored (``--name``, ``-name``, ``name=v``)."""
    for arg in argv:
        stripped = arg.lstrip("-")
        if stripped.split("=", 1)[0].lower() == name.lower():
            return stripped
    return None


def _help(out) -> None:
    out.write("Usage:  p2pBandwidthLatencyTest [OPTION]...\n")
    out.write("Tests bandwidth/latency of GPU pairs using P2P and without P2P\n\n")
    out.write("Options:\n")
    out.write("--help\t\tDisplay this help menu\n")
    out.write(
        "--p2p_read\tUse P2P reads for data transfers between GPU pairs and show corresponding results.\n"
        " \t\tDefault used is P2P write operation.\n"
    )
    out.write("--sm_copy                      Use SM intiated p2p transfers instead of Copy Engine\n")
    out.write("--numElems=<NUM_OF_INT_ELEMS>  Number of integer elements to be used in p2p copy.\n")


def _cuda_devices(hw: dict) -> list:
    """The GPUs CUDA enumerates, renumbered from 0: the driver's, less a GPU fallen off the bus, CUDA_VISIBLE_DEVICES
    applied (indices; an invalid index ends the list, as CUDA does)."""
    gpus = [g for g in visible_gpus(hw) if not g.get("fallen_off_bus")]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        chosen = []
        for item in visible.split(","):
            item = item.strip()
            if not item.isdigit() or int(item) >= len(gpus):
                break
            chosen.append(gpus[int(item)])
        gpus = chosen
    return gpus


def nvlink_peers(hw: dict, profile_index: int) -> dict:
    """Peer profile index -> the link numbers of GPU `profile_index` that lead to it (the lab's layout: links in
    order to the NVLink peers in GPU order, NV<k> taking k numbers)."""
    topology = (hw.get("gpu") or {}).get("topology") or []
    row = topology[profile_index] if profile_index < len(topology) else []
    peers, link = {}, 0
    for peer, code in enumerate(row):
        code = str(code)
        if peer != profile_index and code.startswith("NV") and code[2:].isdigit():
            count = int(code[2:])
            peers[peer] = list(range(link, link + count))
            link += count
    return peers


def active_links(hw: dict, a: dict, b: dict) -> int:
    """NVLink links up between two GPUs: the lower of the two ends' counts (a link down at one end is down)."""
    a_links = nvlink_peers(hw, a["profile_index"]).get(b["profile_index"], [])
    b_links = nvlink_peers(hw, b["profile_index"]).get(a["profile_index"], [])
    a_up = [n for n in a_links if n not in a.get("nvlink_inactive", [])]
    b_up = [n for n in b_links if n not in b.get("nvlink_inactive", [])]
    return min(len(a_up), len(b_up))


def can_access(hw: dict, a: dict, b: dict) -> bool:
    return active_links(hw, a, b) > 0 or a.get("numa", 0) == b.get("numa", 0)


def _local_gbyte_per_s(hw: dict) -> float:
    architecture = str((hw.get("gpu") or {}).get("architecture") or "")
    return MEMORY_GBYTE_PER_S.get(architecture, 300.0) * LOCAL_COPY_EFFICIENCY


def bandwidth(hw: dict, a: dict, b: dict, p2p: bool, bidirectional: bool) -> float:
    """GB/s of copies from a to b (or both ways) in the lab."""
    if a is b:
        local = _local_gbyte_per_s(hw)
        return local * (1.0 if not bidirectional else 1.02)
    host = min(host_gbyte_per_s(hw, a), host_gbyte_per_s(hw, b))
    if not p2p or not can_access(hw, a, b):
        return host * (STAGED_BI if bidirectional else STAGED_UNI)
    links = active_links(hw, a, b)
    if links:
        speed = float(((hw.get("gpu") or {}).get("nvlink") or {}).get("speed_gbyte_per_s") or 25.0)
        uni = links * speed * NVLINK_PER_LINK_EFFICIENCY
    else:
        uni = host * PCIE_P2P_EFFICIENCY
    return uni * 2 * BIDIRECTIONAL_EFFICIENCY if bidirectional else uni


def latency(hw: dict, a: dict, b: dict, p2p: bool, table: dict) -> float:
    if a is b:
        return table["local"]
    return table["peer"] if p2p and can_access(hw, a, b) else table["staged"]


def _matrix(out, corner: str, gpus: list, value) -> None:
    # printf's %6d and %6.02f (the precision is 2), each cell followed by a space
    out.write(corner + "".join(f"{j:6d} " for j in range(len(gpus))) + "\n")
    for i, a in enumerate(gpus):
        out.write(f"{i:6d} " + "".join(f"{value(a, b):6.2f} " for b in gpus) + "\n")


def _latency_matrix(out, hw: dict, gpus: list, p2p: bool) -> None:
    _matrix(out, "   GPU", gpus, lambda a, b: latency(hw, a, b, p2p, LATENCY_US))
    out.write("\n")
    _matrix(out, "   CPU", gpus, lambda a, b: latency(hw, a, b, p2p, CPU_LATENCY_US))


def _device_line(index: int, name: str, gpu: dict) -> str:
    domain, bus, rest = gpu["bus_id"].split(":")
    # CUDA's pciBusID, pciDeviceID (the device number on the bus) and pciDomainID, printed %x
    bus_id, device_id, domain_id = int(bus, 16), int(rest.split(".")[0], 16), int(domain, 16)
    return f"Device: {index}, {name}, pciBusID: {bus_id:x}, pciDeviceID: {device_id:x}, pciDomainID:{domain_id:x}\n"


def main(argv: list | None = None, out=None, err=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    out = out or sys.stdout
    if "nvidia" not in driver_state.loaded_modules():
        out.write(f"Cuda failure {SOURCE_FILE}:{DEVICE_COUNT_CHECK_LINE}: '{NO_DEVICE}'\n")
        return 1
    if _flag(argv, "help"):
        _help(out)
        return 0
    p2p_read = _flag(argv, "p2p_read") is not None
    hw = load_hardware()
    gpus = _cuda_devices(hw)
    name = str((hw.get("gpu") or {}).get("product_name") or "NVIDIA GPU")
    out.write(f"[{SAMPLE_NAME}]\n")
    for index, gpu in enumerate(gpus):
        out.write(_device_line(index, name, gpu))
    for i, a in enumerate(gpus):
        for j, b in enumerate(gpus):
            if i != j:
                out.write(f"Device={i} {'CAN' if can_access(hw, a, b) else 'CANNOT'} Access Peer Device={j}\n")
    out.write(
        "\n***NOTE: In case a device doesn't have P2P access to other one, it falls back to normal memcopy procedure.\n"
        "So you can see lesser Bandwidth (GB/s) and unstable Latency (us) in those cases.\n\n"
    )
    out.write("P2P Connectivity Matrix\n")
    out.write("     D\\D" + "".join(f"{j:6d}" for j in range(len(gpus))) + "\n")
    for i, a in enumerate(gpus):
        cells = "".join(f"{1 if a is b or can_access(hw, a, b) else 0:6d}" for b in gpus)
        out.write(f"{i:6d}\t" + cells + "\n")
    bandwidths = [
        ("Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)", False, False),
        ("Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)", True, False),
    ]
    if p2p_read:
        bandwidths.append(("Unidirectional P2P=Enabled Bandwidth (P2P Reads) Matrix (GB/s)", True, False))
    bandwidths += [
        ("Bidirectional P2P=Disabled Bandwidth Matrix (GB/s)", False, True),
        ("Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)", True, True),
    ]
    for title, p2p, bidirectional in bandwidths:
        out.write(title + "\n")
        _matrix(out, "   D\\D", gpus, lambda a, b, p=p2p, bi=bidirectional: bandwidth(hw, a, b, p, bi))
    latencies = [("P2P=Disabled Latency Matrix (us)", False), ("P2P=Enabled Latency (P2P Writes) Matrix (us)", True)]
    if p2p_read:
        latencies.append(("P2P=Enabled Latency (P2P Reads) Matrix (us)", True))
    for title, p2p in latencies:
        out.write(title + "\n")
        _latency_matrix(out, hw, gpus, p2p)
    out.write(
        "\nNOTE: The CUDA Samples are not meant for performance measurements. "
        "Results may vary when GPU Boost is enabled.\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
