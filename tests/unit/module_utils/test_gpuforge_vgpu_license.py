"""The vGPU guest's licence (module_utils/gpuforge_vgpu_license.py): parsed from the real `nvidia-smi -q` sections of
tests/fixtures/nvidia-smi-vgpu (SOURCES.md: one licensed, two unlicensed guests), read into nvidia-smi's GPU
dictionary by parse_query_text/-xml, printed by the lab's simulated nvidia-smi in the same format, and judged by
the vgpu_license check through gpu_node_check on the lab's vGPU guest with and without the vgpu_unlicensed fault."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_registry as registry
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_nvidia_smi import (
    parse_query_text,
    parse_query_xml,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_vgpu_license import (
    judge_vgpu_license,
    license_state,
    parse_license_text,
    parse_license_xml,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from node_sim_helpers import SimNode, expected_for

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
VGPU = FIXTURES / "nvidia-smi-vgpu"
PROFILE = "vsphere-t4-vgpu-roce"


def _read(name):
    return (VGPU / name).read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("name", "status", "licensed", "restricted", "expiry"),
    [
        (
            "nrec-docs_vcs_licensed_q_EXCERPT.txt",
            "Licensed (Expiry: 2023-1-31 11:32:22 GMT)",
            True,
            None,
            "2023-1-31 11:32:22 GMT",
        ),
        ("gpu-operator-628_vcs_unlicensed-restricted_q_EXCERPT.txt", "Unlicensed (Restricted)", False, True, None),
        ("gpu-operator-220_vcs_unlicensed_q_EXCERPT.txt", "Unlicensed", False, None, None),
    ],
)
def test_the_real_sections_parse(name, status, licensed, restricted, expiry):
    parsed = parse_license_text(_read(name))
    assert parsed["driver_version"] is None  # an excerpt: no header
    (gpu,) = parsed["gpus"]
    assert gpu["bus_id"] is None
    assert gpu["license"] == {
        "product": "NVIDIA Virtual Compute Server",
        "status": status,
        "licensed": licensed,
        "restricted": restricted,
        "expiry": expiry,
    }


def test_a_gpu_without_vgpu_software_has_no_licence():
    # The H200 passed through to a VM (no vGPU software): no licence section, in text and in XML.
    text = (FIXTURES / "nvidia-smi/gpuforge-device_1xh200_drv580.159.04_q.txt").read_text(encoding="utf-8")
    parsed = parse_license_text(text)
    assert parsed["driver_version"] == "580.159.04"
    assert [g["license"] for g in parsed["gpus"]] == [None]
    assert parsed["gpus"][0]["product_name"].startswith("NVIDIA H200")
    assert parse_query_text(text)["gpus"][0]["vgpu_license"] is None
    xml = (FIXTURES / "nvidia-smi/gpuforge-device_1xh200_drv580.159.04_q_x.xml").read_text(encoding="utf-8")
    assert parse_license_xml(xml)["gpus"][0]["license"] is None
    assert parse_query_xml(xml)["gpus"][0]["vgpu_license"] is None


@pytest.mark.parametrize(
    "status",
    ["Licensed (Expiry: 2023-1-31 11:32:22 GMT)", "Unlicensed (Restricted)", "Unlicensed (Unrestricted)"],
)
def test_the_xml_elements_read_the_same(status):
    xml = (
        '<?xml version="1.0" ?><nvidia_smi_log><driver_version>535.161.08</driver_version>'
        '<gpu id="00000000:02:02.0"><product_name>GRID T4-16C</product_name><vgpu_software_licensed_product>'
        f"<licensed_product_name>NVIDIA Virtual Compute Server</licensed_product_name><license_status>{status}"
        "</license_status></vgpu_software_licensed_product></gpu></nvidia_smi_log>"
    )
    parsed = parse_license_xml(xml)
    assert parsed["gpus"][0]["bus_id"] == "00000000:02:02.0"
    assert parsed["gpus"][0]["license"] == license_state("NVIDIA Virtual Compute Server", status)
    assert parse_query_xml(xml)["gpus"][0]["vgpu_license"]["licensed"] is status.startswith("Licensed")


@pytest.mark.parametrize("text", ["", "   \n", "nothing here\n"])
def test_no_gpu_and_no_section_is_an_error(text):
    with pytest.raises(ParseError):
        parse_license_text(text)


@pytest.mark.parametrize("status", ["Licensed-ish", "N/A", ""])
def test_a_status_it_does_not_know_is_never_read_as_licensed(status):
    with pytest.raises(ParseError, match="neither 'Licensed' nor"):
        license_state("NVIDIA Virtual Compute Server", status)


def test_not_xml_is_an_error():
    with pytest.raises(ParseError, match="no <nvidia_smi_log>"):
        parse_license_xml("vGPU Software Licensed Product")
    with pytest.raises(ParseError, match="not well-formed"):
        parse_license_xml("<nvidia_smi_log><gpu>")


def _smi(*licences):
    return {
        "gpus": [{"index": i, "bus_id": f"0000000{i}:02:02.0", "vgpu_license": lic} for i, lic in enumerate(licences)]
    }


def test_the_check_fails_an_unlicensed_guest_and_names_the_fix():
    ok = license_state("NVIDIA Virtual Compute Server", "Licensed (Expiry: 2023-1-31 11:32:22 GMT)")
    bad = license_state("NVIDIA Virtual Compute Server", "Unlicensed (Unrestricted)")
    assert judge_vgpu_license({"nvidia_smi": _smi(ok)}, {"vgpu_guest": True})["status"] == "PASS"
    check = judge_vgpu_license({"nvidia_smi": _smi(ok, bad)}, {"vgpu_guest": True})
    assert check["status"] == "FAIL"
    assert "GPU 1" in check["fault"] and "Unlicensed (Unrestricted)" in check["fault"] and "GPU 0" not in check["fault"]
    assert "gridd.conf" in check["remedy"] and "ClientConfigToken" in check["remedy"]
    # a guest whose driver prints no licence section (not the vGPU guest driver) fails too
    assert judge_vgpu_license({"nvidia_smi": _smi(None)}, {"vgpu_guest": True})["status"] == "FAIL"
    unreadable = judge_vgpu_license({"nvidia_smi": registry.Unreadable("nvidia-smi not found")}, {"vgpu_guest": True})
    assert unreadable["status"] == "FAIL" and "nvidia-smi not found" in unreadable["fault"]


def test_only_a_vgpu_guest_is_judged():
    assert judge_vgpu_license({"nvidia_smi": _smi(None)}, {"vgpu_guest": False})["status"] == "PASS"
    assert judge_vgpu_license({"nvidia_smi": _smi(None)}, {})["status"] == "PASS"


@pytest.mark.parametrize(
    ("faults", "licensed"),
    [
        ([], True),
        ([{"type": "vgpu_unlicensed"}], False),
        ([{"type": "vgpu_unlicensed", "gpu": 0, "status": "Unlicensed (Unrestricted)"}], False),
    ],
)
def test_the_lab_guest_prints_the_real_format_and_the_check_reads_it(tmp_path, monkeypatch, faults, licensed):
    node = SimNode(tmp_path, monkeypatch, PROFILE, faults)
    rc, text, _err = node.smi("-q")
    assert rc == 0
    section = parse_license_text(text)["gpus"][0]["license"]
    assert section["product"] == "NVIDIA Virtual Compute Server" and section["licensed"] is licensed
    rc, xml, _err = node.smi("-q", "-x")
    assert parse_license_xml(xml)["gpus"][0]["license"]["licensed"] is licensed
    if licensed:
        assert section["expiry"].endswith(" GMT")
    facts = node.nvidia_smi_facts()
    check = judge_vgpu_license({"nvidia_smi": facts}, expected_for(PROFILE))
    assert check["status"] == ("PASS" if licensed else "FAIL")
