"""systemctl show parser, unit names and the enable/disable/start/stop decision (module_utils/gpuforge_systemd.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_errors
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_systemd import (
    OptionError,
    ParseError,
    UnitError,
    after_state,
    diff_text,
    parse_show,
    plan,
    unit_name,
    unit_states,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "systemctl"
# Real output of systemd 252 on a Debian 12 lab node (tests/fixtures/systemctl/SOURCES.md): the units of a Slurm GPU
# node, a unit that does not exist and the alias sshd.service; a static unit, a disabled socket, a timer and a
# masked unit.
SHOW_REAL = (FIXTURES / "show-slurm-gpu-node.txt").read_text(encoding="utf-8")
REAL_NAMES = [
    "munge.service",
    "slurmd.service",
    "gpuforge-gpu-metrics.timer",
    "nvidia-persistenced.service",
    "nonexistent.service",
    "sshd.service",
]
SHOW_KINDS = (FIXTURES / "show-static-disabled-masked.txt").read_text(encoding="utf-8")
KIND_NAMES = ["systemd-journald.service", "ssh.socket", "apt-daily.timer", "console-getty.service"]
# The first two blocks of SHOW_REAL, for the tests below that slice it.
SHOW_SSH_NONEXISTENT = (
    "Id=ssh.service\nLoadState=loaded\nActiveState=active\nUnitFileState=enabled\n"
    "\n"
    "Id=nonexistent.service\nLoadState=not-found\nActiveState=inactive\nUnitFileState=\n"
)
# Units of a Slurm GPU node in states that need an action (munge stopped and disabled, a timer started by hand),
# in the real format above.
SHOW_NODE = (
    "Id=munge.service\nLoadState=loaded\nActiveState=inactive\nUnitFileState=disabled\n"
    "\n"
    "Id=slurmd.service\nLoadState=loaded\nActiveState=active\nUnitFileState=enabled\n"
    "\n"
    "Id=gpuforge-gpu-metrics.timer\nLoadState=loaded\nActiveState=active\nUnitFileState=disabled\n"
)
NODE_NAMES = ["munge.service", "slurmd.service", "gpuforge-gpu-metrics.timer"]


def state(unit_id="munge.service", load="loaded", active="inactive", file_state="disabled") -> dict:
    return {"id": unit_id, "load_state": load, "active_state": active, "unit_file_state": file_state}


def unit(name="munge.service", enabled=None, wanted=None) -> dict:
    return {"name": name, "enabled": enabled, "state": wanted}


def verbs(units: list, states: list) -> list:
    return [(action["name"], action["verb"]) for action in plan(units, states)]


def one(enabled=None, wanted=None, **current) -> list:
    """The verbs plan() gives munge.service, wanted (enabled, state) from current (load, active, file_state)."""
    return [verb for _name, verb in verbs([unit(enabled=enabled, wanted=wanted)], [state(**current)])]


def refusal(enabled=None, wanted=None, **current) -> str:
    with pytest.raises(UnitError) as info:
        plan([unit(enabled=enabled, wanted=wanted)], [state(**current)])
    return str(info.value)


# ---------------------------------------------------------------------------------------------------------
# parse_show


def test_parse_show_reads_one_block_per_unit_with_the_empty_value():
    assert parse_show(SHOW_SSH_NONEXISTENT) == [
        {"Id": "ssh.service", "LoadState": "loaded", "ActiveState": "active", "UnitFileState": "enabled"},
        {"Id": "nonexistent.service", "LoadState": "not-found", "ActiveState": "inactive", "UnitFileState": ""},
    ]


def test_real_output_parses_to_one_block_per_unit_in_argument_order():
    blocks = parse_show(SHOW_REAL)
    assert [block["Id"] for block in blocks] == [
        "munge.service",
        "slurmd.service",
        "gpuforge-gpu-metrics.timer",
        "nvidia-persistenced.service",
        "nonexistent.service",
        "ssh.service",
    ]
    assert blocks[4] == {
        "Id": "nonexistent.service",
        "LoadState": "not-found",
        "ActiveState": "inactive",
        "UnitFileState": "",
    }


def test_real_output_states_and_what_a_converged_node_needs():
    states = unit_states(REAL_NAMES, parse_show(SHOW_REAL))
    assert states[5] == state("ssh.service", "loaded", "active", "enabled")  # the alias reads as its unit
    wanted = [unit(name, enabled=True, wanted="started") for name in REAL_NAMES[:4]]
    assert plan(wanted, states[:4]) == []
    with pytest.raises(UnitError, match=r"nonexistent\.service: no such unit"):
        plan([unit("nonexistent.service", enabled=True, wanted="started")], [states[4]])


def test_real_static_disabled_timer_and_masked_units():
    states = unit_states(KIND_NAMES, parse_show(SHOW_KINDS))
    assert [s["unit_file_state"] for s in states] == ["static", "disabled", "enabled", "masked"]
    started = [unit(name, enabled=True, wanted="started") for name in KIND_NAMES[:3]]
    assert verbs(started, states[:3]) == [("ssh.socket", "enable"), ("ssh.socket", "start")]
    with pytest.raises(UnitError, match=r"console-getty\.service is masked"):
        plan([unit("console-getty.service", enabled=True, wanted="started")], [states[3]])
    assert plan([unit("console-getty.service", enabled=False, wanted="stopped")], [states[3]]) == []


def test_parse_show_without_the_last_newline_and_with_a_value_holding_equals():
    text = "Id=a.service\nLoadState=loaded\nDescription=x=1 y=2\n\nId=b.service\nLoadState=loaded"
    assert parse_show(text) == [
        {"Id": "a.service", "LoadState": "loaded", "Description": "x=1 y=2"},
        {"Id": "b.service", "LoadState": "loaded"},
    ]


def test_parse_show_of_nothing_is_no_block():
    assert parse_show("") == [] and parse_show("\n") == [] and parse_show(None) == []


def test_parse_show_refuses_a_line_that_is_not_key_value():
    with pytest.raises(ParseError, match=r"line 3 is not a Key=Value line: 'Failed to get properties: x'"):
        parse_show("Id=a.service\nLoadState=loaded\nFailed to get properties: x\n")
    assert issubclass(ParseError, gpuforge_errors.ParseError)


def test_parse_show_refuses_a_key_twice_in_a_block():
    with pytest.raises(ParseError, match=r"line 3 gives Id a second time"):
        parse_show("Id=a.service\nLoadState=loaded\nId=b.service\nLoadState=loaded\n")


# ---------------------------------------------------------------------------------------------------------
# unit_states


def test_unit_states_of_the_real_format():
    blocks = parse_show(SHOW_SSH_NONEXISTENT)
    assert unit_states(["ssh.service", "nonexistent.service"], blocks) == [
        state("ssh.service", "loaded", "active", "enabled"),
        state("nonexistent.service", "not-found", "inactive", ""),
    ]


def test_unit_states_fewer_blocks_than_units_names_them():
    blocks = parse_show(SHOW_NODE.split("\n\n")[0])
    with pytest.raises(ParseError) as info:
        unit_states(NODE_NAMES, blocks)
    assert str(info.value) == (
        "it printed 1 unit block(s) for the 3 unit(s) asked "
        "(munge.service, slurmd.service, gpuforge-gpu-metrics.timer): one block per unit was expected"
    )


@pytest.mark.parametrize("key", ["Id", "LoadState", "ActiveState"])
def test_unit_states_a_block_without_a_key_names_the_unit(key):
    blocks = parse_show(SHOW_NODE)
    del blocks[1][key]
    with pytest.raises(ParseError, match=rf"^the block of slurmd.service \(block 2\) has no {key}$"):
        unit_states(NODE_NAMES, blocks)


def test_unit_states_an_empty_id_is_none():
    text = SHOW_NODE.replace("Id=munge.service", "Id=")
    with pytest.raises(ParseError, match=r"the block of munge.service \(block 1\) has no Id"):
        unit_states(NODE_NAMES, parse_show(text))


def test_unit_states_without_unit_file_state_reads_it_empty():
    # systemd before 2xx left an empty property out even when --property named it.
    blocks = parse_show("Id=dev-sda.device\nLoadState=loaded\nActiveState=active\n")
    assert unit_states(["dev-sda.device"], blocks) == [state("dev-sda.device", "loaded", "active", "")]


def test_unit_states_refuses_blocks_out_of_order():
    blocks = parse_show(SHOW_NODE)
    blocks[0], blocks[1] = blocks[1], blocks[0]
    with pytest.raises(ParseError, match=r"block of munge.service \(block 1\) is the block of slurmd.service"):
        unit_states(NODE_NAMES, blocks)


def test_unit_states_an_alias_is_the_unit_it_names():
    # Debian's ssh.service has Alias=sshd.service: systemd loads ssh.service for either name.
    blocks = parse_show("Id=ssh.service\nLoadState=loaded\nActiveState=active\nUnitFileState=enabled\n")
    assert unit_states(["sshd.service"], blocks)[0]["id"] == "ssh.service"


@pytest.mark.parametrize("bad_id", ["munge.socket", "munge service", "munge"])
def test_unit_states_refuses_an_id_that_is_no_unit_of_the_type_asked(bad_id):
    text = SHOW_NODE.replace("Id=munge.service", f"Id={bad_id}")
    with pytest.raises(ParseError, match=r"the block of munge.service \(block 1\) has Id="):
        unit_states(NODE_NAMES, parse_show(text))


# ---------------------------------------------------------------------------------------------------------
# unit_name


@pytest.mark.parametrize(
    ("given", "name"),
    [
        ("munge", "munge.service"),
        ("munge.service", "munge.service"),
        ("gpuforge-gpu-metrics.timer", "gpuforge-gpu-metrics.timer"),
        ("nvidia-persistenced", "nvidia-persistenced.service"),
        ("prometheus-node-exporter.socket", "prometheus-node-exporter.socket"),
        ("getty@tty1", "getty@tty1.service"),
        ("-.mount", "-.mount"),
        ("srv-nfs\\x2dshare.mount", "srv-nfs\\x2dshare.mount"),
        # an unknown suffix is part of the name, as for systemctl
        ("dcgm.exporter", "dcgm.exporter.service"),
    ],
)
def test_unit_name_completes_as_systemctl_does(given, name):
    assert unit_name("units[0].name", given) == name


@pytest.mark.parametrize(
    ("given", "fragment"),
    [
        ("", "must be a unit name such as munge.service"),
        (5, "must be a unit name such as munge.service, got 5"),
        (" munge", "must not start or end with white space"),
        ("munge slurmd", "letters, digits"),
        ("/dev/sda", "not a path"),
        ("nvidia-*", "not a pattern"),
        ("getty@", "is a template"),
        ("getty@.service", "name an instance (getty@NAME.service)"),
        (".service", "is not a valid unit name"),
        ("a@b@c.service", "is not a valid unit name"),
        ("x" * 250 + ".service", "longer than systemd's 255 characters"),
    ],
)
def test_unit_name_refuses(given, fragment):
    with pytest.raises(OptionError) as info:
        unit_name("units[2].name", given)
    assert str(info.value).startswith("units[2].name ")
    assert fragment in str(info.value)


# ---------------------------------------------------------------------------------------------------------
# plan: boot state


@pytest.mark.parametrize("file_state", ["disabled", "linked", "linked-runtime", "enabled-runtime"])
def test_enable_when_not_enabled_at_boot(file_state):
    assert one(enabled=True, file_state=file_state) == ["enable"]


@pytest.mark.parametrize("file_state", ["enabled", "alias", "static", "indirect", "generated", "transient"])
def test_enabled_already_or_counts_as_enabled(file_state):
    assert one(enabled=True, file_state=file_state) == []


@pytest.mark.parametrize("file_state", ["enabled", "enabled-runtime"])
def test_disable_when_enabled(file_state):
    assert one(enabled=False, file_state=file_state) == ["disable"]


@pytest.mark.parametrize("file_state", ["disabled", "linked", "linked-runtime", "masked", "alias", "bad"])
def test_disabled_already(file_state):
    assert one(enabled=False, file_state=file_state) == []


@pytest.mark.parametrize("file_state", ["static", "indirect", "generated", "transient"])
def test_a_unit_that_cannot_be_disabled_is_refused(file_state):
    message = refusal(enabled=False, file_state=file_state)
    assert message.startswith(f"munge.service cannot be disabled: it is {file_state} (systemctl(1), is-enabled: ")
    assert "systemctl mask munge.service" in message


def test_enable_refused_for_a_masked_or_bad_unit_file():
    assert "run `systemctl unmask munge.service` first" in refusal(enabled=True, file_state="masked-runtime")
    assert "its unit file is invalid (UnitFileState=bad)" in refusal(enabled=True, file_state="bad")


@pytest.mark.parametrize("enabled", [True, False])
def test_no_unit_file_state_is_refused_either_way(enabled):
    assert refusal(enabled=enabled, file_state="").startswith(
        "munge.service: systemctl show gives no UnitFileState: systemd has no unit file of it"
    )


def test_an_undocumented_unit_file_state_is_refused():
    assert "UnitFileState='enabled-later', which systemctl(1) does not document" in refusal(
        enabled=True, file_state="enabled-later"
    )


# ---------------------------------------------------------------------------------------------------------
# plan: running state


@pytest.mark.parametrize("active", ["inactive", "failed", "deactivating", "maintenance"])
def test_start_when_not_running(active):
    assert one(wanted="started", active=active) == ["start"]


@pytest.mark.parametrize("active", ["active", "activating", "reloading", "refreshing"])
def test_started_already(active):
    assert one(wanted="started", active=active) == []


@pytest.mark.parametrize("active", ["active", "activating", "reloading", "deactivating", "maintenance"])
def test_stop_when_not_stopped(active):
    assert one(wanted="stopped", active=active) == ["stop"]


@pytest.mark.parametrize("active", ["inactive", "failed"])
def test_stopped_already(active):
    assert one(wanted="stopped", active=active) == []


def test_an_undocumented_active_state_is_refused():
    assert "ActiveState='busy', not a state systemd.unit(5) documents" in refusal(wanted="started", active="busy")


def test_nothing_asked_is_nothing_run_whatever_the_state():
    assert one(active="busy", file_state="") == []


# ---------------------------------------------------------------------------------------------------------
# plan: load state


def test_not_found_is_refused_with_the_fix():
    assert refusal(enabled=False, wanted="stopped", load="not-found", file_state="") == (
        "munge.service: no such unit (systemctl show says LoadState=not-found); install the package that ships it "
        "first (a unit file this play wrote needs `systemctl daemon-reload` before this task)"
    )


@pytest.mark.parametrize("load", ["not-found", "masked", "error"])
def test_a_unit_only_read_has_no_load_problem(load):
    assert one(load=load, active="inactive", file_state="") == []


@pytest.mark.parametrize(
    ("enabled", "wanted", "words"),
    [(True, None, "enabled"), (None, "started", "started"), (True, "started", "enabled or started")],
)
def test_masked_cannot_be_enabled_or_started(enabled, wanted, words):
    assert refusal(enabled=enabled, wanted=wanted, load="masked", file_state="masked") == (
        f"munge.service is masked (systemctl show says LoadState=masked) and cannot be {words}: "
        "run `systemctl unmask munge.service` first if it is meant to run"
    )


def test_masked_can_be_stopped_and_is_disabled():
    # systemctl mask leaves a running unit running: stop still works on it.
    assert one(enabled=False, wanted="stopped", load="masked", active="active", file_state="masked") == ["stop"]
    assert one(enabled=False, wanted="stopped", load="masked", active="inactive", file_state="masked") == []


@pytest.mark.parametrize("load", ["bad-setting", "error", "merged", "stub", ""])
def test_other_load_states_are_refused_with_the_value(load):
    assert refusal(wanted="started", load=load) == (
        f"munge.service: systemd could not load it (systemctl show says LoadState={load or '(empty)'}): "
        "`systemctl status munge.service` says why"
    )


# ---------------------------------------------------------------------------------------------------------
# plan: several units


def test_order_kept_and_boot_state_first():
    units = [unit(name, enabled=True, wanted="started") for name in NODE_NAMES]
    states = unit_states(NODE_NAMES, parse_show(SHOW_NODE))
    assert plan(units, states) == [
        {"name": "munge.service", "unit": "munge.service", "verb": "enable"},
        {"name": "munge.service", "unit": "munge.service", "verb": "start"},
        {"name": "gpuforge-gpu-metrics.timer", "unit": "gpuforge-gpu-metrics.timer", "verb": "enable"},
    ]


def test_all_already_fine_is_no_action():
    units = [unit("munge.service", False, "stopped"), unit("slurmd.service", True, "started")]
    states = unit_states(NODE_NAMES[:2], parse_show("\n\n".join(SHOW_NODE.split("\n\n")[:2])))
    assert plan(units, states) == []


def test_every_problem_is_named_and_nothing_planned():
    units = [unit("munge.service", True, "started"), unit("nonexistent.service", True), unit("b.service", False)]
    states = [
        state(),
        state("nonexistent.service", "not-found", "inactive", ""),
        state("b.service", file_state="static"),
    ]
    with pytest.raises(UnitError) as info:
        plan(units, states)
    assert [problem.split(" ")[0] for problem in info.value.problems] == ["nonexistent.service:", "b.service"]
    assert str(info.value) == "; ".join(info.value.problems)


def test_an_alias_and_its_unit_listed_together_are_refused():
    units = [unit("ssh.service", True, "started"), unit("sshd.service", True, "started")]
    states = [state("ssh.service", active="active", file_state="enabled")] * 2
    with pytest.raises(UnitError, match=r"^sshd.service and ssh.service are one unit \(ssh.service; one is an alias"):
        plan(units, states)


def test_an_alias_is_acted_on_through_its_unit():
    actions = plan([unit("sshd.service", wanted="started")], [state("ssh.service")])
    assert actions == [{"name": "sshd.service", "unit": "ssh.service", "verb": "start"}]


# ---------------------------------------------------------------------------------------------------------
# after_state, diff_text


def test_after_state():
    before = state("munge.service", "loaded", "inactive", "disabled")
    assert after_state(before, ["enable", "start"]) == state("munge.service", "loaded", "active", "enabled")
    assert after_state(before, ["disable", "stop"]) == state("munge.service", "loaded", "inactive", "disabled")
    assert after_state(before, []) == before


def test_diff_text_one_line_per_changed_unit():
    units = [unit(name, enabled=True, wanted="started") for name in NODE_NAMES]
    states = unit_states(NODE_NAMES, parse_show(SHOW_NODE))
    assert diff_text(units, states, plan(units, states)) == {
        "before": (
            "munge.service: enabled=disabled active=inactive\n"
            "gpuforge-gpu-metrics.timer: enabled=disabled active=active\n"
        ),
        "after": (
            "munge.service: enabled=enabled active=active\ngpuforge-gpu-metrics.timer: enabled=enabled active=active\n"
        ),
    }
    assert diff_text(units, states, []) == {"before": "", "after": ""}
