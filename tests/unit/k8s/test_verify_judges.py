"""src/gpuforge/k8s_verify_judge.py against recorded API responses (tests/fixtures/k8s/api/, SOURCES.md)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_nccl_tests as nccl
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_records as records

from gpuforge import k8s_verify_judge as verify

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
API = FIXTURES / "k8s" / "api"
SEED_2X8_LOG = FIXTURES / "nccl-tests" / "redp5610_ex4-2_2x8xv100_ib_legacy.txt"
SCHEMA = Path(__file__).resolve().parents[3] / "schemas" / "k8s-check.schema.json"
RDMA_CONFIG = {"configList": [{"resourceName": f"shared_ib{i}", "rdmaHcaMax": 100} for i in range(4)]}


def api(name: str):
    text = (API / name).read_text(encoding="utf-8")
    return json.loads(text) if name.endswith(".json") else text


def by_node(checks):
    return {check["node"]: check for check in checks}


def test_gpu_allocatable_passes_on_healthy_nodes_and_ignores_the_control_plane():
    checks = verify.judge_gpu_allocatable(api("nodes-healthy.json"), {"dgx01": 8, "dgx02": 8})
    assert [(c["node"], c["verdict"], c["observed"]) for c in checks] == [
        ("dgx01", "PASS", {"capacity": 8, "allocatable": 8}),
        ("dgx02", "PASS", {"capacity": 8, "allocatable": 8}),
    ]


def test_a_node_with_fewer_gpus_allocatable_fails_and_names_the_count():
    checks = by_node(verify.judge_gpu_allocatable(api("nodes-faulty.json"), {"dgx01": 8, "dgx02": 8}))
    assert checks["dgx01"]["verdict"] == "PASS"
    assert checks["dgx02"]["verdict"] == "FAIL"
    assert checks["dgx02"]["observed"] == {"capacity": 8, "allocatable": 7}
    assert "offers 7 of 8 GPUs" in checks["dgx02"]["remedy"]


def test_a_node_without_the_device_plugin_resource_fails_as_not_registered():
    nodes = api("nodes-healthy.json")
    for item in nodes["items"]:
        item["status"]["capacity"].pop("nvidia.com/gpu", None)
        item["status"]["allocatable"].pop("nvidia.com/gpu", None)
    check = by_node(verify.judge_gpu_allocatable(nodes, {"dgx01": 8}))["dgx01"]
    assert check["verdict"] == "FAIL"
    assert "has not registered" in check["remedy"]


def test_a_node_missing_from_the_cluster_fails():
    check = verify.judge_gpu_allocatable(api("nodes-healthy.json"), {"dgx09": 8})[0]
    assert (check["verdict"], check["observed"]) == ("FAIL", {"registered_node": False})
    assert "k8s_node_name" in check["remedy"]


def test_time_slicing_multiplies_the_expected_count():
    systems = {"dgx1-v100-edr": {"gpu_count": 8}}
    assert verify.expected_gpu_count({"gpuforge_expected_system": "dgx1-v100-edr"}, systems) == 8
    assert verify.expected_gpu_count({"gpuforge_expected_system": "dgx1-v100-edr"}, systems, 4) == 32
    assert verify.expected_gpu_count({"gpuforge_expected_gpu_count": "4"}, systems) == 4
    assert verify.expected_gpu_count({"gpuforge_expected_system": "unknown"}, systems) is None


def test_rdma_resources_come_from_the_config_with_the_rdma_prefix():
    assert verify.rdma_resources(json.dumps(RDMA_CONFIG))[2] == {"name": "rdma/shared_ib2", "hca_max": 100}
    custom = {"configList": [{"resourceName": "hca_a", "resourcePrefix": "example.com", "rdmaHcaMax": 5}]}
    assert verify.rdma_resources(custom) == [{"name": "example.com/hca_a", "hca_max": 5}]
    with pytest.raises(ValueError, match="no configList"):
        verify.rdma_resources({"periodicUpdateInterval": 300})


def test_a_missing_rdma_resource_fails_only_its_node():
    resources = verify.rdma_resources(RDMA_CONFIG)
    healthy = verify.judge_rdma_allocatable(api("nodes-healthy.json"), ["dgx01", "dgx02"], resources)
    assert [c["verdict"] for c in healthy] == ["PASS", "PASS"]
    checks = by_node(verify.judge_rdma_allocatable(api("nodes-faulty.json"), ["dgx01", "dgx02"], resources))
    assert checks["dgx01"]["verdict"] == "PASS"
    assert checks["dgx02"]["verdict"] == "FAIL"
    assert checks["dgx02"]["observed"]["rdma/shared_ib2"] is None
    assert checks["dgx02"]["remedy"].startswith("rdma/shared_ib2 not allocatable")


def test_an_rdma_resource_offered_fewer_times_than_hca_max_warns():
    nodes = api("nodes-healthy.json")
    nodes["items"][1]["status"]["allocatable"]["rdma/shared_ib1"] = "60"
    checks = by_node(verify.judge_rdma_allocatable(nodes, ["dgx01"], verify.rdma_resources(RDMA_CONFIG)))
    assert checks["dgx01"]["verdict"] == "WARN"


def test_vector_add_passes_only_with_succeeded_and_test_passed():
    passed = api("log-vector-add-passed.txt")
    assert verify.judge_vector_add(api("pod-vector-add-succeeded.json"), passed)["verdict"] == "PASS"
    silent = verify.judge_vector_add(api("pod-vector-add-succeeded.json"), "Done\n")
    assert silent["verdict"] == "FAIL"
    failed = verify.judge_vector_add(api("pod-vector-add-failed.json"), api("log-vector-add-failed.txt"))
    assert failed["verdict"] == "FAIL"
    assert failed["observed"]["problems"] == ["cuda-vector-add Error (exit code 1)"]
    assert failed["node"] == "dgx01"


def test_a_vector_add_pod_that_never_ran_fails_with_the_schedulers_reason():
    check = verify.judge_vector_add(api("pod-vector-add-unschedulable.json"), "", timeout_s=300)
    assert check["verdict"] == "FAIL"
    assert "within 300s" in check["remedy"]
    assert "2 Insufficient nvidia.com/gpu" in check["remedy"]


@pytest.mark.parametrize(
    ("name", "finished", "status"),
    [
        ("mpijob-running.json", False, "FAIL"),
        ("mpijob-succeeded.json", True, "PASS"),
        ("mpijob-failed.json", True, "FAIL"),
    ],
)
def test_mpijob_conditions(name, finished, status):
    job = api(name)
    assert verify.mpijob_finished(job) is finished
    assert verify.judge_mpijob(job, ["dgx01"])["verdict"] == status


def test_a_false_succeeded_condition_is_not_success():
    job = api("mpijob-succeeded.json")
    for condition in job["status"]["conditions"]:
        condition["status"] = "False"
    assert not verify.mpijob_finished(job)
    assert verify.judge_mpijob(job)["verdict"] == "FAIL"


def test_a_failed_mpijob_names_the_operators_message():
    check = verify.judge_mpijob(api("mpijob-failed.json"))
    assert check["observed"]["reason"] == "BackoffLimitExceeded"
    assert "backoff limit" in check["remedy"]


def test_the_launcher_log_is_judged_with_the_host_benchmark_threshold():
    text = SEED_2X8_LOG.read_text(encoding="utf-8")
    checks = {c["check"]: c for c in verify.judge_nccl_log(nccl, text, 40.0, ["dgx01"])}
    assert checks["nccl_busbw"]["verdict"] == "PASS"
    assert checks["nccl_busbw"]["observed"] == 55.22
    assert checks["nccl_transport"]["verdict"] == "PASS"
    slow = {c["check"]: c for c in verify.judge_nccl_log(nccl, text, 80.0)}
    assert slow["nccl_busbw"]["verdict"] == "FAIL"  # 55.22 < 0.9 x 80
    unjudged = {c["check"]: c for c in verify.judge_nccl_log(nccl, text, None)}
    assert unjudged["nccl_busbw"]["verdict"] == "UNKNOWN"
    assert unjudged["nccl_busbw"]["observed"] == 55.22


def test_a_launcher_log_without_nccl_output_fails():
    checks = verify.judge_nccl_log(nccl, "ssh: connect to host worker-0 port 22: Connection refused\n", 40.0)
    assert [(c["check"], c["verdict"]) for c in checks] == [("nccl_output", "FAIL")]


def test_a_socket_transport_fails_the_transport_check():
    text = SEED_2X8_LOG.read_text(encoding="utf-8").replace("NET/IB", "NET/Socket")
    checks = {c["check"]: c for c in verify.judge_nccl_log(nccl, text, 40.0)}
    assert checks["nccl_transport"]["verdict"] == "FAIL"


def test_the_judges_return_schema_valid_records_that_the_reader_keeps_as_they_are():
    checks = verify.judge_gpu_allocatable(api("nodes-faulty.json"), {"dgx01": 8, "dgx02": 8})
    checks.append(verify.judge_mpijob(api("mpijob-failed.json"), ["dgx01"]))
    checks.append(verify.check("nccl_busbw", "mpijob", "UNKNOWN", None, None, verify.SOURCE_BUSBW, "set it"))
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text(encoding="utf-8")))
    for record in checks:  # what the judges return is already the record, before any reader touches it
        validator.validate(record)
    stamped = [dict(r, run_id="20261123T180000Z-abcdef", checked_at="2026-11-23T18:09:00Z") for r in checks]
    document = {"schema_version": 1, "run_id": "20261123T180000Z-abcdef", "records": stamped}
    built = records.k8s_check_records(copy.deepcopy(document))
    assert built == stamped  # read, checked key by key, not translated
    assert [r["verdict"] for r in built] == ["PASS", "FAIL", "FAIL", "UNKNOWN"]
    verdicts = records.node_verdicts(built)
    assert verdicts["dgx02"]["verdict"] == "FAIL"
    assert verdicts["dgx01"]["verdict"] == "PASS"  # the failed MPIJob names no single node to blame


def test_a_verify_file_of_an_older_gpuforge_is_refused_naming_the_fix():
    old = {"run_id": None, "checked_at": None, "checks": [{"check": "gpu_allocatable", "status": "ok"}]}
    with pytest.raises(records.RecordError, match=r"older gpuforge.*run `gpuforge k8s verify` again"):
        records.k8s_check_records(old)


@pytest.mark.parametrize(("key", "value"), [("verdict", None), ("nodes", "dgx01"), ("threshold", "8")])
def test_a_record_with_a_mistyped_key_is_refused_naming_it(key, value):
    bad = verify.check("gpu_allocatable", "node", "PASS", 8, 8, verify.SOURCE_GPU, node="dgx01")
    bad[key] = value
    with pytest.raises(records.RecordError, match=f"records\\[0\\]: '{key}' is"):
        records.k8s_check_records({"records": [bad]})


@pytest.mark.parametrize("status", ["passed", "ok", "fail"])
def test_a_record_of_another_status_word_is_refused_naming_the_fix(status):
    """The judges write the records' verdicts themselves: no mapping table; a record carrying a word of an older
    vocabulary (ok / warn / fail / unknown) is refused with the command that writes a new one."""
    bad = verify.check("gpu_allocatable", "node", "PASS", 8, 8, verify.SOURCE_GPU, node="dgx01")
    bad["verdict"] = status
    with pytest.raises(
        records.RecordError, match=f"verdict '{status}' is not one of PASS, WARN, FAIL, UNKNOWN.*k8s verify"
    ):
        records.k8s_check_records({"records": [bad]})
    with pytest.raises(ValueError, match="status must be one of PASS, WARN, FAIL, UNKNOWN"):
        verify.check("gpu_allocatable", "node", status, 8, 8, verify.SOURCE_GPU, node="dgx01")
