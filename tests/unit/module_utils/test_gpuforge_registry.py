"""The check registry (module_utils/gpuforge_registry.py) is where the check names, the expected spec's keys and the
lab faults come from: gpu_node_check's documentation, gpuforge_node_health and the lab's fault table agree with it."""

from __future__ import annotations

import re

import yaml
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_node_health as node_health
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_registry as registry
from ansible_collections.gpuforge.cluster.plugins.modules import gpu_node_check

from gpuforge.lab import profiles

DIAGNOSTIC_CHECKS = ["dcgm_diag", "nvbandwidth", "gdr_ib_write_bw"]


def test_every_check_name_is_registered_once_and_its_sources_exist():
    assert len(registry.CHECK_NAMES) == len(set(registry.CHECK_NAMES))
    for check in registry.CHECKS:
        assert set(check.needs) <= set(registry.SOURCES), check.names
        if check.judge is not None:  # a standalone check says what to do when it fails
            assert check.remedy and check.lab_fault, check.names


def test_the_module_documents_the_registered_checks_in_registry_order():
    doc = " ".join(yaml.safe_load(gpu_node_check.RETURN)["records"]["description"][0].split())
    listed = re.search(
        r"gpuforge_registry.py CHECK_NAMES\) - first those judged together - (.*?); then the registry's standalone "
        r"checks, in registry order; then those of O\(diagnostics\) - (.*?)\.$",
        doc,
    )
    assert [name.strip() for name in listed.group(1).split(",")] == list(node_health.CHECK_NAMES)
    assert [n.strip() for n in listed.group(2).split(",")] == DIAGNOSTIC_CHECKS
    standalone = [name for check in registry.standalone() for name in check.names]
    assert list(registry.CHECK_NAMES) == list(node_health.CHECK_NAMES) + standalone


def test_judge_node_s_names_and_spec_keys_are_the_registry_s():
    assert tuple(n for c in registry.CHECKS if c.judge is None for n in c.names) == node_health.CHECK_NAMES
    assert set(node_health.CHECK_NAMES) <= set(registry.CHECK_NAMES)
    spec = node_health.check_expected({"gpu_count": "8", "ib_link_flaps_max": "2", "gpu_sku": "h100"})
    assert (spec["gpu_count"], spec["ib_link_flaps_max"], spec["gpu_sku"]) == (8, 2, "h100")


def test_the_lab_accepts_each_registered_fault_with_its_parameters():
    for fault, (required, optional) in registry.LAB_FAULTS.items():
        assert profiles.FAULT_PARAMS[fault] == (required, optional), fault


def test_a_file_source_that_cannot_be_read_says_why(tmp_path):
    missing = registry.read_file(str(tmp_path), "proc/sys/kernel/tainted")
    assert isinstance(missing, registry.Unreadable) and "could not be read" in missing
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "x").write_text("7\n", encoding="ascii")
    assert registry.read_file(str(tmp_path), "proc/x") == "7\n"
