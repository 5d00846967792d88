"""Lab hardware profiles: every profile validates, bad profiles and faults name the file and field,
and the simulators' loader applies faults."""

from __future__ import annotations

import copy
import json

import pytest
from gpuforge_sim import hardware

from gpuforge.lab.profiles import PROFILES_DIR, hardware_document, load_profile

PROFILES = sorted(p.stem for p in PROFILES_DIR.glob("*.yml"))


def test_all_profiles_present():
    assert PROFILES == [
        "dgx-h100-ndr", "dgx1-v100-edr", "head", "poweredge-c4140-v100", "storage",
        "supermicro-4029gp-v100", "vsphere-t4-vgpu-roce",
    ]  # fmt: skip


@pytest.mark.parametrize("name", PROFILES)
def test_profile_compiles(name):
    document = hardware_document(load_profile(name), [])
    assert document["name"] == name and document["faults"] == []
    for hca in document["hcas"]:
        assert all(isinstance(key, str) for key in hca["gpu_affinity"])


def test_dgx1_facts_from_redp5610():
    hw = load_profile("dgx1-v100-edr")
    assert hw["gpu"]["count"] == 8 and hw["system"]["cpus_per_numa"] == ["0-19,40-59", "20-39,60-79"]
    assert [h["name"] for h in hw["hcas"]] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert [h["numa"] for h in hw["hcas"]] == [0, 0, 1, 1]
    assert hw["hcas"][1]["gpu_affinity"] == {0: "PHB", 1: "PHB", 2: "PIX", 3: "PIX"}
    assert sum(int(c[2:]) for c in hw["gpu"]["topology"][5] if c.startswith("NV")) == 6


def test_h100_profile():
    hw = load_profile("dgx-h100-ndr")
    assert hw["system"]["nvswitch"] is True
    ib = [h for h in hw["hcas"] if h["ports"][0]["link_layer"] == "InfiniBand"]
    assert [h["name"] for h in ib] == [f"mlx5_{i}" for i in range(8)]
    assert {h["ports"][0]["rate_gbit_per_s"] for h in ib} == {400}
    assert len(hw["hcas"]) - len(ib) == 2


def test_bad_profile_field_named():
    profile = copy.deepcopy(load_profile("dgx1-v100-edr"))
    profile["gpu"]["devices"][3]["bus_id"] = "0:0B:00.0"
    with pytest.raises(ValueError, match=r"^lab/profiles/dgx1-v100-edr\.yml: gpu\.devices\[3\]\.bus_id: "):
        hardware_document(profile, [])
    profile = copy.deepcopy(load_profile("dgx1-v100-edr"))
    profile["gpu"]["topology"][0][1] = "NV2"
    with pytest.raises(ValueError, match=r"gpu\.topology\[0\]\[1\]: matrix not symmetric"):
        hardware_document(profile, [])


def test_load_profile_checks_name(tmp_path):
    (tmp_path / "x.yml").write_text("name: y\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"x\.yml: name: 'y' must equal the file name 'x'"):
        load_profile("x", profiles_dir=tmp_path)


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ({"type": "gpu_exploded", "gpu": 0}, r"faults\[0\]\.type: 'gpu_exploded' is not one of"),
        ({"type": "ecc_dbe", "gpu": 0}, r"faults\[0\]: ecc_dbe needs count"),
        ({"type": "gpu_missing", "gpu": 8}, r"faults\[0\]\.gpu: no GPU 8"),
        ({"type": "ib_port_state", "hca": "mlx5_9", "port": 1, "state": "Down"}, r"faults\[0\]\.hca: no HCA"),
        ({"type": "ib_port_state", "hca": "mlx5_0", "port": 1, "state": "Active"}, r"faults\[0\]\.state"),
        ({"type": "pcie_width_degraded", "gpu": 0, "width": 16}, r"faults\[0\]\.width"),
        ({"type": "thermal_slowdown", "gpu": 0, "hot": True}, r"does not take hot"),
        ({"type": "sxid", "switch": 0, "code": 20034, "fatal": True}, r"faults\[0\]: sxid needs pci"),
        ({"type": "sxid", "switch": 0, "pci": "0000:c2:00.0", "code": 1}, r"sxid needs fatal"),
        ({"type": "sxid", "switch": 0, "pci": "0000:c2:00.0", "code": 1, "fatal": 1, "gpu": 0}, r"does not take gpu"),
        ({"type": "fabric_manager_down", "hca": "mlx5_0"}, r"fabric_manager_down does not take hca"),
    ],
)
def test_bad_fault_named(fault, message):
    with pytest.raises(ValueError, match=message):
        hardware_document(load_profile("dgx1-v100-edr"), [fault])


SXID = {"type": "sxid", "switch": 3, "pci": "0000:c1:00.0", "code": 20034, "fatal": True, "link": 28}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"code": "20034"}, r"faults\[0\]\.code: must be a positive integer SXid code, got '20034'"),
        ({"code": 0}, r"faults\[0\]\.code: must be a positive integer SXid code, got 0"),
        ({"code": True}, r"faults\[0\]\.code: must be a positive integer SXid code, got True"),
        ({"fatal": "yes"}, r"faults\[0\]\.fatal: must be true or false, got 'yes'"),
        ({"fatal": 1}, r"faults\[0\]\.fatal: must be true or false, got 1"),
        ({"switch": -1}, r"faults\[0\]\.switch: must be a non-negative integer switch number, got -1"),
        ({"link": 2.5}, r"faults\[0\]\.link: must be a non-negative integer link number, got 2\.5"),
        ({"pci": "c1:00.0"}, r"faults\[0\]\.pci: 'c1:00\.0' is not a PCI address such as 0000:c1:00\.0"),
        ({"message": ""}, r"faults\[0\]\.message: must be a non-empty string"),
    ],
)
def test_bad_sxid_value_named(change, message):
    with pytest.raises(ValueError, match=message):
        hardware_document(load_profile("dgx-h100-ndr"), [{**SXID, **change}])


def test_sxid_needs_an_nvswitch_system():
    with pytest.raises(ValueError, match=r"faults\[0\]: sxid needs an NVSwitch system \(system\.nvswitch: true\)"):
        hardware_document(load_profile("dgx1-v100-edr"), [SXID])


def test_nvswitch_faults_are_accepted_with_their_parameters():
    faults = [
        {"type": "sxid", "switch": 3, "pci": "0000:c1:00.0", "code": 28006, "fatal": False, "link": 46, "message": "m"},
        {"type": "fabric_manager_down"},
    ]
    document = hardware_document(load_profile("dgx-h100-ndr"), faults)
    assert [f["type"] for f in document["faults"]] == ["sxid", "fabric_manager_down"]


def test_loader_applies_faults(tmp_path, monkeypatch):
    faults = [
        {"type": "gpu_missing", "gpu": 1},
        {"type": "ecc_dbe", "gpu": 2, "count": 5},
        {"type": "hca_missing", "hca": "mlx5_3"},
        {"type": "ib_port_state", "hca": "mlx5_0", "port": 1, "state": "Down"},
        {"type": "ib_port_rate", "hca": "mlx5_1", "port": 1, "rate_gbit_per_s": 56},
        {"type": "ib_port_rate", "hca": "mlx5_2", "port": 1, "rate_gbit_per_s": 25},
    ]
    path = tmp_path / "hardware.json"
    path.write_text(json.dumps(hardware_document(load_profile("dgx1-v100-edr"), faults)), encoding="utf-8")
    monkeypatch.setenv("GPUFORGE_LAB_HARDWARE", str(path))
    hw = hardware.load_hardware()
    assert [f["count"] for f in hardware.faults_of(hw, "ecc_dbe")] == [5]
    gpus = hardware.visible_gpus(hw)
    assert [g["profile_index"] for g in gpus] == [0, 2, 3, 4, 5, 6, 7]
    assert (gpus[1]["index"], gpus[1]["ecc_dbe"], gpus[1]["bus_id"]) == (1, 5, "00000000:0A:00.0")
    hcas = {h["name"]: h for h in hardware.visible_hcas(hw)}
    assert sorted(hcas) == ["mlx5_0", "mlx5_1", "mlx5_2"]
    assert (hcas["mlx5_0"]["ports"][0]["state"], hcas["mlx5_0"]["ports"][0]["phys_state"]) == ("Down", "Polling")
    assert (hcas["mlx5_1"]["ports"][0]["rate_gbit_per_s"], hcas["mlx5_1"]["ports"][0]["speed"]) == (56, "FDR")
    assert (hcas["mlx5_2"]["ports"][0]["width"], hcas["mlx5_2"]["ports"][0]["speed"]) == ("1X", "EDR")
    head = hardware_document(load_profile("head"), [])
    assert hardware.visible_gpus(head) == []
