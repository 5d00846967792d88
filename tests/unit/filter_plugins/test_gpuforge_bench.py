"""filter_plugins/gpuforge_bench.py: thresholds as data (issue 17) and the role's records built in Python, and the
task expressions of roles/gpuforge_bench that call them. The threshold tables are read from the gpuforge role's
defaults as shipped (roles/gpuforge/defaults/main/acceptance_checks.yml, expected_hardware.yml)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible_collections.gpuforge.cluster.plugins.filter import gpuforge as gpuforge_filters
from ansible_collections.gpuforge.cluster.plugins.filter import gpuforge_bench as bench
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_records as records
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_localize import ib_schedule
from ansible_collections.gpuforge.cluster.plugins.modules import ib_write_bw
from bench_summaries import schema_validator

ROOT = Path(__file__).resolve().parents[3]
ROLE = ROOT / "roles" / "gpuforge_bench"
GPUFORGE_DEFAULTS = ROOT / "roles" / "gpuforge" / "defaults" / "main"


def _yaml(path: Path):
    return yaml.safe_load(path.read_text(encoding="utf-8"))


ACCEPTANCE = _yaml(GPUFORGE_DEFAULTS / "acceptance_checks.yml")
HARDWARE = _yaml(GPUFORGE_DEFAULTS / "expected_hardware.yml")
BENCH_DEFAULTS = _yaml(ROLE / "defaults" / "main.yml")
IB_TABLE = ACCEPTANCE["gpuforge_expected_ib_write_bw"]
NCCL_TABLE = ACCEPTANCE["gpuforge_expected_nccl_single_node_busbw"]
LINK_SPEEDS = HARDWARE["gpuforge_expected_link_speeds"]
SYSTEMS = HARDWARE["gpuforge_expected_systems"]
SOURCES = BENCH_DEFAULTS["gpuforge_bench_threshold_sources"]


def _trusted(value):
    if isinstance(value, str) and "{{" in value:
        return trust_as_template(value)
    if isinstance(value, dict):
        return {key: _trusted(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_trusted(item) for item in value]
    return value


def _render(expression, variables: dict):
    return Templar(loader=DataLoader(), variables=_trusted(variables)).template(_trusted(expression))


def _task(file: str, name: str) -> dict:
    tasks = _yaml(ROLE / "tasks" / file)
    return next(task for task in tasks if task["name"].startswith(name))


def _facts(rate, layer="InfiniBand", hca="mlx5_0", port=1, state="Active"):
    """infiniband_facts of a node with one port (the fields gpuforge_ib_schedule and the link lookup read)."""
    return {
        "hcas": [
            {"name": hca, "ports": [{"port": port, "state": state, "rate_gbit_per_s": rate, "link_layer": layer}]}
        ],
        "active_ports": [f"{hca}/{port}"] if state == "Active" else [],
        "inactive_ports": [] if state == "Active" else [f"{hca}/{port}"],
    }


# --- ib_write_bw: the table against the old rule --------------------------------------------------------------


def test_edr_old_fraction_passed_10729_mib_per_s_and_the_table_fails_it():
    # The old rule: 0.9 of EDR's line rate, what library/ib_write_bw.py computes without min_mib_per_s.
    old_floor = ib_write_bw.expected_mib_per_s(100, 0.9, None)
    assert old_floor == 10728.84
    assert old_floor <= 10729
    pair = {"server": "a", "client": "b", "rail": "mlx5_0/1", "line_rate_gbit_per_s": 100}
    links = {"a": {"mlx5_0/1": {"link": "EDR", "from": "expected system"}}, "b": {}}
    threshold = bench.ib_pair_threshold(
        pair, links, IB_TABLE, LINK_SPEEDS, 0.9, None, SOURCES["gpuforge_expected_ib_write_bw"]
    )
    assert threshold["link_speed"] == "EDR"
    # IBM Redpaper REDP-5610's 11,000 MB/sec, passed to the module as min_mib_per_s: the module fails 10,729 MB/sec.
    assert threshold["min_mib_per_s"] == 11000
    assert threshold["min_mib_per_s"] > 10729
    assert ib_write_bw.expected_mib_per_s(100, 0.9, threshold["min_mib_per_s"]) == 11000
    # The same measurement in the summary: ok under the old absolute rule, slow against the table's floor.
    measured = {
        "name": "a__b__mlx5_0",
        "group": "ib_write_bw",
        "nodes": ["a", "b"],
        "rail": "mlx5_0/1",
        "value": round(bench.mib_to_gbit_per_s(10729), 2),
        "unit": "Gb/s",
        "expected": 100,
    }
    old = gpuforge_filters.gpuforge_bench_attribution([measured], baseline="absolute", min_fraction=0.9)
    assert old["results"][0]["verdict"] == "PASS"
    floored = {**measured, "threshold": threshold["min_gbit_per_s"], "threshold_source": threshold["threshold_source"]}
    new = bench.attribution_floors([floored], baseline="absolute", min_fraction=0.9)
    assert (new["results"][0]["verdict"], new["results"][0]["threshold"]) == ("FAIL", 92.27)
    assert "IBM Redpaper REDP-5610" in new["results"][0]["reason"]


@pytest.mark.parametrize(
    ("gbit", "mib"),
    [(100, 11920.93), (180, 21457.67), (380, 45299.53)],
)
def test_gbit_per_s_to_ib_write_bw_mib_per_s_uses_2_to_the_20(gbit, mib):
    assert round(bench.gbit_to_mib_per_s(gbit), 2) == mib
    assert round(bench.mib_to_gbit_per_s(mib), 2) == gbit


@pytest.mark.parametrize(("link", "min_mib_per_s", "min_gbit_per_s"), [("HDR", 21457.67, 180), ("NDR", 45299.53, 380)])
def test_hdr_and_ndr_floors_stated_in_gbit_reach_the_module_in_mib_per_s(link, min_mib_per_s, min_gbit_per_s):
    pair = {"server": "a", "client": "b", "rail": "mlx5_0/1", "line_rate_gbit_per_s": 400}
    links = {"a": {"mlx5_0/1": {"link": link, "from": "expected system"}}}
    threshold = bench.ib_pair_threshold(
        pair, links, IB_TABLE, LINK_SPEEDS, 0.9, None, SOURCES["gpuforge_expected_ib_write_bw"]
    )
    assert (threshold["min_mib_per_s"], threshold["min_gbit_per_s"]) == (min_mib_per_s, min_gbit_per_s)
    assert threshold["threshold_source"].startswith("Azure/azurehpc-health-checks")
    assert f"gpuforge_expected_ib_write_bw['{link}'] = {min_gbit_per_s} Gb/s" in threshold["threshold_source"]


def test_a_link_speed_without_an_entry_keeps_the_fraction_of_line_rate():
    pair = {"server": "a", "client": "b", "rail": "mlx5_0/1", "line_rate_gbit_per_s": 100}
    links = {"a": {"mlx5_0/1": {"link": "100GbE", "from": "expected system"}}}
    threshold = bench.ib_pair_threshold(pair, links, IB_TABLE, LINK_SPEEDS, 0.9)
    assert (threshold["link_speed"], threshold["min_mib_per_s"], threshold["min_gbit_per_s"]) == ("100GbE", None, None)
    assert threshold["threshold_source"] == (
        "gpuforge_bench_ib_min_fraction (0.9) of the line rate (100 Gb/s, ibstat Rate): "
        "no gpuforge_expected_ib_write_bw entry for 100GbE"
    )
    # No floor: the pair is judged as before, 0.9 of its expected rate.
    result = {"name": "p", "group": "ib_write_bw", "nodes": ["a", "b"], "value": 89.0, "unit": "Gb/s", "expected": 100}
    judged = bench.attribution_floors([result], baseline="absolute", min_fraction=0.9)["results"][0]
    assert (judged["verdict"], judged["threshold"]) == ("FAIL", 90.0)


def test_the_site_expected_rate_overrides_the_table():
    pair = {"server": "a", "client": "b", "rail": "mlx5_0/1", "line_rate_gbit_per_s": 100}
    links = {"a": {"mlx5_0/1": {"link": "EDR", "from": "expected system"}}}
    threshold = bench.ib_pair_threshold(pair, links, IB_TABLE, LINK_SPEEDS, 0.9, expected_gbit_per_s="56")
    assert (threshold["min_mib_per_s"], threshold["min_gbit_per_s"]) == (None, None)
    assert (
        threshold["threshold_source"]
        == "gpuforge_bench_ib_min_fraction (0.9) of gpuforge_bench_ib_expected_gbit_per_s (56 Gb/s)"
    )


def test_a_pair_is_judged_at_the_slower_ends_link_speed():
    pair = {"server": "a", "client": "b", "rail": "mlx5_0/1", "line_rate_gbit_per_s": 200}
    links = {
        "a": {"mlx5_0/1": {"link": "HDR", "from": "expected system"}},
        "b": {"mlx5_0/1": {"link": "EDR", "from": "ibstat Rate 100 Gb/s (InfiniBand)"}},
    }
    threshold = bench.ib_pair_threshold(pair, links, IB_TABLE, LINK_SPEEDS, 0.9)
    assert (threshold["link_speed"], threshold["link_speed_from"], threshold["min_mib_per_s"]) == (
        "EDR",
        "ibstat Rate 100 Gb/s (InfiniBand)",
        11000,
    )


def test_the_source_is_credited_only_while_the_table_holds_its_value():
    pair = {"server": "a", "client": "b", "rail": "mlx5_0/1", "line_rate_gbit_per_s": 100}
    links = {"a": {"mlx5_0/1": {"link": "EDR", "from": "expected system"}}}
    shipped = bench.ib_pair_threshold(
        pair, links, IB_TABLE, LINK_SPEEDS, 0.9, None, SOURCES["gpuforge_expected_ib_write_bw"]
    )
    assert shipped["threshold_source"] == (
        "IBM Redpaper REDP-5610 (IBM/NVIDIA DGX-1 reference architecture, one EDR link at 11,000 MB/sec) "
        "(gpuforge_expected_ib_write_bw['EDR'] = 11000 MB/sec (2^20 bytes))"
    )
    site = {**IB_TABLE, "EDR": {"min_mib_per_s": 11200}}
    own = bench.ib_pair_threshold(pair, links, site, LINK_SPEEDS, 0.9, None, SOURCES["gpuforge_expected_ib_write_bw"])
    assert own["min_mib_per_s"] == 11200
    assert own["threshold_source"] == (
        "gpuforge_expected_ib_write_bw['EDR'] = 11200 MB/sec (2^20 bytes) (no source recorded: a site value)"
    )
    cited = {**IB_TABLE, "EDR": {"min_mib_per_s": 11200, "source": "site acceptance 2026-11"}}
    assert bench.ib_pair_threshold(
        pair, links, cited, LINK_SPEEDS, 0.9, None, SOURCES["gpuforge_expected_ib_write_bw"]
    )["threshold_source"].startswith("site acceptance 2026-11 (")


def test_a_table_entry_without_a_floor_is_refused():
    pair = {"server": "a", "client": "b", "rail": "mlx5_0/1", "line_rate_gbit_per_s": 100}
    links = {"a": {"mlx5_0/1": {"link": "EDR", "from": "expected system"}}}
    # The floor under a key without its unit (the threshold's old name) is not a floor.
    with pytest.raises(ValueError, match="neither min_mib_per_s nor min_gbit_per_s"):
        bench.ib_pair_threshold(pair, links, {"EDR": {"min_mbps": 11000}}, LINK_SPEEDS, 0.9)


def test_port_links_prefer_the_expected_system_over_ibstat():
    # A DGX H100 port that trained at HDR (ibstat Rate 200) is still an NDR port: judged at NDR's floor.
    facts = {"hcas": [{"name": "mlx5_0", "ports": [{"port": 1, "rate_gbit_per_s": 200, "link_layer": "InfiniBand"}]}]}
    links = bench.ib_port_links(facts, SYSTEMS["dgx-h100-ndr"], LINK_SPEEDS)
    assert links == {"mlx5_0/1": {"link": "NDR", "from": "expected system"}}
    # Without an expected system the Rate and link layer name the speed; 100 Gb/s is EDR or 100GbE by its layer.
    ib = bench.ib_port_links(facts, {}, LINK_SPEEDS)
    assert ib == {"mlx5_0/1": {"link": "HDR", "from": "ibstat Rate 200 Gb/s (InfiniBand)"}}
    roce = {"hcas": [{"name": "mlx5_0", "ports": [{"port": 1, "rate_gbit_per_s": 100, "link_layer": "Ethernet"}]}]}
    assert bench.ib_port_links(roce, {}, LINK_SPEEDS)["mlx5_0/1"]["link"] == "100GbE"
    unknown = {"hcas": [{"name": "mlx5_0", "ports": [{"port": 1, "rate_gbit_per_s": 100}]}]}
    assert bench.ib_port_links(unknown, {}, LINK_SPEEDS)["mlx5_0/1"] == {"link": None, "from": None}


def test_ib_thresholds_add_a_threshold_to_every_pair_of_the_schedule():
    nodes = ["gpu01", "gpu02", "gpu03"]
    facts = {node: _facts(100) for node in nodes}
    facts["gpu03"] = _facts(100, state="Down")
    rounds = ib_schedule(nodes, facts)
    links = {node: bench.ib_port_links(facts[node], SYSTEMS["dgx1-v100-edr"], LINK_SPEEDS) for node in nodes}
    planned = bench.ib_thresholds(
        rounds, links, IB_TABLE, LINK_SPEEDS, 0.9, None, SOURCES["gpuforge_expected_ib_write_bw"]
    )
    assert [[{k: v for k, v in p.items() if k != "threshold"} for p in r["pairs"]] for r in planned] == [
        r["pairs"] for r in rounds
    ]
    pairs = [pair for current in planned for pair in current["pairs"]]
    assert len(pairs) == 3
    assert {pair["threshold"]["min_mib_per_s"] for pair in pairs} == {11000}


# --- NCCL single node ---------------------------------------------------------------------------------------


def test_an_a100_node_running_its_eight_gpus_gets_the_azure_floor():
    floor = bench.nccl_single_threshold(
        "A100-SXM4-80GB", 8, NCCL_TABLE, SOURCES["gpuforge_expected_nccl_single_node_busbw"]
    )
    assert (floor["min_busbw_gbyte_per_s"], floor["min_gbit_per_s"], floor["gpus"]) == (228, 1824, 8)
    assert floor["threshold_source"] == (
        "Azure/azurehpc-health-checks v0.4.5 conf/nd96asr_v4.conf (check_nccl_allreduce) "
        "(gpuforge_expected_nccl_single_node_busbw['A100-SXM4-80GB'] = 228 GB/s busbw over 8 GPUs)"
    )


@pytest.mark.parametrize(
    ("sku", "gpus"), [("A100-SXM4-80GB", 4), ("A100-SXM4-80GB", "2"), ("V100-SXM2-16GB", 8), (None, 8)]
)
def test_no_floor_for_another_gpu_count_or_a_sku_without_an_entry(sku, gpus):
    assert bench.nccl_single_threshold(sku, gpus, NCCL_TABLE, SOURCES["gpuforge_expected_nccl_single_node_busbw"]) == {}


def _nccl_registered(avg, large=None):
    registered = {"verdict": "PASS", "nccl": {"avg_busbw": avg}, "checks": []}
    if large is not None:
        registered["checks"].append({"name": "large_message_busbw", "status": "PASS", "observed": large})
    return registered


def test_the_single_result_holds_the_largest_message_busbw_against_a_floor_else_the_average():
    floor = bench.nccl_single_threshold(
        "H100-80GB-HBM3", 8, NCCL_TABLE, SOURCES["gpuforge_expected_nccl_single_node_busbw"]
    )
    judged = bench.nccl_single_result(_nccl_registered(120.0, 470.5), "gpu01", floor)
    assert (judged["value"], judged["unit"], judged["threshold"], judged["min_busbw_gbyte_per_s"]) == (
        3764.0,
        "Gb/s",
        3680,
        460,
    )
    assert judged["busbw_measure"] == "largest message size"
    plain = bench.nccl_single_result(_nccl_registered(1.25), "gpu02", {})
    assert plain == {
        "name": "nccl-single-gpu02",
        "group": "nccl_single",
        "nodes": ["gpu02"],
        "value": 10.0,
        "unit": "Gb/s",
        "module_verdict": "PASS",
    }
    assert bench.nccl_single_result({}, "gpu03", floor)["value"] is None


# What benchmark.yml wrote on a real single-H200 VM (benchmarks/real_node/run.sh with the built tools, 2026-12-04:
# tests/fixtures/real-node/h200-20261204/SOURCES.md).
REAL_NODE = ROOT / "tests" / "fixtures" / "real-node" / "h200-20261204"


def test_a_one_gpu_nodes_all_reduce_is_not_judged_on_its_zero_busbw():
    """One rank: nccl-tests prints busbw 0 (algbw x 2(n-1)/n). The real run passed it as "0.0 Gb/s reaches 0.0 Gb/s"
    against its own median; beside peers it would have been a slow node. It is UNKNOWN with the reason, and its zero
    stays out of the peers' median."""
    registered = json.loads((REAL_NODE / "bench" / "single-real-node.json").read_text(encoding="utf-8"))
    assert (registered["verdict"], registered["nccl"]["avg_busbw"], len(registered["nccl"]["devices"])) == (
        "PASS",
        0,
        1,
    )
    one = bench.nccl_single_result(registered, "real-node", {})
    peers = [bench.nccl_single_result(_nccl_registered(avg), name, {}) for name, avg in (("a", 10.0), ("b", 12.0))]
    summary = bench.attribution_floors([one, *peers], baseline="median", median_fraction=0.5)
    judged = {result["name"]: result for result in summary["results"]}
    real = judged["nccl-single-real-node"]
    assert (real["verdict"], real["run_failed"], real["threshold"], real["value"]) == ("UNKNOWN", False, None, 0.0)
    assert real["reason"].startswith("one rank: nccl-tests' bus bandwidth is 0 for a single GPU")
    # 50% of the median of 80 and 96 Gb/s: the zero is not a peer
    assert [judged[name]["threshold"] for name in ("nccl-single-a", "nccl-single-b")] == [44.0, 44.0]
    assert summary["slow_nodes"] == []
    schema = json.loads((ROOT / "schemas" / "benchmark-run.schema.json").read_text(encoding="utf-8"))
    written = bench.bench_summary({"run_id": "r1", "nodes": ["real-node", "a", "b"], "nccl": summary})
    built = {r["name"]: r for r in records.bench_summary_records(written) if r["kind"] == "benchmark_run"}
    for record in built.values():
        jsonschema.Draft202012Validator(schema).validate(record)
    assert built["nccl-single-real-node"]["verdict"] == "UNKNOWN"


def test_the_real_one_node_summary_after_the_fixes_is_valid_and_judges_nothing_it_did_not_run():
    """benchmark.yml rc=0 on the H200 VM: no all-node result on one node, the one-rank all-reduce UNKNOWN."""
    summary = json.loads((REAL_NODE / "bench" / "summary.json").read_text(encoding="utf-8"))
    SUMMARY_VALIDATOR.validate(summary)
    assert [(r["name"], r["verdict"]) for r in records.bench_summary_records(summary)] == [
        ("nccl-single-real-node", "UNKNOWN"),
        ("p2p-real-node", "PASS"),
    ]
    assert [(r["name"], r["verdict"], r["run_failed"]) for r in summary["nccl"]["results"]] == [
        ("nccl-single-real-node", "UNKNOWN", False)
    ]
    assert [(r["name"], r["verdict"]) for r in summary["p2p"]["results"]] == [("p2p-real-node", "PASS")]
    before = json.loads((REAL_NODE / "bench" / "summary-before-the-one-node-fix.json").read_text(encoding="utf-8"))
    assert [r["name"] for r in before["nccl"]["results"] if r["run_failed"]] == [
        "nccl-multi-tcp",
        "nccl-multi-ib",
        "nccl-multi-ib_gdr",
    ]


def test_floored_singles_are_judged_by_their_floor_the_others_against_each_other():
    floor = bench.nccl_single_threshold(
        "A100-SXM4-80GB", 8, NCCL_TABLE, SOURCES["gpuforge_expected_nccl_single_node_busbw"]
    )
    results = [
        bench.nccl_single_result(_nccl_registered(90.0, 230.0), "a100-1", floor),
        bench.nccl_single_result(_nccl_registered(90.0, 200.0), "a100-2", floor),  # below 228 GB/s
        bench.nccl_single_result(_nccl_registered(10.0), "v100-1", {}),
        bench.nccl_single_result(_nccl_registered(10.0), "v100-2", {}),
        bench.nccl_single_result(_nccl_registered(2.0), "v100-3", {}),  # far below its peers
    ]
    summary = bench.attribution_floors(results, baseline="median", median_fraction=0.5)
    verdicts = {result["name"]: result["verdict"] for result in summary["results"]}
    assert verdicts == {
        "nccl-single-a100-1": "PASS",
        "nccl-single-a100-2": "FAIL",
        "nccl-single-v100-1": "PASS",
        "nccl-single-v100-2": "PASS",
        "nccl-single-v100-3": "FAIL",
    }
    slow = {result["name"]: result for result in summary["results"]}["nccl-single-a100-2"]
    assert (slow["value"], slow["unit"], slow["threshold"]) == (1600.0, "Gb/s", 1824.0)
    assert slow["reason"].startswith("1600.0 Gb/s is below 1824.0 Gb/s (Azure/azurehpc-health-checks")
    assert "conf/nd96asr_v4.conf" in slow["reason"]
    assert [node["node"] for node in summary["slow_nodes"]] == ["a100-2", "v100-3"]


def test_without_floors_the_judgement_is_gpuforge_bench_attribution():
    results = [
        {"name": f"p{i}", "group": "ib_write_bw", "nodes": [f"n{i}", f"n{i + 1}"], "value": gbit_per_s, "unit": "Gb/s"}
        for i, gbit_per_s in enumerate([5.0, 4.8, 0.01, 5.2])
    ]
    for baseline in ("median", "best"):
        assert bench.attribution_floors(results, baseline=baseline, median_fraction=0.3) == (
            gpuforge_filters.gpuforge_bench_attribution(results, baseline=baseline, median_fraction=0.3)
        )


def test_floored_results_become_valid_records_naming_their_source():
    floor = bench.nccl_single_threshold(
        "A100-SXM4-80GB", 8, NCCL_TABLE, SOURCES["gpuforge_expected_nccl_single_node_busbw"]
    )
    pair = {"server": "a", "client": "b", "rail": "mlx5_0/1", "line_rate_gbit_per_s": 200}
    links = {"a": {"mlx5_0/1": {"link": "HDR", "from": "expected system"}}}
    threshold = bench.ib_pair_threshold(
        pair, links, IB_TABLE, LINK_SPEEDS, 0.9, None, SOURCES["gpuforge_expected_ib_write_bw"]
    )
    ib_result = {
        "name": "a__b__mlx5_0",
        "group": "ib_write_bw",
        "nodes": ["a", "b"],
        "hca": "mlx5_0",
        "rail": "mlx5_0/1",
        "value": 150.0,
        "unit": "Gb/s",
        "expected": 200,
        "line_rate_gbit_per_s": 200,
        "threshold": threshold["min_gbit_per_s"],
        "threshold_source": threshold["threshold_source"],
    }
    summary = {
        "run_id": "r1",
        "ib_write_bw": bench.attribution_floors([ib_result], baseline="absolute"),
        "nccl": bench.attribution_floors(
            [bench.nccl_single_result(_nccl_registered(90.0, 230.0), "a", floor)], baseline="median"
        ),
    }
    schema = json.loads((ROOT / "schemas" / "benchmark-run.schema.json").read_text(encoding="utf-8"))
    written = bench.bench_summary(dict(summary, nodes=["a", "b"]))
    built = {r["name"]: r for r in records.bench_summary_records(written) if r["kind"] == "benchmark_run"}
    for record in built.values():
        jsonschema.Draft202012Validator(schema).validate(record)
    ib = built["a__b__mlx5_0"]
    assert (ib["verdict"], ib["threshold"]["value"], ib["threshold"]["line_rate"]) == ("FAIL", 180, 200.0)
    assert ib["threshold"]["source"].startswith("Azure/azurehpc-health-checks v0.4.5 conf/nd96asr_v4.conf")
    nccl = built["nccl-single-a"]
    assert (nccl["verdict"], nccl["threshold"]["value"], nccl["observed"]["value"]) == ("PASS", 1824.0, 1840.0)
    assert nccl["threshold"]["source"] == floor["threshold_source"]


# --- the role's task expressions ------------------------------------------------------------------------------


def _pair_entry_floor(baseline: str, threshold: dict):
    task = _task("ib_pair.yml", "Keep the round's results")
    return _render(task["vars"]["floor"], {"gpuforge_bench_ib_baseline": baseline, "item": {"threshold": threshold}})


def test_ib_pair_keeps_the_floor_under_the_absolute_baseline_only():
    threshold = {"min_gbit_per_s": 92.27, "min_mib_per_s": 11000, "threshold_source": "IBM", "link_speed": "EDR"}
    assert _pair_entry_floor("absolute", threshold) == {
        "threshold": 92.27,
        "min_mib_per_s": 11000,
        "threshold_source": "IBM",
    }
    assert _pair_entry_floor("best", threshold) == {}
    assert _pair_entry_floor("absolute", {**threshold, "min_gbit_per_s": None, "min_mib_per_s": None}) == {}


def test_the_client_passes_the_floor_to_the_module_as_min_mib_per_s():
    task = _task("ib_pair.yml", "Run the ib_write_bw clients")
    expression = task["gpuforge.cluster.ib_write_bw"]["min_mib_per_s"]
    connect = {"threshold": {"min_mib_per_s": 21457.67}}
    assert _render(expression, {"gpuforge_bench_ib_connect": connect}) == 21457.67


def test_the_nccl_floor_task_reads_the_nodes_expected_system():
    task = _task("nccl.yml", "Find this node's single-node busbw floor")
    variables = {
        **task["vars"],
        "gpuforge_expected_systems": {"dgxa100": {"gpu_sku": "A100-SXM4-80GB", "gpu_count": 8}, **SYSTEMS},
        "gpuforge_expected_nccl_single_node_busbw": NCCL_TABLE,
        "gpuforge_bench_threshold_sources": SOURCES,
        "gpuforge_bench_nccl_single_gpus": 8,
    }
    expression = task["ansible.builtin.set_fact"]["gpuforge_bench_nccl_single_floor"]
    assert _render(expression, {**variables, "gpuforge_expected_system": "dgxa100"})["min_busbw_gbyte_per_s"] == 228
    assert _render(expression, {**variables, "gpuforge_expected_system": "dgx1-v100-edr"}) == {}
    assert _render(expression, variables) == {}  # no expected system: compared with the other nodes


def test_summary_yml_judges_ib_and_nccl_results_with_their_floors():
    facts = _task("summary.yml", "Attribute slow nodes and links")["ansible.builtin.set_fact"]["gpuforge_bench_summary"]
    results = {
        "ib_write_bw": [
            {"name": "p", "group": "ib_write_bw", "nodes": ["a", "b"], "value": 91.0, "unit": "Gb/s", "expected": 100},
            {
                "name": "q",
                "group": "ib_write_bw",
                "nodes": ["a", "c"],
                "value": 91.0,
                "unit": "Gb/s",
                "threshold": 92.27,
            },
        ],
        "nccl": [
            {
                "name": "nccl-single-a",
                "group": "nccl_single",
                "nodes": ["a"],
                "value": 1800.0,
                "unit": "Gb/s",
                "threshold": 1824,
            }
        ],
    }
    variables = {
        "results": results,
        "gpuforge_bench_ib_baseline": "absolute",
        "gpuforge_bench_ib_min_fraction": 0.9,
        "gpuforge_bench_ib_median_fraction": 0.5,
        "gpuforge_bench_nccl_median_fraction": 0.5,
        "ansible_play_hosts": ["a"],
        "hostvars": {"a": {}},
    }
    ib = _render(facts["ib_write_bw"], variables)
    assert [r["verdict"] for r in ib["results"]] == ["PASS", "FAIL"]
    nccl = _render(facts["nccl"], variables)
    assert [r["verdict"] for r in nccl["results"]] == ["FAIL"]


def test_fio_targets_keep_their_order_and_labels():
    assert bench.fio_targets(["/home"], ["/gpfs/fs1"], ["/var/tmp"], [{"label": "data", "path": "/data"}]) == [
        {"kind": "nfs", "label": "nfs:/home", "path": "/home"},
        {"kind": "gpfs", "label": "gpfs:/gpfs/fs1", "path": "/gpfs/fs1"},
        {"kind": "scratch", "label": "scratch:/var/tmp", "path": "/var/tmp"},
        {"kind": "extra", "label": "data", "path": "/data"},
    ]


def test_resnet50_results_one_per_node_and_precision_then_the_sweep():
    registered = {
        "gpu01": {"verdict": "PASS", "runs": [{"precision": "fp32", "images_per_second": 10.0, "verdict": "PASS"}]},
        "gpu02": {"failed": True, "msg": "no venv", "verdict": "FAIL"},
    }
    results = bench.resnet50_results(registered, {"msg": "bad hosts"}, ["fp32", "amp"], ["gpu01", "gpu02"])
    assert [(r["name"], r["value"], r.get("module_verdict"), r["error"]) for r in results] == [
        ("resnet50-node-gpu01-fp32", 10.0, "PASS", None),
        ("resnet50-node-gpu01-amp", None, "PASS", None),
        ("resnet50-node-gpu02-fp32", None, "FAIL", "no venv"),
        ("resnet50-node-gpu02-amp", None, "FAIL", "no venv"),
        ("resnet50-sweep", None, None, "bad hosts"),
    ]
    documents = bench.resnet50_node_documents(registered)
    assert [(d["file"], d["document"]["error"], len(d["document"]["runs"])) for d in documents] == [
        ("gpu01/node.json", None, 1),
        ("gpu02/node.json", "no venv", 0),
    ]


def test_slurm_results_add_the_apptainer_run_only_with_an_image():
    nccl = {"verdict": "PASS", "nccl": {"avg_busbw": 1.5}}
    resnet = {"verdict": "PASS", "runs": [{"resnet50": {"total_imgs_per_sec": 9}}]}
    bare = bench.slurm_results(nccl, resnet, ["a", "b"])
    assert [(r["name"], r["value"], r["unit"]) for r in bare] == [
        ("srun-nccl", 1.5, "GB/s busbw"),
        ("srun-resnet50", 9, "images/s"),
    ]
    with_image = bench.slurm_results(
        nccl, resnet, ["a", "b"], {"verdict": "PASS", "nccl": {"avg_busbw": 1.4}}, "/x.sif"
    )
    assert [(r["name"], r["value"], r["unit"]) for r in with_image][-1] == ("srun-apptainer-nccl", 1.4, "GB/s busbw")


# --- summary.json: every result in its own unit (issue 16, schemas/bench-summary.schema.json) -----------------

SUMMARY_VALIDATOR = schema_validator("bench-summary.schema.json")
RETIRED = {"gbps", "threshold_gbps", "expected_gbps"}


def _ib_pair_results(baseline: str, threshold: dict) -> list:
    """The role's ib_write_bw entries ("Keep the round's results", ib_pair.yml): one measured pair, one inactive."""
    task = _task("ib_pair.yml", "Keep the round's results")
    measured = {"observed_gbit_per_s": 86.5, "observed": 10312.0, "status": "FAIL", "remedy": "check the port"}
    results = []
    for run, name, client in ((True, "a__b__mlx5_0", "b"), (False, "a__c__mlx5_0", "c")):
        item = {
            "name": name, "server": "a", "client": client, "hca": "mlx5_0", "port": 1, "rail": "mlx5_0/1",
            "round": 1, "run": run, "inactive": [] if run else [client], "line_rate_gbit_per_s": 100,
            "threshold": threshold,
        }  # fmt: skip
        variables = {
            **task["vars"],
            "item": item,
            "hostvars": {client: {"gpuforge_bench_ib_client": {"verdict": measured}}},
            "gpuforge_bench_results": {},
            "gpuforge_bench_ib_baseline": baseline,
        }
        results += _render(task["ansible.builtin.set_fact"]["gpuforge_bench_results"], variables)["ib_write_bw"]
    return results


def _nccl_multi_results() -> list:
    """The role's all-node and per-rail NCCL entries ("Keep the results of the all-node and per-rail runs")."""
    task = _task("nccl.yml", "Keep the results of the all-node and per-rail runs")
    results = []
    for registered, kind in (
        ({"item": "ib", "verdict": "PASS", "nccl": {"avg_busbw": 11.5}}, "multi"),
        ({"item": "mlx5_0/1", "verdict": "PASS", "nccl": {"avg_busbw": 10.25}}, "rail"),
        ({"item": "tcp", "verdict": "FAIL", "nccl": None}, "multi"),
    ):
        variables = {
            **task["vars"],
            "item": [registered, kind],
            "ansible_play_hosts": ["a", "b", "c"],
            "gpuforge_bench_nccl_rail_mode": "ib",
            "gpuforge_bench_results": {},
        }
        results += _render(task["ansible.builtin.set_fact"]["gpuforge_bench_results"], variables)["nccl"]
    return results


def _role_summary(site_gates_run, baseline="absolute") -> dict:
    """summary.yml's gpuforge_bench_summary, rendered over results the role's filters and task expressions built."""
    gates = json.loads(next(site_gates_run.glob("bench/*/summary.json")).read_text(encoding="utf-8"))
    edr = {
        "link_speed": "EDR",
        "min_mib_per_s": 11000,
        "min_gbit_per_s": 92.27,
        "threshold_source": "IBM Redpaper REDP-5610",
    }
    floor = bench.nccl_single_threshold(
        "A100-SXM4-80GB", 8, NCCL_TABLE, SOURCES["gpuforge_expected_nccl_single_node_busbw"]
    )
    registered = {
        "a": {"verdict": "PASS", "runs": [{"precision": "fp32", "images_per_second": 1.22, "verdict": "PASS"}]},
        "b": {"verdict": "PASS", "runs": [{"precision": "fp32", "images_per_second": 2.6, "verdict": "PASS"}]},
        "c": {"verdict": "PASS", "runs": [{"precision": "fp32", "images_per_second": 2.5, "verdict": "PASS"}]},
    }
    sweep = {"runs": [{"gpus": 1, "precision": "fp32", "images_per_second": 2.5, "verdict": "PASS"}]}
    slurm_nccl = {"verdict": "PASS", "nccl": {"avg_busbw": 1.5}}
    slurm_resnet = {"verdict": "PASS", "runs": [{"resnet50": {"total_imgs_per_sec": 9.0}}]}
    results = {
        "ib_write_bw": _ib_pair_results(baseline, edr),
        "nccl": [
            bench.nccl_single_result(_nccl_registered(90.0, 230.0), "a", floor),
            bench.nccl_single_result(_nccl_registered(1.25), "b", {}),
            bench.nccl_single_result(_nccl_registered(1.5), "c", {}),
            *_nccl_multi_results(),
        ],
        "resnet50": bench.resnet50_results(registered, sweep, ["fp32"], ["a", "b", "c"]),
        "slurm": bench.slurm_results(slurm_nccl, slurm_resnet, ["a", "b", "c"], slurm_nccl, "/x.sif"),
        "fio": gates["fio"]["results"],
        "p2p": gates["p2p"]["results"],
    }
    facts = _task("summary.yml", "Attribute slow nodes and links")["ansible.builtin.set_fact"]
    with_records = _task("summary.yml", "Add the typed records")["ansible.builtin.set_fact"]
    variables = {
        "results": results,
        "gpuforge_bench_run_id": "20261126T000000Z",
        "gpuforge_bench_netem_node": "",
        "gpuforge_bench_ib_baseline": baseline,
        "gpuforge_bench_ib_min_fraction": 0.9,
        "gpuforge_bench_ib_median_fraction": 0.5,
        "gpuforge_bench_nccl_median_fraction": 0.5,
        "gpuforge_bench_resnet50_median_fraction": 0.5,
        "ansible_play_hosts": ["a", "b", "c"],
        "hostvars": {"a": {}},
    }
    # The blocks, then the records summary.yml adds before it writes the file (no parsed result files here).
    variables["gpuforge_bench_summary"] = _render(facts, variables)["gpuforge_bench_summary"]
    variables["gpuforge_bench_dir"] = str(next(site_gates_run.glob("bench/*")))
    return _render(with_records, variables)["gpuforge_bench_summary"]


@pytest.mark.parametrize("baseline", ["absolute", "best"])
def test_the_role_summary_is_valid_and_every_result_names_its_unit(site_gates_run, baseline):
    summary = json.loads(json.dumps(_role_summary(site_gates_run, baseline)))  # what to_nice_json writes
    SUMMARY_VALIDATOR.validate(summary)
    blocks = ("ib_write_bw", "nccl", "resnet50", "slurm", "fio", "p2p")
    every = [result for block in blocks for result in summary[block]["results"]]
    # Its records: one benchmark_run per result with that result's verdict, one attribution per slow node or link,
    # read back by the readers as they are.
    assert records.bench_summary_records(summary) == summary["records"]
    runs = {record["name"]: record for record in summary["records"] if record["kind"] == "benchmark_run"}
    assert {name: record["verdict"] for name, record in runs.items()} == {r["name"]: r["verdict"] for r in every}
    named = [
        [("node", entry["node"]) for entry in summary[block]["slow_nodes"]]
        + [("link", entry["name"]) for entry in summary[block]["slow_links"]]
        for block in sorted(blocks)
    ]
    attributions = [(r["subject"], r["name"]) for r in summary["records"] if r["kind"] == "attribution"]
    assert attributions == [entry for block in named for entry in block] and attributions
    assert not [result["name"] for result in every if RETIRED & set(result)]
    units = {block: sorted({result["unit"] for result in summary[block]["results"]}) for block in blocks}
    assert units == {
        "ib_write_bw": ["Gb/s"],
        "nccl": ["Gb/s"],
        "resnet50": ["images/s"],
        "slurm": ["GB/s busbw", "images/s"],
        "fio": ["IOPS", "MiB/s"],
        "p2p": ["GB/s"],
    }
    pair = summary["ib_write_bw"]["results"][0]
    assert (pair["value"], pair["unit"], pair["expected"], pair["line_rate_gbit_per_s"]) == (86.5, "Gb/s", 100, 100)
    if baseline == "absolute":  # the EDR floor of the table, in Gb/s like the value
        assert (pair["threshold"], pair["min_mib_per_s"], pair["verdict"]) == (92.27, 11000, "FAIL")
        assert pair["reason"] == "86.5 Gb/s is below 92.27 Gb/s (IBM Redpaper REDP-5610)"
    else:
        assert "min_mib_per_s" not in pair and pair["threshold"] == 43.25
    inactive = summary["ib_write_bw"]["results"][1]
    assert (inactive["verdict"], inactive["run_failed"]) == ("FAIL", True)  # the inactive pair: no value
    multi = {result["name"]: result for result in summary["nccl"]["results"]}
    assert (multi["nccl-multi-ib"]["value"], multi["nccl-rail-mlx5_0-1"]["value"]) == (92.0, 82.0)
    assert multi["nccl-multi-tcp"]["value"] is None


def test_a_resnet50_summary_result_is_in_images_per_second_not_gbps(site_gates_run):
    resnet50 = {r["name"]: r for r in _role_summary(site_gates_run)["resnet50"]["results"]}
    slow = resnet50["resnet50-node-a-fp32"]
    assert (slow["value"], slow["unit"], slow["images_per_second"], slow["threshold"]) == (1.22, "images/s", 1.22, 1.25)
    assert "gbps" not in slow and "threshold_gbps" not in slow
    assert (
        slow["reason"]
        == "1.22 images/s is below 1.25 images/s (50% of the median of resnet50_node_fp32 (2.5 images/s))"
    )
    srun = {r["name"]: r for r in _role_summary(site_gates_run)["slurm"]["results"]}["srun-resnet50"]
    assert (srun["value"], srun["unit"], srun["reason"]) == (
        9.0,
        "images/s",
        "9.0 images/s reaches 4.5 images/s (50% of the median of srun_resnet50 (9.0 images/s))",
    )


# --- no JSON built by Jinja, no lab fault injection in production --------------------------------------------


def test_the_role_builds_no_records_with_jinja_loops_or_json_round_trips():
    for path in sorted((ROLE / "tasks").glob("*.yml")):
        text = path.read_text(encoding="utf-8")
        for pattern in ("{% for", "{% set", "| from_json", "| to_json }}"):
            assert pattern not in text, f"{path.name}: {pattern}"


def test_the_production_playbook_and_role_carry_no_lab_fault_injection():
    production = [ROOT / "playbooks" / "benchmark.yml", ROOT / "playbooks" / "burnin.yml"]
    production += sorted((ROLE / "tasks").glob("*.yml"))
    for path in production:
        text = path.read_text(encoding="utf-8")
        assert "bench_degrade_link" not in text, path.name
        assert "lab/playbooks" not in text.replace("lab/playbooks/benchmark.yml", ""), path.name
        assert "[tc," not in text and "qdisc" not in text, path.name
    lab = _yaml(ROOT / "lab" / "playbooks" / "benchmark.yml")
    (imported,) = [play for play in lab if "ansible.builtin.import_playbook" in play]
    assert imported["ansible.builtin.import_playbook"] == "../../playbooks/benchmark.yml"
    # playbook_dir is the imported playbook's folder (playbooks/) in the plays of an import_playbook.
    # The demo's Slurm step runs srun ... apptainer exec --nv in the sandbox the wrapper's first play creates.
    (sandbox,) = [play for play in lab if play.get("hosts") == "gpu_nodes"]
    created = sandbox["tasks"][0]["ansible.builtin.file"]
    assert created["state"] == "directory"
    assert created["path"] == "{{ gpuforge_lab_apptainer_sandbox }}"
    assert imported["vars"]["gpuforge_bench_slurm_apptainer_image"] == sandbox["vars"]["gpuforge_lab_apptainer_sandbox"]
    hook = imported["vars"]["gpuforge_bench_ib_write_bw_hook"].replace("{{ playbook_dir }}", str(ROOT / "playbooks"))
    assert Path(hook).is_file()
    assert "bench_degrade_link.yml" in Path(hook).read_text(encoding="utf-8")


def test_benchmark_yml_checks_the_inventory_then_runs_the_role_with_every_tag():
    plays = _yaml(ROOT / "playbooks" / "benchmark.yml")
    assert plays[0]["ansible.builtin.import_playbook"] == "validate_inventory.yml"
    assert plays[1]["roles"] == [{"role": "gpuforge_bench"}] and "tasks" not in plays[1]
    main = (ROLE / "tasks" / "main.yml").read_text(encoding="utf-8")
    for tag in ("ib_counters", "ib_write_bw", "nccl", "resnet50", "slurm", "fio", "p2p", "always"):
        assert f"tags: [{tag}]" in main, tag
    tasks = _yaml(ROLE / "tasks" / "main.yml")
    tasks += [task for block in tasks for task in block.get("block", []) + block.get("always", [])]
    included = set()
    for task in tasks:
        for key in ("ansible.builtin.import_tasks", "ansible.builtin.include_tasks"):
            target = task.get(key)
            target = target.get("file") if isinstance(target, dict) else target
            if target and "{{" not in target:
                assert (ROLE / "tasks" / target).is_file(), target
                included.add(target)
    assert {"ib_counters_before.yml", "ib_write_bw.yml", "nccl.yml", "summary.yml", "ib_counters_after.yml"} <= included
