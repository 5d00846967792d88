"""mlnx_ofed's OpenSM options: the options file rendered per host, where each OS's package reads it, and the
inventory rules of tasks/opensm.yml (port GUID form, routing engine names, one preferred SM per fabric)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from fabric_role_vars import render, render_file

ROLE = Path(__file__).resolve().parents[3] / "roles" / "mlnx_ofed"
GUID = "0x0002c90300a1b2c3"


def options(text: str) -> dict:
    """The file the way OpenSM reads it: '#' starts a comment, then "name value" (osm_subn_parse_conf_file)."""
    found = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, value = line.partition(" ")
            assert name not in found, f"{name} twice"
            found[name] = value.strip()
    return found


def test_preferred_sm_with_port_and_engines():
    text = render_file(
        "mlnx_ofed",
        "Debian",
        "opensm.conf.j2",
        mlnx_ofed_opensm_sm_priority=14,
        mlnx_ofed_opensm_port_guid=GUID,
        mlnx_ofed_opensm_routing_engines=["ftree", "minhop"],
    )
    assert options(text) == {"sm_priority": "14", "guid": GUID, "routing_engine": "ftree,minhop"}


def test_defaults_write_only_the_priority():
    assert options(render_file("mlnx_ofed", "RedHat", "opensm.conf.j2")) == {"sm_priority": "0"}


@pytest.mark.parametrize(
    ("os_name", "source", "path"),
    [
        ("Debian", "inbox", "/etc/opensm/opensm.conf"),
        ("Ubuntu", "inbox", "/etc/opensm/opensm.conf"),
        ("RedHat", "inbox", "/etc/rdma/opensm.conf"),
        ("RedHat", "doca", "/etc/opensm/opensm.conf"),
        ("Debian", "doca", "/etc/opensm/opensm.conf"),
        ("RedHat", "tarball", "/etc/opensm/opensm.conf"),
    ],
)
def test_options_file_where_the_package_reads_it(os_name, source, path):
    assert render("mlnx_ofed", os_name, "{{ mlnx_ofed_opensm_config_file }}", mlnx_ofed_source=source) == path


def problems(host: str, priorities: dict, **host_vars) -> list:
    """Render the refusal of tasks/opensm.yml for `host` in a group whose hosts have `priorities` (None: unset)."""
    task = yaml.safe_load((ROLE / "tasks" / "opensm.yml").read_text(encoding="utf-8"))[0]
    assert task["ansible.builtin.fail"]["msg"] == "{{ mlnx_ofed_opensm_problems | join(' ') }}"
    hostvars = {
        name: ({} if prio is None else {"mlnx_ofed_opensm_sm_priority": prio}) for name, prio in priorities.items()
    }
    hostvars[host].update(host_vars)
    own = {**hostvars[host], "inventory_hostname": host}
    return render(
        "mlnx_ofed",
        "Debian",
        "{{ mlnx_ofed_opensm_problems }}",
        groups={"ib_subnet_manager": list(priorities)},
        hostvars=hostvars,
        **task["vars"],
        **own,
    )


def test_preferred_and_standby_pass():
    assert problems("sm1", {"sm1": 14, "sm2": 10}) == []
    assert problems("sm2", {"sm1": 14, "sm2": 10}, mlnx_ofed_opensm_routing_engines=["ftree", "no_fallback"]) == []


def test_single_sm_at_the_default_priority_passes():
    assert problems("sm1", {"sm1": None}) == []


def test_two_sms_at_the_top_priority_are_refused_naming_both():
    assert problems("sm2", {"sm1": 14, "sm2": 14, "sm3": 5}) == [
        "sm2: sm1 and sm2 share the highest mlnx_ofed_opensm_sm_priority 14 in ib_subnet_manager: give the preferred"
        " SM a higher priority than its standbys."
    ]


def test_two_sms_left_at_the_default_are_refused():
    assert "sm1 and sm2 share the highest mlnx_ofed_opensm_sm_priority 0" in problems("sm1", {"sm1": None, "sm2": 0})[0]


@pytest.mark.parametrize("guid", ["0x2c90300a1b2c3", "0002:c903:00a1:b2c3", "0x0002c90300a1b2cz"])
def test_port_guid_must_be_ibstat_p_form(guid):
    (problem,) = problems("sm1", {"sm1": 14, "sm2": 10}, mlnx_ofed_opensm_port_guid=guid)
    assert problem.startswith("sm1: mlnx_ofed_opensm_port_guid must be 0x and 16 hex digits") and guid in problem


def test_unknown_routing_engine_is_named():
    (problem,) = problems("sm1", {"sm1": 14}, mlnx_ofed_opensm_routing_engines=["ftree", "fattree"])
    assert problem.startswith("sm1: mlnx_ofed_opensm_routing_engines has fattree, which OpenSM does not know")


def test_argument_spec_bounds_the_priority():
    spec = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text(encoding="utf-8"))
    option = spec["argument_specs"]["main"]["options"]["mlnx_ofed_opensm_sm_priority"]
    assert option["type"] == "int" and option["choices"] == list(range(16))
