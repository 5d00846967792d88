"""Simulated nvidia-smi: every profile and GPU fault, checked through the project's own parsers against
the structure the real outputs parse to (the real-output test inputs (REAL_OUTPUTS in tests/conftest.py))."""

from __future__ import annotations

import io
import json
import os
import stat
from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_nvidia_smi as nv
from gpuforge_sim import driver_state, nvidia_modprobe, nvidia_smi

from gpuforge.lab.profiles import hardware_document, load_profile

GPU_PROFILES = [
    "dgx1-v100-edr",
    "supermicro-4029gp-v100",
    "poweredge-c4140-v100",
    "vsphere-t4-vgpu-roce",
    "dgx-h100-ndr",
]
REAL_XML = "nvidia-smi-q-x__netdata-go.d.plugin__rtx4090_drv535.xml"
REAL_TOPO = "nvidia-smi-topo-m__sgl-project-sglang__issue30401__8xh100_8nic.txt"
REAL_NVLINK = "nvidia-smi-nvlink-status__leptonai-gpud__a100.txt"
VOLATILE_KEYS = {"format", "dtd_version", "timestamp"}
DEVICE_NAMED = {"matrix", "links", "nics", "legend", "nic_legend"}
# remapped_rows: null before Ampere, a dict after (checked in the fault tests); vgpu_license: null without vGPU
# software, a dict in a vGPU guest (tests/unit/module_utils/test_gpuforge_vgpu_license.py).
OPTIONAL_SECTIONS = {"remapped_rows", "vgpu_license"}
# Captured on a real single-GPU H200 VM, driver 580.159.04 (tests/fixtures/nvidia-smi/SOURCES.md).
H200_580 = "gpuforge-device_1xh200_drv580.159.04_{}"


def h200_580(view: str) -> Path:
    return Path(__file__).resolve().parents[2] / "fixtures" / "nvidia-smi" / H200_580.format(view)


@pytest.fixture
def lab(tmp_path, monkeypatch):
    """A lab node with the driver package installed (nvidia.ko) and nothing loaded yet.

    node(profile, faults) writes the node's hardware.json."""
    (tmp_path / "lib" / "modules").mkdir(parents=True)
    (tmp_path / "lib" / "modules" / "nvidia.ko").write_text("", encoding="ascii")
    monkeypatch.setenv("GPUFORGE_LAB_RUN", str(tmp_path / "run"))
    monkeypatch.setenv("GPUFORGE_LAB_LIB", str(tmp_path / "lib"))
    monkeypatch.setenv("GPUFORGE_LAB_PERSISTENCED_DIR", str(tmp_path / "persistenced"))
    monkeypatch.setenv("GPUFORGE_LAB_HARDWARE", str(tmp_path / "hardware.json"))

    def node(profile: str, faults: list | None = None) -> dict:
        document = hardware_document(load_profile(profile), faults or [])
        document["hostname"] = "lab-node"
        (tmp_path / "hardware.json").write_text(json.dumps(document), encoding="utf-8")
        return document

    node.path = tmp_path
    return node


def smi(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = nvidia_smi.main(list(argv), out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def keyset(value, prefix=""):
    """Flattened key paths of a parsed structure (lists: first element)."""
    keys = set()
    if isinstance(value, dict):
        for key, sub in value.items():
            if prefix.rsplit("/", 1)[-1] in DEVICE_NAMED:
                continue  # keys are device names, which differ between machines
            keys.add(prefix + "/" + str(key))
            if key not in OPTIONAL_SECTIONS:
                keys |= keyset(sub, prefix + "/" + str(key))
    elif isinstance(value, list) and value and isinstance(value[0], dict):
        keys |= keyset(value[0], prefix + "[]")
    return keys


@pytest.mark.parametrize("profile", GPU_PROFILES)
def test_query_xml_matches_real_structure_and_profile(lab, profile, real_output):
    hw = lab(profile)
    rc, out, _ = smi("-q", "-x")
    assert rc == 0
    log = nv.parse_query_xml(out)
    real = nv.parse_query_xml(real_output(REAL_XML))
    assert keyset(log) - {"/gpus[]/mig_devices[]"} == keyset(real) - {"/gpus[]/mig_devices[]"}
    assert (log["dtd_version"], log["driver_version"], log["cuda_version"]) == ("v12", "535.183.01", "12.2")
    assert log["gpu_count"] == hw["gpu"]["count"]
    assert [g["bus_id"] for g in log["gpus"]] == [d["bus_id"] for d in hw["gpu"]["devices"]]
    gpu = log["gpus"][0]
    assert gpu["product_name"] == hw["gpu"]["product_name"]
    assert gpu["memory"]["total_mib"] == hw["gpu"]["memory_mib"]
    assert gpu["pcie"]["width_current"] == gpu["pcie"]["width_max"] == hw["gpu"]["pcie_width_max"]
    assert gpu["active_throttle_reasons"] == ["gpu_idle"]
    assert gpu["memory_repair_pending"] is (None if hw["gpu"]["vgpu"] else False)
    assert len({g["uuid"] for g in log["gpus"]}) == hw["gpu"]["count"]


def test_a_vgpu_lease_expires_at_one_time_whichever_call_reads_it(lab, monkeypatch):
    """Two nvidia-smi runs a second apart print the same license expiry (a lease has one): the query text and XML
    differed on a loaded machine when the expiry was the clock's time plus a day."""
    lab("vsphere-t4-vgpu-roce")
    first = smi("-q")[1]
    clock = nvidia_smi.time.time()
    monkeypatch.setattr(nvidia_smi.time, "time", lambda: clock + 61)
    later = smi("-q")[1]
    expiries = [line for line in first.splitlines() if "Expiry" in line]
    assert expiries, first
    assert expiries == [line for line in later.splitlines() if "Expiry" in line]


@pytest.mark.parametrize("profile", GPU_PROFILES)
def test_query_text_parses_to_the_same_facts_as_xml(lab, profile):
    lab(profile)
    xml = nv.parse_query_xml(smi("-q", "-x")[1])
    text = nv.parse_query_text(smi("-q")[1])
    for log in (xml, text):
        for key in VOLATILE_KEYS:
            log.pop(key)
    assert text == xml


@pytest.mark.parametrize("profile", GPU_PROFILES)
def test_topo_matches_profile_and_real_structure(lab, profile, real_output):
    hw = lab(profile)
    rc, out, _ = smi("topo", "-m")
    assert rc == 0
    topo = nv.parse_topo_matrix(out)
    real = nv.parse_topo_matrix(real_output(REAL_TOPO))
    assert keyset(topo) == keyset(real)
    assert topo["columns"][-3:] == ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]
    for gpu in topo["gpus"]:
        row = hw["gpu"]["topology"][gpu["index"]]
        assert gpu["links"] == {f"GPU{j}": code for j, code in enumerate(row) if j != gpu["index"]}
        device = hw["gpu"]["devices"][gpu["index"]]
        assert gpu["numa_affinity"] == str(device["numa"])
        assert gpu["cpu_affinity"] == hw["system"]["cpus_per_numa"][device["numa"]]
        for hca in hw["hcas"]:
            assert gpu["nics"][hca["name"]] == hca["gpu_affinity"].get(str(gpu["index"]), "SYS")
    assert topo["nic_legend"] == {f"NIC{i}": hca["name"] for i, hca in enumerate(hw["hcas"])}


def test_topo_dgx1_nic_pairs_and_exact_layout(lab):
    lab("dgx1-v100-edr")
    out = smi("topo", "-m")[1]
    assert (
        out.splitlines()[1] == "GPU0\t X \tNV1\tNV1\tNV2\tNV2\tSYS\tSYS\tSYS\tPIX\tPHB\tSYS\tSYS\t0-19,40-59\t0\t\tN/A"
    )
    topo = nv.parse_topo_matrix(out)
    assert topo["nics"][0]["links"] == {
        "GPU0": "PIX", "GPU1": "PIX", "GPU2": "PHB", "GPU3": "PHB", "GPU4": "SYS", "GPU5": "SYS", "GPU6": "SYS",
        "GPU7": "SYS", "NIC0": "X", "NIC1": "PHB", "NIC2": "SYS", "NIC3": "SYS",
    }  # fmt: skip
    assert "NIC Legend:\n\n  NIC0: mlx5_0\n" in out


def test_topo_h100_matches_real_dgx_h100_pattern(lab, real_output):
    lab("dgx-h100-ndr")
    sim = nv.parse_topo_matrix(smi("topo", "-m")[1])
    real = nv.parse_topo_matrix(real_output(REAL_TOPO))
    for ours, theirs in zip(sim["gpus"], real["gpus"], strict=True):
        assert ours["links"] == theirs["links"]
        assert {k: v for k, v in ours["nics"].items() if k in theirs["nics"]} == theirs["nics"]


@pytest.mark.parametrize(("profile", "links", "speed"), [("dgx1-v100-edr", 6, 25.781), ("dgx-h100-ndr", 18, 26.562)])
def test_nvlink_status(lab, profile, links, speed, real_output):
    lab(profile)
    for flag in ("--status", "-s"):
        status = nv.parse_nvlink_status(smi("nvlink", flag)[1])
        assert keyset(status) == keyset(nv.parse_nvlink_status(real_output(REAL_NVLINK)))
        assert status["gpu_count"] == 8
        assert all(g["active_links"] == links for g in status["gpus"])
        assert status["gpus"][0]["links"][0]["speed_gbyte_per_s"] == speed
    only = nv.parse_nvlink_status(smi("nvlink", "-s", "-i", "3")[1])
    assert [g["index"] for g in only["gpus"]] == [3]


def driver(lab, version: str, cuda: str) -> None:
    """Install a driver package of another release than the default (its nvidia-driver.json)."""
    (lab.path / "lib" / "nvidia-driver.json").write_text(
        json.dumps({"driver_version": version, "cuda_version": cuda}), encoding="utf-8"
    )


@pytest.mark.parametrize("flags", [("--status",), ("-s",), ("-e",), ("--errorcounters",), ("-s", "-i", "0")])
def test_nvlink_t4_has_no_links(lab, flags):
    """A GPU without NVLink prints nothing, not even its GPU line; exit 0 (the real H200 VM capture)."""
    lab("vsphere-t4-vgpu-roce")
    assert smi("nvlink", *flags) == (0, "", "")
    counters = flags[0] in ("-e", "--errorcounters")
    real = h200_580("nvlink_e_no_links.txt" if counters else "nvlink_status_no_links.txt").read_text(encoding="utf-8")
    assert real == ""
    parse = nv.parse_nvlink_errors if counters else nv.parse_nvlink_status
    assert parse(smi("nvlink", *flags)[1]) == parse(real) == {"gpu_count": 0, "gpus": [], "errors": []}


def test_topo_header_of_driver_580_matches_the_real_capture(lab):
    """Driver 580 underlines topo -m's header with ANSI codes; the one-GPU VM without an HCA (the T4 profile,
    its HCA removed) prints what the real single-GPU H200 VM printed, byte for byte (same CPUs 0-15, NUMA 0)."""
    lab("vsphere-t4-vgpu-roce", [{"type": "hca_missing", "hca": "mlx5_0"}])
    driver(lab, "580.159.04", "13.0")
    out = smi("topo", "-m")[1]
    real = h200_580("topo_m.txt").read_bytes().decode("utf-8")
    assert (
        out.splitlines()[0] == real.splitlines()[0] == "\t\x1b[4mGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m"
    )
    assert out.splitlines()[1] == real.splitlines()[1] == "GPU0\t X \t0-15\t0\t\tN/A"
    assert out == real
    assert nv.parse_topo_matrix(out) == nv.parse_topo_matrix(real)


@pytest.mark.parametrize(("version", "cuda"), [("535.183.01", "12.2"), ("550.90.07", "12.4")])
def test_topo_header_before_driver_580_is_plain(lab, version, cuda):
    lab("vsphere-t4-vgpu-roce")
    driver(lab, version, cuda)
    out = smi("topo", "-m")[1]
    assert "\x1b" not in out
    assert out.splitlines()[0] == "\tGPU0\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"


@pytest.mark.parametrize(
    ("version", "cuda", "dtd"),
    [("535.183.01", "12.2", "v12"), ("550.90.07", "12.4", "v12"), ("580.159.04", "13.0", "v13")],
)
def test_query_xml_doctype_by_driver(lab, version, cuda, dtd):
    """-q -x names DTD v13 from driver 580 on, as the real 580.159.04 capture does; drivers 535 .. 579 keep v12."""
    lab("vsphere-t4-vgpu-roce")
    driver(lab, version, cuda)
    out = smi("-q", "-x")[1]
    doctype = out.splitlines()[1]
    assert doctype == f'<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_{dtd}.dtd">'
    assert nv.parse_query_xml(out)["dtd_version"] == dtd
    if dtd == "v13":
        real = h200_580("q_x.xml").read_text(encoding="utf-8").splitlines()
        assert real[:2] == out.splitlines()[:2] == ['<?xml version="1.0" ?>', doctype]


@pytest.mark.parametrize(("version", "cuda", "label"), [("550.90.07", "12.4", "Gpu"), ("580.159.04", "13.0", "GPU")])
def test_query_text_utilization_label_by_driver(lab, version, cuda, label):
    """`Utilization/Gpu` before driver 580, `Utilization/GPU` in the 580.159.04 capture; both parse alike."""
    lab("dgx-h100-ndr")
    driver(lab, version, cuda)
    text = smi("-q", "-i", "0")[1]
    lines = text.splitlines()
    assert lines[lines.index("    Utilization") + 1] == f"        {label}".ljust(42) + ": 0 %"
    if label == "GPU":
        real = h200_580("q.txt").read_text(encoding="utf-8").splitlines()
        assert real[real.index("    Utilization") + 1].split(":")[0].strip() == "GPU"
    xml = nv.parse_query_xml(smi("-q", "-x", "-i", "0")[1])
    parsed = nv.parse_query_text(text)
    for log in (xml, parsed):
        for key in VOLATILE_KEYS:
            log.pop(key)
    assert parsed == xml
    assert parsed["gpus"][0]["utilization_gpu_pct"] == 0


def test_csv_query_header_units_noheader_nounits(lab, real_output):
    lab("dgx1-v100-edr")
    fields = (
        "index,name,uuid,pci.bus_id,driver_version,memory.total,memory.used,temperature.gpu,utilization.gpu,"
        "persistence_mode,ecc.mode.current,ecc.errors.uncorrected.volatile.total,pcie.link.gen.current,"
        "pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,clocks_throttle_reasons.hw_thermal_slowdown,"
        "power.limit"
    )
    rc, out, _ = smi(f"--query-gpu={fields}", "--format=csv")
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].startswith("index, name, uuid, pci.bus_id, driver_version, memory.total [MiB], memory.used [MiB]")
    assert lines[1].endswith(", 300.00 W")
    parsed = nv.parse_query_gpu_csv(out)
    assert parsed["fields"] == fields.split(",")
    row = parsed["rows"][2]
    assert row["pci.bus_id"] == "00000000:0A:00.0"
    assert (row["memory.total"], row["power.limit"], row["pcie.link.width.max"]) == (16160, 300.0, 16)
    assert row["persistence_mode"] == "Disabled"
    nounits = smi(f"--query-gpu={fields}", "--format=csv,noheader,nounits")[1]
    assert nounits.splitlines()[0].endswith(", 300.00")
    assert nv.parse_query_gpu_csv(nounits, fields=fields.split(","))["rows"] == parsed["rows"]
    real_fields = set(
        nv.parse_query_gpu_csv(real_output("nvidia-smi-query-gpu-csv__netdata-go.d.plugin__tesla-p100.csv"))["fields"]
    )
    assert {"name", "uuid", "utilization.gpu", "temperature.gpu"} <= real_fields & set(parsed["fields"])


def test_csv_redhat_supermicro_node_label_query(lab):
    lab("dgx1-v100-edr")
    rc, out, _ = smi("--query-gpu=gpu_name", "--format=csv,noheader", "--id=0")
    assert (rc, out) == (0, "Tesla V100-SXM2-16GB\n")


def test_csv_unknown_field(lab):
    lab("dgx1-v100-edr")
    rc, _, err = smi("--query-gpu=index,bogus", "--format=csv")
    assert rc == 2 and 'Field "bogus" is not a valid field to query.' in err


def test_list_gpus(lab):
    lab("poweredge-c4140-v100")
    listed = nv.parse_list_gpus(smi("-L")[1])
    assert [g["name"] for g in listed["gpus"]] == ["Tesla V100-SXM2-16GB"] * 4
    assert listed["errors"] == []


def test_bare_table(lab):
    lab("vsphere-t4-vgpu-roce")
    rc, out, _ = smi()
    lines = out.splitlines()
    assert rc == 0
    assert "| NVIDIA-SMI 535.183.01             Driver Version: 535.183.01   CUDA Version: 12.2     |" in lines
    assert "|   0  GRID T4-16C                   Off  | 00000000:02:02.0 Off |                  N/A |" in lines
    assert all(len(line) == 89 for line in lines[1:] if line.startswith(("|", "+")))


# --- faults -----------------------------------------------------------------------------------------


def test_ecc_dbe_in_xml_text_csv_and_table(lab):
    lab("dgx1-v100-edr", [{"type": "ecc_dbe", "gpu": 2, "count": 4}])
    for log in (nv.parse_query_xml(smi("-q", "-x")[1]), nv.parse_query_text(smi("-q")[1])):
        assert [g["ecc"]["volatile"]["uncorrected"] for g in log["gpus"]] == [0, 0, 4, 0, 0, 0, 0, 0]
        assert log["gpus"][2]["ecc"]["aggregate"]["uncorrected"] == 0
    csv = nv.parse_query_gpu_csv(smi("--query-gpu=index,ecc.errors.uncorrected.volatile.total", "--format=csv")[1])
    assert [r["ecc.errors.uncorrected.volatile.total"] for r in csv["rows"]] == [0, 0, 4, 0, 0, 0, 0, 0]
    assert "00000000:0A:00.0 Off |                    4 |" in smi()[1]


def test_ecc_dbe_on_hopper_counts_dram(lab):
    lab("dgx-h100-ndr", [{"type": "ecc_dbe", "gpu": 5, "count": 2}])
    gpu = nv.parse_query_xml(smi("-q", "-x", "-i", "5")[1])["gpus"][0]
    volatile = gpu["ecc"]["volatile"]
    assert (volatile["corrected"], volatile["uncorrected"], volatile["dram_uncorrectable"]) == (0, 2, 2)


@pytest.mark.parametrize(("profile", "remap"), [("dgx-h100-ndr", True), ("dgx1-v100-edr", False)])
def test_row_remap_pending(lab, profile, remap):
    lab(profile, [{"type": "row_remap_pending", "gpu": 1}])
    for log in (nv.parse_query_xml(smi("-q", "-x")[1]), nv.parse_query_text(smi("-q")[1])):
        assert [g["memory_repair_pending"] for g in log["gpus"]][:3] == [False, True, False]
        if remap:
            assert log["gpus"][1]["remapped_rows"]["pending"] is True
        else:  # Volta retires pages instead of remapping rows
            assert log["gpus"][1]["retired_pages"] == {"single_bit": 0, "double_bit": 1, "pending": True}
    field = "remapped_rows.pending" if remap else "retired_pages.pending"
    rows = nv.parse_query_gpu_csv(smi(f"--query-gpu={field}", "--format=csv")[1])["rows"]
    assert [r[field] for r in rows][:3] == ["No", "Yes", "No"]


def test_thermal_slowdown(lab):
    lab("supermicro-4029gp-v100", [{"type": "thermal_slowdown", "gpu": 6}])
    for log in (nv.parse_query_xml(smi("-q", "-x")[1]), nv.parse_query_text(smi("-q")[1])):
        assert log["gpus"][6]["active_throttle_reasons"] == ["hw_slowdown", "hw_thermal_slowdown"]
        assert log["gpus"][6]["temperature_c"] == 88
        assert log["gpus"][5]["throttle_reasons"]["hw_thermal_slowdown"] is False
    out = smi("--query-gpu=clocks_throttle_reasons.hw_thermal_slowdown", "--format=csv,noheader")[1]
    assert out.splitlines()[6] == "Active" and out.count("Not Active") == 7


def test_pcie_width_degraded(lab):
    lab("dgx-h100-ndr", [{"type": "pcie_width_degraded", "gpu": 0, "width": 8, "gen": 3}])
    gpu = nv.parse_query_xml(smi("-q", "-x")[1])["gpus"][0]
    assert gpu["pcie"] == {"gen_max": 5, "gen_current": 3, "width_max": 16, "width_current": 8}
    fields = "pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max"
    row = nv.parse_query_gpu_csv(smi(f"--query-gpu={fields}", "--format=csv")[1])["rows"][0]
    assert list(row.values()) == [3, 5, 8, 16]


def test_gpu_missing_in_every_view(lab):
    lab("dgx1-v100-edr", [{"type": "gpu_missing", "gpu": 3}])
    log = nv.parse_query_xml(smi("-q", "-x")[1])
    assert (log["attached_gpus"], log["gpu_count"]) == (7, 7)
    assert "00000000:0B:00.0" not in [g["bus_id"] for g in log["gpus"]]
    assert nv.parse_list_gpus(smi("-L")[1])["gpu_count"] == 7
    assert nv.parse_topo_matrix(smi("topo", "-m")[1])["gpu_count"] == 7
    assert nv.parse_nvlink_status(smi("nvlink", "-s")[1])["gpu_count"] == 7
    assert len(nv.parse_query_gpu_csv(smi("--query-gpu=index", "--format=csv")[1])["rows"]) == 7


def test_gpu_fallen_off_bus(lab):
    lab("dgx1-v100-edr", [{"type": "gpu_fallen_off_bus", "gpu": 4}])
    message = "Unable to determine the device handle for GPU0000:85:00.0: Unknown Error\n"
    for argv in ((), ("-q",), ("-q", "-x")):
        assert smi(*argv)[:2] == (15, message)
    rc, out, _ = smi("--query-gpu=index", "--format=csv,noheader")
    assert rc == 15 and out.endswith(message) and out.count("\n") == 8
    assert nv.parse_list_gpus(smi("-L")[1])["gpu_count"] == 7
    assert smi("-q", "-x", "-i", "0")[0] == 0


def test_driver_not_loaded_exit_9_then_modprobe(lab):
    lab("dgx1-v100-edr")
    os.remove(lab.path / "lib" / "modules" / "nvidia.ko")
    rc, out, _ = smi("-L")
    assert rc == 9
    assert out.startswith("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    (lab.path / "lib" / "modules" / "nvidia.ko").write_text("", encoding="ascii")
    (lab.path / "lib" / "modules" / "nvidia_uvm.ko").write_text("", encoding="ascii")
    assert nvidia_modprobe.main(["-u", "-c", "0"]) == 0
    assert driver_state.loaded_modules() == ["nvidia", "nvidia_uvm"]
    assert smi("-L")[0] == 0


def test_nvidia_smi_loads_module_like_nvidia_modprobe(lab):
    lab("dgx1-v100-edr")
    assert driver_state.loaded_modules() == []
    assert smi("-L")[0] == 0
    assert driver_state.loaded_modules() == ["nvidia"]


def test_persistence_mode_follows_persistenced_pid(lab):
    lab("dgx1-v100-edr")
    assert nv.parse_query_xml(smi("-q", "-x")[1])["gpus"][0]["persistence_mode"] == "Disabled"
    pid_file = lab.path / "persistenced" / "nvidia-persistenced.pid"
    pid_file.parent.mkdir()
    pid_file.write_text(f"{os.getpid()}\n", encoding="ascii")
    assert nv.parse_query_xml(smi("-q", "-x")[1])["gpus"][0]["persistence_mode"] == "Enabled"
    pid_file.write_text("999999999\n", encoding="ascii")
    assert nv.parse_query_xml(smi("-q", "-x")[1])["gpus"][0]["persistence_mode"] == "Disabled"


def test_driver_constants_from_package(lab):
    lab("dgx-h100-ndr")
    (lab.path / "lib" / "nvidia-driver.json").write_text(
        json.dumps({"driver_version": "550.90.07", "cuda_version": "12.4"}), encoding="utf-8"
    )
    log = nv.parse_query_xml(smi("-q", "-x")[1])
    assert (log["driver_version"], log["cuda_version"]) == ("550.90.07", "12.4")


def test_head_node_has_no_gpu(lab):
    lab("head")
    assert smi("-L")[:2] == (6, "No devices were found\n")


def test_vgpu_reports_na_ecc_and_power(lab):
    lab("vsphere-t4-vgpu-roce")
    gpu = nv.parse_query_xml(smi("-q", "-x")[1])["gpus"][0]
    assert (gpu["virtualization_mode"], gpu["ecc"]["mode_current"], gpu["power_limit_w"]) == ("VGPU", None, None)
    row = nv.parse_query_gpu_csv(smi("--query-gpu=ecc.mode.current,power.limit", "--format=csv")[1])["rows"][0]
    assert row == {"ecc.mode.current": None, "power.limit": None}


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod of a character device needs root (CI runs as root)")
def test_device_files_are_nvidia_character_devices(lab, monkeypatch):
    monkeypatch.setenv("GPUFORGE_LAB_DEV_DIR", str(lab.path))
    assert driver_state.create_device_files(range(2)) == [
        str(lab.path / "nvidia0"),
        str(lab.path / "nvidia1"),
        str(lab.path / "nvidiactl"),
    ]
    info = (lab.path / "nvidia1").stat()
    assert stat.S_ISCHR(info.st_mode)
    assert (os.major(info.st_rdev), os.minor(info.st_rdev)) == (195, 1)
    assert os.minor((lab.path / "nvidiactl").stat().st_rdev) == 255
    assert driver_state.create_device_files(range(2)) == []  # existing files are kept


def test_remap_failure_count_and_aggregate_ecc_on_hopper(lab):
    lab(
        "dgx-h100-ndr",
        [
            {"type": "row_remap_failure", "gpu": 1},
            {"type": "remapped_rows", "gpu": 1, "uncorrectable": 600, "correctable": 3},
            {"type": "ecc_aggregate", "gpu": 2, "memory": "sram", "kind": "uncorrectable", "count": 2},
            {"type": "ecc_aggregate", "gpu": 2, "memory": "dram", "kind": "correctable", "count": 40},
        ],
    )
    for log in (nv.parse_query_xml(smi("-q", "-x")[1]), nv.parse_query_text(smi("-q")[1])):
        rows = log["gpus"][1]["remapped_rows"]
        assert (rows["failure"], rows["uncorrectable"], rows["correctable"]) == (True, 600, 3)
        assert rows["histogram"] == {"max": 1956, "high": 0, "partial": 603, "low": 0, "none": 1}
        aggregate = log["gpus"][2]["ecc"]["aggregate"]
        assert (aggregate["sram_uncorrectable"], aggregate["dram_correctable"]) == (2, 40)
        assert aggregate["sram_threshold_exceeded"] is False
        assert log["gpus"][2]["ecc"]["volatile"]["sram_uncorrectable"] == 0


def test_remap_faults_refused_on_volta(lab):
    with pytest.raises(ValueError, match="needs an Ampere or newer GPU"):
        lab("dgx1-v100-edr", [{"type": "row_remap_failure", "gpu": 1}])


def test_clock_events_show_in_their_share_of_samples_in_both_field_names(lab):
    lab("dgx-h100-ndr", [{"type": "clock_events", "gpu": 3, "reason": "hw_thermal_slowdown", "fraction": 0.25}])
    for prefix in ("clocks_event_reasons", "clocks_throttle_reasons"):
        fields = f"pci.bus_id,{prefix}.hw_thermal_slowdown,{prefix}.hw_slowdown,{prefix}.active"
        rows = [nv.parse_query_gpu_csv(smi(f"--query-gpu={fields}", "--format=csv")[1])["rows"][3] for _ in range(8)]
        assert sum(r[f"{prefix}.hw_thermal_slowdown"] == "Active" for r in rows) == 2
        assert sum(r[f"{prefix}.hw_slowdown"] == "Active" for r in rows) == 2  # thermal is a kind of HW slowdown
        assert {r[f"{prefix}.active"] for r in rows} == {"0x0000000000000001", "0x0000000000000048"}
    # -q shows the current sample without taking one.
    states = {nv.parse_query_xml(smi("-q", "-x")[1])["gpus"][3]["throttle_reasons"]["hw_slowdown"] for _ in range(4)}
    assert len(states) == 1


def test_nvlink_inactive_and_error_counters(lab):
    lab(
        "dgx1-v100-edr",
        [{"type": "nvlink_inactive", "gpu": 2, "links": [0, 4]}, {"type": "nvlink_errors", "gpu": 5, "link": 3,
         "replay": 7, "crc": 11}],
    )  # fmt: skip
    status = nv.parse_nvlink_status(smi("nvlink", "-s")[1])
    assert status["gpus"][2]["active_links"] == 4
    assert [link["state"] for link in status["gpus"][2]["links"]][:2] == ["<inactive>", "25.781 GB/s"]
    for flag in ("-e", "--errorcounters"):
        errors = nv.parse_nvlink_errors(smi("nvlink", flag)[1])
        assert errors["errors"] == [] and len(errors["gpus"][5]["links"]) == 6
        assert errors["gpus"][5]["links"][3] == {"link": 3, "replay_errors": 7, "recovery_errors": 0, "crc_errors": 11}


def test_nvlink_errors_layout_matches_the_public_h100_output(lab):
    lab("dgx-h100-ndr")
    out = smi("nvlink", "-e", "-i", "0")[1]
    assert out.splitlines()[1:5] == [
        "         Link 0: Replay Errors: 0",
        "         Link 0: Recovery Errors: 0",
        "         Link 0: CRC Errors: 0",
        "",
    ]


def test_power_draw_average_and_instant_on_newer_drivers(lab):
    lab("dgx-h100-ndr")
    (lab.path / "lib" / "nvidia-driver.json").write_text(
        json.dumps({"driver_version": "550.90.07", "cuda_version": "12.4"}), encoding="utf-8"
    )
    for log in (nv.parse_query_xml(smi("-q", "-x")[1]), nv.parse_query_text(smi("-q")[1])):
        gpu = log["gpus"][0]
        assert gpu["power_draw_w"] == gpu["power_draw_average_w"] == gpu["power_draw_instant_w"] == 98.0
    assert "<average_power_draw>98.00 W</average_power_draw>" in smi("-q", "-x", "-i", "0")[1]
