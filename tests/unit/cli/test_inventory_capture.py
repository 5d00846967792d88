"""`gpuforge inventory capture`: facts from the real parsers (real outputs, the lab simulator) become an
expected system that the inventory check accepts and that the node-health judge finds healthy."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from ansible.plugins.loader import cache_loader
from ansible_collections.gpuforge.cluster.plugins.filter.gpuforge_inventory import check_inventory
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_infiniband as ib
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_nvidia_smi as nv
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_kernel import parse_lsmod
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_node_health import judge_node

from gpuforge import cli, inventory_capture
from gpuforge.inventory_capture import CaptureError, capture, default_tables, load_facts, render

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "module_utils"))
from node_sim_helpers import GPU_PROFILES, SimNode, expected_for

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures"
H100_QUERY = "nvidia-smi-q-text__leptonai-gpud__8xh100_drv535.183.01.txt"
H100_TOPO = "nvidia-smi-topo-m__sgl-project-sglang__issue30401__8xh100_8nic.txt"
H100_IBSTAT = "ibstat__leptonai-gpud__h100_cx7_roce400_some_down_polling.txt"


def smi_facts(query: dict, topo: dict | None = None) -> dict:
    """nvidia_smi_facts' shape: parse_query_* GPUs with topo -m's affinity and NIC paths attached."""
    by_index = {g["index"]: g for g in (topo or {}).get("gpus", [])}
    for gpu in query["gpus"]:
        row = by_index.get(gpu["index"], {})
        gpu.update(
            product_label=nv.gpu_product_label(gpu["product_name"] or ""),
            cpu_affinity=row.get("cpu_affinity"),
            numa_affinity=row.get("numa_affinity"),
            nics=row.get("nics", {}),
            nvlink=None,
        )
    return {"driver_version": query["driver_version"], "gpu_count": query["gpu_count"], "gpus": query["gpus"]}


def ib_facts(parsed: dict) -> dict:
    return {"available": True, "hcas": parsed["cas"], "errors": parsed["errors"]}


def accepted(result) -> list:
    """Problems the inventory check finds in the snippet, for a GPU node that uses it as its host_vars."""
    variables = yaml.safe_load(render(result))
    return check_inventory({result.node: variables}, {"all": [result.node], "gpu_nodes": [result.node]})


def judge(facts: dict, result, node: SimNode) -> dict:
    """gpu_node_check's verdict with the captured spec (as validate_node.yml builds `expected`)."""
    variables = yaml.safe_load(render(result))
    tables = default_tables()
    skus = {**tables["skus"], **variables.get("gpuforge_expected_gpu_skus", {})}
    speeds = variables.get("gpuforge_expected_link_speeds", tables["link_speeds"])
    system = variables["gpuforge_expected_systems"][variables["gpuforge_expected_system"]]
    expected = {**skus[system["gpu_sku"]], **system, "link_speeds": speeds, "xid_fatal": [48, 79]}
    return judge_node(facts["nvidia_smi"], facts["infiniband"], parse_lsmod(node.lsmod()), [], expected)


# -- real outputs: DGX H100 ------------------------------------------------------------------------------------


def test_dgx_h100_from_real_outputs(real_output):
    facts = {
        "nvidia_smi": smi_facts(
            nv.parse_query_text(real_output(H100_QUERY)), nv.parse_topo_matrix(real_output(H100_TOPO))
        ),
        "infiniband": ib_facts(ib.parse_ibstat(real_output(H100_IBSTAT))),
    }
    result = capture(facts, "dgx-h100-01.example.com", system="dgx-h100-site")
    variables = result.variables
    assert variables["gpuforge_expected_system"] == "dgx-h100-site"
    assert variables["gpuforge_expected_gpu_count"] == 8
    assert variables["gpuforge_gpu_architecture"] == "Hopper"
    assert variables["gpuforge_gpu_nvswitch"] is True  # Fabric State: Completed
    system = variables["gpuforge_expected_systems"]["dgx-h100-site"]
    assert (system["gpu_sku"], system["gpu_count"]) == ("H100-80GB-HBM3", 8)  # the defaults' SKU, no new entry
    assert "gpuforge_expected_gpu_skus" not in variables
    assert "gpuforge_expected_link_speeds" not in variables  # 400 GbE and 100 GbE RoCE are in the defaults
    hcas = {h["name"]: [p["link"] for p in h["ports"]] for h in system["hcas"]}
    assert hcas["mlx5_0"] == ["400GbE"] and hcas["mlx5_1"] == ["100GbE"]
    # Ports that were down on the "known-good" node are not expected, and the notes say so.
    assert "mlx5_5" not in hcas and "mlx5_11" not in hcas
    assert any("mlx5_5/1 Down/Disabled" in note for note in result.notes)
    assert system["numa_affinity"] == [
        {"gpus": [0, 1, 2, 3], "hcas": ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"], "numa": 0},
        {"gpus": [4, 5, 6, 7], "hcas": ["mlx5_4", "mlx5_6", "mlx5_7"], "numa": 1},
    ]
    assert accepted(result) == []


def test_unknown_gpu_gets_its_own_sku_entry(real_output):
    query = nv.parse_query_xml(real_output("nvidia-smi-q-x__netdata-go.d.plugin__tesla-p100.xml"))
    facts = {"nvidia_smi": smi_facts(query), "infiniband": {"available": False, "hcas": []}}
    result = capture(facts, "p100-01")
    variables = result.variables
    sku = variables["gpuforge_expected_systems"]["p100-01-captured"]["gpu_sku"]
    entry = variables["gpuforge_expected_gpu_skus"][sku]
    assert sku == query["gpus"][0]["product_name"].removeprefix("Tesla ").replace(" ", "-")
    assert entry["gpu_model"] == query["gpus"][0]["product_name"]
    assert entry["xid_fatal"] == "{{ gpuforge_expected_xid_fatal }}"
    assert isinstance(entry["memory_mib"], int) and entry["pcie_width_max"] == 16
    assert "hcas" not in variables["gpuforge_expected_systems"]["p100-01-captured"]
    assert any("not in the role defaults" in note for note in result.notes)
    assert accepted(result) == []


# -- the lab simulator: the captured spec judges the same node healthy -----------------------------------------


@pytest.mark.parametrize("profile", GPU_PROFILES)
def test_capture_of_a_healthy_lab_node_matches_the_defaults_and_judges_it_healthy(tmp_path, monkeypatch, profile):
    node = SimNode(tmp_path, monkeypatch, profile)
    facts = {"nvidia_smi": node.nvidia_smi_facts(), "infiniband": node.infiniband_facts()}
    result = capture(facts, "gpu01", system=profile)
    system = result.variables["gpuforge_expected_systems"][profile]
    default = default_tables()["systems"][profile]
    assert system["gpu_sku"] == default["gpu_sku"]
    assert system["gpu_count"] == default["gpu_count"]
    assert system["hcas"] == default["hcas"]
    # Every NUMA group of the defaults, with at least its HCAs (capture also lists the other same-socket HCAs,
    # e.g. the DGX H100's storage port mlx5_9, and GPU groups without a local HCA).
    captured = {(tuple(g["gpus"]), g["numa"]): set(g["hcas"]) for g in system["numa_affinity"]}
    for group in default["numa_affinity"]:
        assert set(group["hcas"]) <= captured[(tuple(group["gpus"]), group["numa"])]
    assert accepted(result) == []
    verdict = judge(facts, result, node)
    failed = [c for c in verdict["checks"] if c["status"] == "FAIL" and c["name"] != "driver_branch"]
    assert failed == [], failed
    assert expected_for(profile)["gpu_count"] == system["gpu_count"]


def test_dgx1_seed_topology_without_numa_column_groups_by_cpu_affinity(tmp_path, monkeypatch):
    """IBM Redpaper REDP-5610's topo -m (driver 440: no NUMA column, mlx5_N columns) on the DGX-1's GPUs."""
    node = SimNode(tmp_path, monkeypatch, "dgx1-v100-edr")
    smi = node.nvidia_smi_facts()
    topo = nv.parse_topo_matrix((FIXTURES / "nvidia-smi" / "redp5610_dgx1_topo_m_drv440.txt").read_text())
    infiniband = ib.parse_ibstatus((FIXTURES / "ibstatus" / "dgx1_edr_4port_redp5610.txt").read_text())
    by_index = {g["index"]: g for g in topo["gpus"]}
    for gpu in smi["gpus"]:
        row = by_index[gpu["index"]]
        gpu.update(numa_affinity=row["numa_affinity"], cpu_affinity=row["cpu_affinity"], nics=row["nics"])
    facts = {"nvidia_smi": smi, "infiniband": {"hcas": infiniband["cas"]}}
    result = capture(facts, "dgx01.example.com")
    system = result.variables["gpuforge_expected_systems"]["dgx01-captured"]
    assert system["numa_affinity"] == default_tables()["systems"]["dgx1-v100-edr"]["numa_affinity"]
    assert [h["ports"] for h in system["hcas"]] == [[{"port": 1, "link": "EDR"}]] * 4
    assert any("no NUMA column" in note for note in result.notes)
    assert accepted(result) == []


def test_vgpu_guest_without_persistence_keeps_the_defaults_sku(tmp_path, monkeypatch):
    node = SimNode(tmp_path, monkeypatch, "vsphere-t4-vgpu-roce")
    result = capture({"nvidia_smi": node.nvidia_smi_facts(), "infiniband": node.infiniband_facts()}, "vm01")
    system = result.variables["gpuforge_expected_systems"]["vm01-captured"]
    assert system["gpu_sku"] == "GRID-T4-16C"
    assert system["hcas"] == [{"name": "mlx5_0", "ports": [{"port": 1, "link": "100GbE"}]}]
    assert "gpuforge_gpu_nvswitch" not in result.variables


# -- link speeds and errors -----------------------------------------------------------------------------------


def test_a_link_speed_the_defaults_lack_is_added_with_the_ones_the_system_uses(tmp_path, monkeypatch):
    node = SimNode(tmp_path, monkeypatch, "poweredge-c4140-v100")
    infiniband = node.infiniband_facts()
    port = infiniband["hcas"][0]["ports"][0]
    port.update(rate_gbit_per_s=56, link_layer="InfiniBand")  # FDR
    infiniband["hcas"].append(
        {
            "name": "mlx5_1",
            "ports": [{"port": 1, "state": "Active", "rate_gbit_per_s": 100, "link_layer": "InfiniBand"}],
        }
    )
    result = capture({"nvidia_smi": node.nvidia_smi_facts(), "infiniband": infiniband}, "c4140")
    speeds = result.variables["gpuforge_expected_link_speeds"]
    assert speeds == {
        "EDR": {"rate_gbit_per_s": 100, "link_layer": "InfiniBand"},
        "FDR": {"rate_gbit_per_s": 56, "link_layer": "InfiniBand"},
    }
    assert accepted(result) == []


def test_no_gpu_is_an_error_naming_the_node_and_the_facts_errors():
    facts = {"nvidia_smi": {"gpus": [], "errors": ["nvidia-smi -q -x exited with code 9"]}, "infiniband": {}}
    with pytest.raises(CaptureError, match=r"gpu01: nvidia-smi lists no GPU .*exited with code 9"):
        capture(facts, "gpu01")


def test_mixed_gpu_models_are_refused(tmp_path, monkeypatch):
    node = SimNode(tmp_path, monkeypatch, "dgx1-v100-edr")
    smi = node.nvidia_smi_facts()
    smi["gpus"][7]["product_name"] = "Tesla V100-SXM2-32GB"
    with pytest.raises(CaptureError, match="one GPU model"):
        capture({"nvidia_smi": smi, "infiniband": {}}, "gpu01")


@pytest.mark.parametrize("wrap", ["facts", "module_result", "fact_cache"])
def test_load_facts_accepts_the_three_shapes(tmp_path, wrap):
    facts = {"nvidia_smi": {"gpus": []}, "infiniband": {"hcas": []}}
    document = {
        "facts": facts,
        "module_result": {"changed": False, "ansible_facts": facts},
        "fact_cache": {**facts, "ansible_hostname": "gpu01", "discovered_interpreter_python": "/usr/bin/python3"},
    }[wrap]
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    assert load_facts(path) == facts


def test_load_facts_reads_the_fact_cache_as_ansible_writes_it(tmp_path):
    # The file a real run leaves in .gpuforge/facts, written by the cache plugin itself (ansible-core 2.19 stores
    # {"__payload__": "<JSON>"} under a schema-qualified name), not a shape written by hand.
    facts = {"nvidia_smi": {"gpus": [{"index": 0}]}, "infiniband": {"hcas": []}, "ansible_hostname": "gpu01"}
    cache_loader.get("ansible.builtin.jsonfile", _uri=str(tmp_path / "facts"), _timeout=0).set("gpu01", facts)
    (path,) = (tmp_path / "facts").iterdir()
    assert path.name.endswith("_gpu01")
    assert load_facts(path) == {"nvidia_smi": facts["nvidia_smi"], "infiniband": facts["infiniband"]}


def test_load_facts_names_the_problem(tmp_path):
    path = tmp_path / "facts.json"
    path.write_text('{"ansible_facts": {"distribution": "Debian"}}', encoding="utf-8")
    with pytest.raises(CaptureError, match="holds no nvidia_smi facts"):
        load_facts(path)
    with pytest.raises(CaptureError, match="cannot read facts"):
        load_facts(tmp_path / "missing.json")


# -- the command -----------------------------------------------------------------------------------------------


def test_cli_from_facts_prints_a_snippet_that_yamllint_and_the_check_accept(tmp_path, monkeypatch, capsys):
    from yamllint import linter
    from yamllint.config import YamlLintConfig

    node = SimNode(tmp_path, monkeypatch, "dgx-h100-ndr")
    path = tmp_path / "facts.json"
    path.write_text(json.dumps({"nvidia_smi": node.nvidia_smi_facts(), "infiniband": node.infiniband_facts()}))
    assert cli.main(["inventory", "capture", "dgxh100-07", "--from-facts", str(path), "--system", "dgx-h100"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("---\n# Expected hardware of dgxh100-07")
    assert str(path) in out  # the source
    variables = yaml.safe_load(out)
    assert variables["gpuforge_expected_system"] == "dgx-h100"
    assert check_inventory({"dgxh100-07": variables}, {"all": ["dgxh100-07"], "gpu_nodes": ["dgxh100-07"]}) == []
    config = YamlLintConfig(file=str(ROOT / ".yamllint"))
    assert [str(p) for p in linter.run(out, config)] == []


def test_cli_writes_to_a_file_and_reports_errors(tmp_path, capsys):
    path = tmp_path / "facts.json"
    path.write_text(json.dumps({"nvidia_smi": {"gpus": [], "errors": ["nvidia-smi not found"]}}))
    assert cli.main(["inventory", "capture", "gpu01", "--from-facts", str(path), "-o", str(tmp_path / "x.yml")]) == 1
    assert "gpuforge inventory capture: gpu01: nvidia-smi lists no GPU" in capsys.readouterr().err
    assert not (tmp_path / "x.yml").exists()


def test_cli_without_facts_runs_the_fact_modules_through_ansible_runner(monkeypatch, capsys):
    calls = []

    def gather(node, inventory, become=True):
        calls.append((node, inventory, become))
        return {"nvidia_smi": {"gpus": [], "errors": ["unreachable"]}, "infiniband": {}}

    monkeypatch.setattr(inventory_capture, "gather_facts", gather)
    assert cli.main(["inventory", "capture", "gpu01", "-i", "inventories/sample/dgx-h100-ndr/hosts.yml", "--no-become"])
    assert calls == [("gpu01", (ROOT / "inventories/sample/dgx-h100-ndr/hosts.yml").resolve(), False)]


def test_gather_facts_runs_the_modules_on_an_inventory_host(tmp_path):
    """A real ansible-runner run on localhost: the modules run and return their facts (no GPU needed)."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
        "      ansible_python_interpreter: '{{ ansible_playbook_python }}'\n",
        encoding="utf-8",
    )
    facts = inventory_capture.gather_facts("localhost", inventory, become=False)
    assert isinstance(facts["nvidia_smi"].get("gpus"), list)
    assert isinstance(facts["infiniband"], dict)
    with pytest.raises(CaptureError, match="could not read the facts of gpu99"):
        inventory_capture.gather_facts("gpu99", inventory, become=False)
