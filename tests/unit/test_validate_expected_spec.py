"""The expected spec validate_node.yml hands gpu_node_check: one precedence for every key, site > system > GPU SKU >
defaults (roles/gpuforge/defaults/main/expected_hardware.yml), templated by ansible-core from the task as written."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.template import Templar, trust_as_template

ROOT = Path(__file__).resolve().parents[2]
SYSTEM = "dgx1-v100-edr"


def _trusted(value):
    """The task's own text, trusted as a template (nested in dicts too), as ansible-core trusts a playbook's."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {key: _trusted(item) for key, item in value.items()}
    return value


def _expected(**overrides) -> dict:
    (task,) = yaml.safe_load((ROOT / "playbooks/tasks/validate_node.yml").read_text(encoding="utf-8"))
    defaults = yaml.safe_load((ROOT / "roles/gpuforge/defaults/main/expected_hardware.yml").read_text("utf-8"))
    variables = {
        **_trusted(defaults),  # role defaults are trusted templates, as the task's text is
        "gpuforge_expected_driver_branch": "550",  # a template over the driver pins in the role
        "gpuforge_expected_system": SYSTEM,
        **overrides,
    }
    variables.update({name: _trusted(value) for name, value in task["vars"].items()})
    expression = task["gpuforge.cluster.gpu_node_check"]["expected"]
    return Templar(loader=None, variables=variables).template(trust_as_template(expression))


def test_defaults_sku_and_system_each_reach_the_spec():
    spec = _expected()
    assert spec["retired_pages_max"] == 60 and spec["kernel_taint_fail_bits"] == [4, 5, 7]  # defaults
    assert spec["xid_fatal"] == [48, 62, 64, 74, 79, 95, 119, 120]  # the SKU entry, from its default
    assert spec["gpu_model"] == "Tesla V100-SXM2-16GB"  # the SKU
    assert spec["gpu_count"] == 8 and spec["hcas"]  # the system


@pytest.mark.parametrize("key", ["retired_pages_max", "gpu_count", "remap_uncorrectable_max", "kernel_taint_warn_bits"])
def test_the_site_wins_over_system_sku_and_defaults(key):
    spec = _expected(gpuforge_expected_site={key: [9] if key.endswith("_bits") else 3})
    assert spec[key] == ([9] if key.endswith("_bits") else 3)


def test_a_system_wins_over_the_sku_and_the_defaults():
    defaults = yaml.safe_load((ROOT / "roles/gpuforge/defaults/main/expected_hardware.yml").read_text("utf-8"))
    systems = defaults["gpuforge_expected_systems"]
    systems[SYSTEM] = {**systems[SYSTEM], "retired_pages_max": 5, "gpu_model": "from the system"}
    spec = _expected(gpuforge_expected_systems=systems)
    assert (spec["retired_pages_max"], spec["gpu_model"]) == (5, "from the system")
