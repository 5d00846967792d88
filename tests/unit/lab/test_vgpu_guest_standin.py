"""The lab's stand-in of a site's vGPU guest driver (src/gpuforge/lab/vgpu_guest.py, gpuforge_sim.nvidia_gridd): the
simulated nvidia-gridd leases only with FeatureType != 0 and a token, and the simulated nvidia-smi prints its lease as
the real guest's licence section (tests/fixtures/nvidia-smi-vgpu), read through the project's parser and judged by
the registry's vgpu_license check; the .deb and .rpm carry the package name, release and files molecule/vgpu_guest
pins, with a SHA256SUMS that matches them."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_registry as registry
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_nvidia_smi import parse_query_xml
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_vgpu_license import parse_license_text
from gpuforge_sim import nvidia_gridd, nvidia_smi

from gpuforge.lab import vgpu_guest
from gpuforge.lab.profiles import hardware_document, load_profile

JUDGE = next(check.judge for check in registry.CHECKS if check.names == ("vgpu_license",))


@pytest.fixture
def guest(tmp_path, monkeypatch):
    """A vGPU guest node with the stand-in's files installed (driver json, marker, nvidia.ko) and /etc/nvidia."""
    lib = tmp_path / "lib"
    (lib / "modules").mkdir(parents=True)
    (lib / "modules" / "nvidia.ko").write_text("{}", encoding="ascii")
    for path, text in vgpu_guest.package()["files"].items():
        (lib / path.rsplit("/", 1)[-1]).write_text(text, encoding="utf-8")
    document = hardware_document(load_profile("vsphere-t4-vgpu-roce"), [])
    (tmp_path / "hardware.json").write_text(json.dumps(document), encoding="utf-8")
    (tmp_path / "etc" / "ClientConfigToken").mkdir(parents=True)
    monkeypatch.setenv("GPUFORGE_LAB_RUN", str(tmp_path / "run"))
    monkeypatch.setenv("GPUFORGE_LAB_LIB", str(lib))
    monkeypatch.setenv("GPUFORGE_LAB_HARDWARE", str(tmp_path / "hardware.json"))
    monkeypatch.setenv("GPUFORGE_LAB_GRIDD_CONFIG_DIR", str(tmp_path / "etc"))
    return tmp_path / "etc"


def smi(*argv: str) -> str:
    out = io.StringIO()
    assert nvidia_smi.main(list(argv), out=out, err=io.StringIO()) == 0
    return out.getvalue()


def licence(view: str) -> dict:
    text = smi("-q") if view == "text" else smi("-q", "-x")
    gpus = parse_license_text(text)["gpus"] if view == "text" else parse_query_xml(text)["gpus"]
    assert len(gpus) == 1
    return gpus[0]["license" if view == "text" else "vgpu_license"]


@pytest.mark.parametrize(
    ("feature_type", "token", "licensed"),
    [("1", "token", True), ("4", "token", True), ("0", "token", False), ("1", None, False), (None, "token", False)],
)
def test_gridd_leases_only_with_a_feature_type_and_a_token(guest, feature_type, token, licensed):
    if feature_type is not None:
        (guest / "gridd.conf").write_text(f"# lab\nFeatureType={feature_type}\n", encoding="utf-8")
    if token:
        (guest / "ClientConfigToken" / "client_configuration_token.tok").write_text(token, encoding="utf-8")
    assert nvidia_gridd.main(["--once"]) == 0
    for view in ("text", "xml"):
        state = licence(view)
        assert state["licensed"] is licensed, state
        assert state["product"] == "NVIDIA Virtual Compute Server"
    xml = parse_query_xml(smi("-q", "-x"))
    record = JUDGE({"nvidia_smi": xml}, {"vgpu_guest": True})
    assert record["status"] == ("PASS" if licensed else "FAIL"), record
    if not licensed:
        assert "GPU 0 (00000000:02:02.0)" in record["fault"] and "Unlicensed (Restricted)" in record["fault"]


def test_without_gridd_the_stand_in_guest_is_unlicensed_and_a_stopped_gridd_returns_the_lease(guest):
    assert licence("text")["status"] == "Unlicensed (Restricted)"
    (guest / "gridd.conf").write_text("FeatureType=1\n", encoding="utf-8")
    (guest / "ClientConfigToken" / "a.tok").write_text("token", encoding="utf-8")
    assert nvidia_gridd.main(["--once"]) == 0
    assert licence("text")["status"].startswith("Licensed (Expiry: ")
    with pytest.raises(SystemExit):
        nvidia_gridd._release()
    assert licence("xml")["status"] == "Unlicensed (Restricted)"


def test_a_fault_still_wins_over_the_lease(guest, tmp_path):
    document = json.loads((tmp_path / "hardware.json").read_text(encoding="utf-8"))
    document["faults"] = [{"type": "vgpu_unlicensed", "status": "Unlicensed (Unrestricted)"}]
    (tmp_path / "hardware.json").write_text(json.dumps(document), encoding="utf-8")
    (guest / "gridd.conf").write_text("FeatureType=1\n", encoding="utf-8")
    (guest / "ClientConfigToken" / "a.tok").write_text("token", encoding="utf-8")
    nvidia_gridd.main(["--once"])
    assert licence("text")["status"] == "Unlicensed (Unrestricted)"


def test_feature_type_reads_the_last_setting_and_ignores_comments():
    assert nvidia_gridd.feature_type("# FeatureType=4\nFeatureType = 1\n") == 1
    assert nvidia_gridd.feature_type("FeatureType=x\n") is None
    assert nvidia_gridd.feature_type("") is None


@pytest.mark.skipif(
    shutil.which("dpkg-deb") is None or shutil.which("rpmbuild") is None, reason="needs dpkg-deb, rpmbuild"
)
def test_the_published_files_carry_the_pinned_name_and_release_and_their_sha256(tmp_path):
    sums = vgpu_guest.publish(tmp_path / "mirror", tmp_path / "staging", log=lambda _line: None)
    directory = tmp_path / "mirror" / vgpu_guest.DIRECTORY
    deb = directory / "nvidia-linux-grid-535_535.161.08_amd64.deb"
    rpm = directory / "nvidia-linux-grid-535-535.161.08-1.x86_64.rpm"
    assert set(sums) == {deb.name, rpm.name}
    listed = dict(reversed(line.split()) for line in (directory / "SHA256SUMS").read_text().splitlines())
    assert listed == sums == {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (deb, rpm)}
    fields = subprocess.run(
        ["dpkg-deb", "--field", str(deb), "Package", "Version", "Depends"], capture_output=True, text=True, check=True
    ).stdout
    assert "Package: nvidia-linux-grid-535" in fields and "Version: 535.161.08" in fields
    assert "Depends: gpuforge-lab-sim" in fields
    contents = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout
    for path in ("./usr/bin/nvidia-gridd", "./usr/bin/nvidia-smi", "./lib/systemd/system/nvidia-gridd.service"):
        assert path in contents
    query = subprocess.run(
        ["rpm", "-qp", "--nosignature", "--qf", "%{NAME} %{VERSION}\\n", "--requires", str(rpm)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert query.splitlines()[0] == "nvidia-linux-grid-535 535.161.08"
    assert "gpuforge-lab-sim" in query
    # Rebuilt from the same inputs, the same bytes: a converged node's pinned sha256 stays valid.
    again = vgpu_guest.publish(tmp_path / "mirror2", tmp_path / "staging2", log=lambda _line: None)
    assert again == sums
