"""Simulated p2pBandwidthLatencyTest (lab/sim/gpuforge_sim/p2p_bandwidth_latency.py): its output is the CUDA samples'
format byte for byte (each line re-printed through the program's printf formats, and line for line the structure of
the real capture in tests/fixtures/p2p), the project's parser reads it, and the p2p judge with the lab inventory's
thresholds passes every healthy lab node and fails the one whose NVLink is down, naming the pair - on every node of
lab/specs/all-faults.yml and the demo's spec, so no other fault raises a false alarm."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_nvidia_smi import parse_topo_matrix
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_p2p import (
    REFERENCES,
    judge_p2p,
    nvlinks_by_pair,
    parse_p2p,
)
from gpuforge_sim import driver_state
from gpuforge_sim import nvidia_smi as nvidia_smi_sim
from gpuforge_sim import p2p_bandwidth_latency as sim

from gpuforge.lab import spec
from gpuforge.lab.profiles import hardware_document, load_profile

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "fixtures" / "p2p" / "distserve_issue3_8xa100_sxm4_80gb.txt"
LAB_EXPECT = yaml.safe_load((ROOT / "inventories/lab/group_vars/all/benchmark.yml").read_text(encoding="utf-8"))[
    "gpuforge_bench_p2p_expect"
]

# The program's printf formats (p2pBandwidthLatencyTest.cu of cuda-samples v12.5 and v13.0: the same in both), one per
# kind of line, as data: every line the simulator prints must be its own values re-printed through one of them.
DEVICE = "Device: %d, %s, pciBusID: %x, pciDeviceID: %x, pciDomainID:%x"
ACCESS = "Device=%d %s Access Peer Device=%d"
CONNECTIVITY_HEADER, CONNECTIVITY_ROW = ("     D\\D", "%6d"), ("%6d\t", "%6d")
MATRIX_HEADERS = {"   D\\D": "%6d ", "   GPU": "%6d ", "   CPU": "%6d "}
MATRIX_ROW = ("%6d ", "%6.02f ")
TITLES = (
    "P2P Connectivity Matrix",
    "Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)",
    "Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)",
    "Unidirectional P2P=Enabled Bandwidth (P2P Reads) Matrix (GB/s)",
    "Bidirectional P2P=Disabled Bandwidth Matrix (GB/s)",
    "Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)",
    "P2P=Disabled Latency Matrix (us)",
    "P2P=Enabled Latency (P2P Writes) Matrix (us)",
    "P2P=Enabled Latency (P2P Reads) Matrix (us)",
)
NOTES = (
    "[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]",
    "***NOTE: In case a device doesn't have P2P access to other one, it falls back to normal memcopy procedure.",
    "So you can see lesser Bandwidth (GB/s) and unstable Latency (us) in those cases.",
    "NOTE: The CUDA Samples are not meant for performance measurements. Results may vary when GPU Boost is enabled.",
)


def _node(tmp_path, monkeypatch, hardware: dict, loaded=True):
    (tmp_path / "lib" / "modules").mkdir(parents=True, exist_ok=True)
    (tmp_path / "lib" / "modules" / "nvidia.ko").write_text("{}")
    (tmp_path / "hardware.json").write_text(json.dumps(hardware))
    monkeypatch.setenv("GPUFORGE_LAB_RUN", str(tmp_path / "run"))
    monkeypatch.setenv("GPUFORGE_LAB_LIB", str(tmp_path / "lib"))
    monkeypatch.setenv("GPUFORGE_LAB_HARDWARE", str(tmp_path / "hardware.json"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    if loaded:
        driver_state.load_module("nvidia")


def _profile(tmp_path, monkeypatch, profile, faults=None, loaded=True):
    _node(tmp_path, monkeypatch, hardware_document(load_profile(profile), faults or []), loaded)


def _run(argv=()):
    out = io.StringIO()
    rc = sim.main(list(argv), out)
    return rc, out.getvalue()


def _reprinted(line: str) -> str | None:
    """The line printed again through the printf format of its kind (None: no format of the program prints it)."""
    if line in NOTES or line in TITLES or line == "":
        return line
    match = re.fullmatch(
        r"Device: (\d+), (.+), pciBusID: ([0-9a-f]+), pciDeviceID: ([0-9a-f]+), pciDomainID:([0-9a-f]+)", line
    )
    if match:
        index, name, bus, device, domain = match.groups()
        return DEVICE % (int(index), name, int(bus, 16), int(device, 16), int(domain, 16))
    match = re.fullmatch(r"Device=(\d+) (CAN|CANNOT) Access Peer Device=(\d+)", line)
    if match:
        return ACCESS % (int(match.group(1)), match.group(2), int(match.group(3)))
    if line.startswith(CONNECTIVITY_HEADER[0]):
        columns = line[len(CONNECTIVITY_HEADER[0]) :].split()
        return CONNECTIVITY_HEADER[0] + "".join(CONNECTIVITY_HEADER[1] % int(c) for c in columns)
    for corner, cell in MATRIX_HEADERS.items():
        if line.startswith(corner):
            return corner + "".join(cell % int(c) for c in line[len(corner) :].split())
    if "\t" in line:
        index, cells = line.split("\t")
        return CONNECTIVITY_ROW[0] % int(index) + "".join(CONNECTIVITY_ROW[1] % int(c) for c in cells.split())
    words = line.split()
    if words and words[0].isdigit():
        return MATRIX_ROW[0] % int(words[0]) + "".join(MATRIX_ROW[1] % float(w) for w in words[1:])
    return None


def _skeleton(text: str) -> list[str]:
    """The line structure whatever the values, tabs or trailing spaces: the titles and notes as they are, a device
    line, an access line, a header or a row with its cell count."""
    lines = []
    for line in text.splitlines():
        line = line.rstrip()
        if line in TITLES or line in NOTES or not line:
            lines.append(line)
        elif line.startswith("Device: "):
            lines.append("device")
        elif line.startswith("Device="):
            lines.append("access " + line.split()[1])
        elif line.split()[0] in ("D\\D", "GPU", "CPU"):
            lines.append(f"header {line.split()[0]} {len(line.split()) - 1}")
        else:
            lines.append(f"row {len(line.split()) - 1}")
    return lines


@pytest.mark.parametrize("profile", ["dgx1-v100-edr", "dgx-h100-ndr", "poweredge-c4140-v100", "vsphere-t4-vgpu-roce"])
@pytest.mark.parametrize("argv", [[], ["--p2p_read"]])
def test_every_line_is_the_programs_printf(tmp_path, monkeypatch, profile, argv):
    _profile(tmp_path, monkeypatch, profile)
    rc, out = _run(argv)
    assert rc == 0 and out.endswith("\n")
    lines = out.split("\n")[:-1]
    assert [line for line in lines if _reprinted(line) != line] == []
    # the cells' layout: matrix rows end in a space (`%6.02f `), connectivity rows hold a tab, headers are as printed
    assert "     D\\D     0" in out and "\n     0\t     1" in out
    assert any(line.startswith("     0 ") and line.endswith(" ") for line in lines)


def test_structure_is_the_real_captures(tmp_path, monkeypatch):
    """The DistServe capture (current samples, 8 GPUs; copied from an issue thread, which expanded the connectivity
    rows' tabs and dropped trailing spaces) has the simulator's structure line for line on an 8-GPU node."""
    _profile(tmp_path, monkeypatch, "dgx-h100-ndr")
    real = _skeleton(FIXTURE.read_text(encoding="utf-8"))
    simulated = _skeleton(_run()[1])
    assert simulated == real
    assert len(real) == 161  # the whole capture, each line matched


def test_the_parser_reads_every_matrix(tmp_path, monkeypatch):
    _profile(tmp_path, monkeypatch, "dgx1-v100-edr")
    parsed = parse_p2p(_run(["--p2p_read"])[1])
    assert parsed["errors"] == [] and parsed["gpus"] == 8 and parsed["sku"] == "Tesla V100-SXM2-16GB"
    assert sorted(parsed["matrices"]) == sorted(
        [
            "connectivity",
            "uni_disabled",
            "uni_enabled",
            "uni_enabled_reads",
            "bi_disabled",
            "bi_enabled",
            "latency_disabled",
            "latency_disabled_cpu",
            "latency_enabled",
            "latency_enabled_cpu",
            "latency_enabled_reads",
            "latency_enabled_reads_cpu",
        ]
    )
    profile = load_profile("dgx1-v100-edr")["gpu"]
    assert [d["pci_bus_id"] for d in parsed["devices"]] == ["6", "7", "a", "b", "85", "86", "89", "8a"]
    assert parsed["devices"][0]["pci_domain_id"] == "0" and parsed["devices"][0]["pci_device_id"] == "0"
    # peer access follows the hybrid cube-mesh: NVLink pairs can, cross-socket pairs without NVLink (SYS) cannot
    topology = profile["topology"]
    for i in range(8):
        for j in range(8):
            expected = 1 if i == j or str(topology[i][j]).startswith("NV") else 0
            assert parsed["matrices"]["connectivity"][i][j] == expected, (i, j)
    uni = parsed["matrices"]["uni_enabled"]
    assert (uni[0][1], uni[0][3], uni[0][5]) == (23.85, 47.69, 9.94)  # NV1, NV2 (25.781 GB/s x 0.925 per link), staged


def test_calibration_is_the_dellemc_capture(tmp_path, monkeypatch):
    """On the PowerEdge C4140 (4x V100 over NV2, PCIe Gen3 x16) the simulator's figures are those of Dell EMC's run
    (tests/fixtures/p2p): staged copies 9.9 / 10.4 GB/s, peer copies over NV2 47.7 GB/s one way."""
    _profile(tmp_path, monkeypatch, "poweredge-c4140-v100")
    parsed = parse_p2p(_run()[1])
    real = parse_p2p((ROOT / "tests/fixtures/p2p/dellemc_c4140_4xv100_sxm2_cuda91.txt").read_text(encoding="utf-8"))
    for matrix, tolerance in (("uni_disabled", 0.02), ("bi_disabled", 0.02), ("uni_enabled", 0.3)):
        assert parsed["matrices"][matrix][0][1] == pytest.approx(real["matrices"][matrix][0][1], rel=tolerance)
    assert judge_p2p(parsed, {})[0]["status"] == "PASS"  # the SKU reference of that capture


def test_driver_not_loaded_is_a_cuda_failure(tmp_path, monkeypatch):
    _profile(tmp_path, monkeypatch, "dgx1-v100-edr", loaded=False)
    rc, out = _run(["--help"])
    assert rc == 1
    assert out == (
        "Cuda failure Samples/5_Domain_Specific/p2pBandwidthLatencyTest/p2pBandwidthLatencyTest.cu:610: "
        "'no CUDA-capable device is detected'\n"
    )


def test_options_as_the_samples_match_them(tmp_path, monkeypatch):
    _profile(tmp_path, monkeypatch, "poweredge-c4140-v100")
    assert _run(["-HELP"])[1].startswith("Usage:  p2pBandwidthLatencyTest [OPTION]...\n")
    assert "(P2P Reads)" in _run(["p2p_read"])[1] and "(P2P Reads)" not in _run(["--p2p_readx"])[1]
    assert _run(["--numElems=1000", "--sm_copy"])[0] == 0


def test_cuda_visible_devices_and_missing_gpus(tmp_path, monkeypatch):
    _profile(tmp_path, monkeypatch, "dgx1-v100-edr", [{"type": "gpu_fallen_off_bus", "gpu": 2}])
    assert parse_p2p(_run()[1])["gpus"] == 7
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,3")
    parsed = parse_p2p(_run()[1])
    # CUDA's devices 0 and 3 of the 7 left: profile GPUs 0 and 4 (GPU 2 is gone), renumbered 0 and 1
    assert parsed["gpus"] == 2 and [d["index"] for d in parsed["devices"]] == [0, 1]
    assert [d["pci_bus_id"] for d in parsed["devices"]] == ["6", "85"]


def test_nvlink_link_numbers_map_to_peers_in_gpu_order():
    hw = hardware_document(load_profile("dgx1-v100-edr"), [])
    assert sim.nvlink_peers(hw, 7) == {3: [0], 4: [1, 2], 5: [3], 6: [4, 5]}
    assert sim.nvlink_peers(hw, 0) == {1: [0], 2: [1], 3: [2, 3], 4: [4, 5]}


def _judged(tmp_path, monkeypatch, hardware):
    _node(tmp_path, monkeypatch, hardware)
    rc, out = _run()
    assert rc == 0
    parsed = parse_p2p(out)
    return parsed, judge_p2p(parsed, LAB_EXPECT, nvlinks=_topo_nvlinks())


def _bad(checks):
    return {check["name"]: check["observed"]["slow_pairs"] for check in checks if check["status"] != "PASS"}


def _spec_nodes(path):
    lab = spec.from_file(path)
    return [(node, lab.hardware(node)) for node in lab.nodes if (lab.hardware(node).get("gpu") or {}).get("count")]


@pytest.mark.parametrize("spec_file", ["all-faults.yml", "demo.yml"])
def test_lab_nodes_are_judged_by_their_p2p_faults_only(tmp_path, monkeypatch, spec_file):
    """Every GPU node of the spec: a pair whose only NVLink an nvlink_inactive fault took down falls back to PCIe peer
    copies and fails both lab floors and the ratio, naming that pair; every other node passes, whatever its other
    faults (ECC, Xid, a degraded PCIe link, a GPU fallen off the bus, a missing GPU, ACS, NVLink errors)."""
    failed = {}
    for node, hardware in _spec_nodes(ROOT / "lab" / "specs" / spec_file):
        folder = tmp_path / node.name
        folder.mkdir()
        parsed, checks = _judged(folder, monkeypatch, hardware)
        if parsed["gpus"] < 2:
            assert checks == []  # one GPU: no peer pair (the vGPU guest)
            continue
        assert {c["name"] for c in checks} == {
            "p2p_uni_ratio",
            "p2p_uni_gbyte_per_s",
            "p2p_bi_ratio",
            "p2p_bi_gbyte_per_s",
        }
        if _bad(checks):
            failed[node.name] = _bad(checks)
    if spec_file == "demo.yml":
        assert failed == {}  # gpu03's faults (a Down port, ECC, Xid 79 logged) are no P2P faults
    else:
        # v100a: nvlink_inactive on GPU 7 links 3 and 5: link 3 is the only one to GPU 5 (the floors fail too), link 5
        # one of two to GPU 6 (its ratio falls short of the NV2 figure)
        assert failed == {
            "v100a": {
                "p2p_uni_ratio": ["5->7", "6->7", "7->5", "7->6"],
                "p2p_uni_gbyte_per_s": ["5->7", "7->5"],
                "p2p_bi_ratio": ["5->7", "6->7", "7->5", "7->6"],
                "p2p_bi_gbyte_per_s": ["5->7", "7->5"],
            }
        }


def test_the_lab_inventory_chooses_the_stand_in_by_name():
    """The benchmark role's default stays the benchmark_tools build; the lab inventory names the simulator's path,
    which the lab's tools package provides and lab/playbooks/site_tools.yml installs."""
    inventory = yaml.safe_load((ROOT / "inventories/lab/group_vars/all/benchmark.yml").read_text(encoding="utf-8"))
    role = yaml.safe_load((ROOT / "roles/gpuforge_bench/defaults/main.yml").read_text(encoding="utf-8"))
    packages = yaml.safe_load((ROOT / "lab/packages/packages.yml").read_text(encoding="utf-8"))["lab_packages"]
    plays = yaml.safe_load((ROOT / "lab/playbooks/site_tools.yml").read_text(encoding="utf-8"))
    assert role["gpuforge_bench_p2p_binary"] == "{{ gpuforge_benchmark_tools_prefix }}/bin/p2pBandwidthLatencyTest"
    binary = inventory["gpuforge_bench_p2p_binary"]
    package = next(p for p in packages if binary in (p.get("commands") or {}))
    assert package["commands"][binary] == "gpuforge_sim.p2p_bandwidth_latency"
    tasks = [inner for task in plays[0]["tasks"] for inner in task.get("block", [task])]
    # on Debian/Ubuntu nodes with apt, on RHEL-shaped nodes with dnf from the RPM tools repository
    for module in ("ansible.builtin.apt", "ansible.builtin.dnf"):
        installed = [task[module]["name"] for task in tasks if module in task]
        assert any(package["name"] in names for names in installed), module


def _topo_nvlinks():
    out = io.StringIO()
    assert nvidia_smi_sim.main(["topo", "-m"], out) == 0
    return nvlinks_by_pair(parse_topo_matrix(out.getvalue()))


@pytest.mark.parametrize("spec_file", ["all-faults.yml", "demo.yml"])
def test_the_default_judge_scales_the_sku_reference_to_each_pairs_nvlinks(tmp_path, monkeypatch, spec_file):
    """The V100 reference (0.9 x 3.43 over two NVLinks per pair, Dell's C4140) holds per NVLink of each pair as
    `nvidia-smi topo -m` shows it: DGX-1's NV1 pairs (about 2.4x) pass, a pair whose only NVLink is down (about 1.05x,
    topo -m still says NV1) fails, so does an NV2 pair left with one link. Held to the NV2 figure, every healthy DGX-1
    node fails: the false alarm this scaling removes."""
    failed, unscaled = {}, set()
    for node, hardware in _spec_nodes(ROOT / "lab" / "specs" / spec_file):
        folder = tmp_path / node.name
        folder.mkdir()
        _node(folder, monkeypatch, hardware)
        rc, out = _run()
        parsed = parse_p2p(out)
        if rc != 0 or parsed["gpus"] < 2:
            continue
        checks = judge_p2p(parsed, {}, nvlinks=_topo_nvlinks())
        if _bad(checks):
            failed[node.name] = _bad(checks)
        if parsed["sku"] in REFERENCES and _bad(judge_p2p(parsed, {})):
            unscaled.add(parsed["sku"])
    if spec_file == "demo.yml":
        assert failed == {}
    else:
        # v100a's nvlink_inactive (GPU 7 links 3 and 5) takes the only link to GPU 5 and one of two to GPU 6: both
        # pairs fall short of their own link count's figure (the lab's flat min_ratio 1.5 sees only 5<->7)
        pairs = ["5->7", "6->7", "7->5", "7->6"]
        assert failed == {"v100a": {"p2p_uni_ratio": pairs, "p2p_bi_ratio": pairs}}
    assert unscaled == {"Tesla V100-SXM2-16GB"}  # DGX-1 nodes held to the C4140's NV2 ratio
