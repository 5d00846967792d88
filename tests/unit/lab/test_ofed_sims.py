"""Simulated ofed_info, openibd (through a fake modprobe) and opensm."""

from __future__ import annotations

import json
import sys

from gpuforge_sim import ofed_info, openibd, opensm
from ib_sim_helpers import run_tool, write_hardware

from gpuforge import vendor_facts
from gpuforge.lab import mirror

FAKE_MODPROBE = """import json, os, sys
table = os.path.join(os.environ["GPUFORGE_LAB_RUN"], "modules")
rows = [json.loads(l) for l in open(table)] if os.path.exists(table) else []
deps = {"ib_core": [], "mlx5_core": [], "mlx5_ib": ["mlx5_core", "ib_core"], "mlx_compat": []}
args = sys.argv[1:]
if args[0] == "-r":
    rows = [r for r in rows if r["name"] != args[1]]
elif all(r["name"] != args[0] for r in rows):
    rows.append({"name": args[0], "size": 1, "depends": deps.get(args[0], ["ib_core"])})
open(table, "w").writelines(json.dumps(r) + "\\n" for r in rows)
"""


def _install_ofed_scripts(tmp_path, monkeypatch) -> None:
    """The data file of the lab's ofed-scripts package, as the mirror generates it from the registry."""
    definitions = mirror.load_definitions()
    definitions["publish"] = ["nvidia-doca/debian12"]
    package = next(p for p in mirror.expand(definitions) if p["name"] == "ofed-scripts")
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "ofed_info.json").write_text(package["files"]["/usr/lib/gpuforge-lab/ofed_info.json"], encoding="utf-8")
    monkeypatch.setenv("GPUFORGE_LAB_LIB", str(lib))


def test_ofed_info_prints_the_doca_release_tag_of_the_registry(tmp_path, monkeypatch, capsys):
    # A DOCA-OFED host prints OFED-internal-<version>: (DDN EXA client notes), never MLNX_OFED_LINUX-.
    _install_ofed_scripts(tmp_path, monkeypatch)
    doca = vendor_facts.repository("nvidia-doca/debian12")
    assert run_tool(ofed_info, ["-s"], capsys) == (0, doca.fact("ofed_info_s") + "\n", "")
    assert run_tool(ofed_info, ["-s"], capsys)[1] == "OFED-internal-24.10-1.1.4.0.200:\n"
    assert run_tool(ofed_info, ["-n"], capsys)[1] == doca.fact("ofed_info_n") + "\n"
    _rc, out, _ = run_tool(ofed_info, [], capsys)
    assert out.splitlines()[0] == "OFED-internal-24.10-1.1.4.0.200 (OFED-24.10-1.1.4):"
    assert "Installed Packages:" in out


def test_ofed_info_without_its_package_fails(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GPUFORGE_LAB_LIB", str(tmp_path))
    rc, _out, err = run_tool(ofed_info, ["-s"], capsys)
    assert rc == 1 and "ofed_info.json is missing" in err


def _setup_kernel(tmp_path, monkeypatch, modules):
    run, lib = tmp_path / "run", tmp_path / "lib"
    run.mkdir()
    (lib / "modules").mkdir(parents=True)
    for name in modules:
        (lib / "modules" / f"{name}.ko").write_text("{}", encoding="utf-8")
    script = tmp_path / "modprobe"
    script.write_text(f"#!{sys.executable}\n{FAKE_MODPROBE}", encoding="utf-8")
    script.chmod(0o755)
    monkeypatch.setenv("GPUFORGE_LAB_RUN", str(run))
    monkeypatch.setenv("GPUFORGE_LAB_LIB", str(lib))
    monkeypatch.setenv("GPUFORGE_SIM_MODPROBE", str(script))
    return run / "modules"


def test_openibd_start_status_stop(tmp_path, monkeypatch, capsys):
    table = _setup_kernel(tmp_path, monkeypatch, ["mlx_compat", "ib_core", "mlx5_core", "mlx5_ib"])
    assert run_tool(openibd, ["status"], capsys)[0] == 3
    rc, out, _ = run_tool(openibd, ["start"], capsys)
    assert rc == 0 and out.rstrip().endswith("[  OK  ]")
    assert [json.loads(line)["name"] for line in table.read_text().splitlines()] == [
        "mlx_compat", "ib_core", "mlx5_core", "mlx5_ib"]  # fmt: skip
    rc, out, _ = run_tool(openibd, ["status"], capsys)
    assert rc == 0 and "  HCA driver loaded" in out and "  mlx5_ib" in out
    assert run_tool(openibd, ["stop"], capsys)[0] == 0
    assert table.read_text() == ""


def test_openibd_stop_refuses_while_peermem_holds_ib_core(tmp_path, monkeypatch, capsys):
    table = _setup_kernel(tmp_path, monkeypatch, ["ib_core", "mlx5_core", "mlx5_ib"])
    run_tool(openibd, ["start"], capsys)
    with table.open("a") as handle:
        handle.write(json.dumps({"name": "nvidia_peermem", "size": 1, "depends": ["nvidia", "ib_core"]}) + "\n")
    rc, out, err = run_tool(openibd, ["restart"], capsys)
    assert rc == 1
    assert "ERROR: Module ib_core is in use by nvidia_peermem" in err
    assert "[FAILED]" in out


def test_opensm_sweeps_and_reports_subnet_up(tmp_path, monkeypatch, capsys):
    write_hardware(tmp_path, monkeypatch, "dgx1-v100-edr")
    monkeypatch.setenv("GPUFORGE_LAB_OPENSM_LOG", str(tmp_path / "opensm.log"))
    rc, out, _ = run_tool(opensm, ["--once"], capsys)
    assert rc == 0
    assert "Entering MASTER state" in out and "SUBNET UP" in out
    assert "SUBNET UP" in (tmp_path / "opensm.log").read_text()


def test_opensm_without_active_port_exits(tmp_path, monkeypatch, capsys):
    faults = [{"type": "ib_port_state", "hca": f"mlx5_{i}", "port": 1, "state": "Down"} for i in range(4)]
    write_hardware(tmp_path, monkeypatch, "dgx1-v100-edr", faults)
    monkeypatch.setenv("GPUFORGE_LAB_OPENSM_LOG", str(tmp_path / "opensm.log"))
    rc, out, _ = run_tool(opensm, [], capsys)
    assert rc == 1 and "No local ports" in out
