"""systemd units on the managed node, for the systemd_units module: the unit names asked, one `systemctl show`
read, and the enable/disable/start/stop a list of wanted states needs.

Pure functions, stdlib only (Python 3.8+): unit_name() checks and completes a name, parse_show() reads the text
of `systemctl show --property=Id,LoadState,ActiveState,UnitFileState -- NAME...`, unit_states() matches its blocks
to the names asked, plan() decides what to run and diff_text() says it; the module runs systemctl.
"""

from __future__ import annotations

import re

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import OptionError, ParseError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_options import show

__all__ = [
    "SHOW_PROPERTIES",
    "OptionError",
    "ParseError",
    "UnitError",
    "after_state",
    "diff_text",
    "parse_show",
    "plan",
    "unit_name",
    "unit_states",
]

# What the module asks `systemctl show --property=` for.
SHOW_PROPERTIES = ("Id", "LoadState", "ActiveState", "UnitFileState")
# The unit types (systemd.unit(5)). systemctl completes a name that ends in none of them with .service
# (unit_name_mangle), and so does unit_name().
UNIT_TYPES = ("service", "socket", "target", "device", "mount", "automount", "swap", "timer", "path", "slice", "scope")
# The characters of a unit name (systemd's unit-name.c: letters, digits, ":-_.\" and one "@" before an instance).
_NAME = re.compile(r"[A-Za-z0-9:_.\\@-]+")
_NAME_MAX = 255
# One line of `systemctl show`: Key=Value (the value may be empty or hold '=').
_LINE = re.compile(r"([A-Za-z][A-Za-z0-9]*)=(.*)")

# LoadState values: only a loaded unit is acted on; a masked one may be stopped or left disabled; any other
# (not-found, bad-setting, error, merged, stub) fails.
LOADED, NOT_FOUND, MASKED = "loaded", "not-found", "masked"

# UnitFileState values: systemctl(1), the table of the is-enabled command ("is-enabled output"). `systemctl
# is-enabled` exits 0 for these: the unit counts as enabled.
IS_ENABLED_EXIT_0 = ("enabled", "enabled-runtime", "alias", "static", "indirect", "generated", "transient")
# ... and > 0 for these (not-found is only is-enabled's word; show says LoadState=not-found instead).
IS_ENABLED_EXIT_NOT_0 = ("linked", "linked-runtime", "masked", "masked-runtime", "disabled", "bad")
UNIT_FILE_STATES = IS_ENABLED_EXIT_0 + IS_ENABLED_EXIT_NOT_0
# Units systemctl cannot enable or disable (the same table): no [Install] section (static), only Also= or an
# other name (indirect), written by a generator (generated) or through the runtime API (transient).
NOT_INSTALLABLE = ("static", "indirect", "generated", "transient")
# What `systemctl disable` undoes. enabled-runtime (links under /run, gone at the next boot) is not enabled at
# boot: enabled true makes it permanent with `systemctl enable`, as ansible.builtin.systemd_service does.
DISABLE_FROM = ("enabled", "enabled-runtime")
ENABLE_FROM = ("disabled", "linked", "linked-runtime", "enabled-runtime")

# ActiveState values (systemd.unit(5); maintenance and refreshing in newer releases).
# Running: ansible.builtin.systemd_service's set (active, activating), plus reloading and refreshing, which are
# a running unit's states too (`systemctl status` exits 0, running, for active and reloading: systemctl-show.c).
RUNNING = ("active", "activating", "reloading", "refreshing")
STOPPED = ("inactive", "failed")
ACTIVE_STATES = RUNNING + STOPPED + ("deactivating", "maintenance")

ENABLE, DISABLE, START, STOP = "enable", "disable", "start", "stop"


class UnitError(ValueError):
    """Units whose wanted state systemctl cannot bring about (missing, masked, static...): problems holds one
    message per unit, each starting with its name and saying what to do; the message is them all."""

    def __init__(self, problems: list):
        super().__init__("; ".join(problems))
        self.problems = list(problems)


# ---------------------------------------------------------------------------------------------------------
# Names


def unit_name(where: str, value) -> str:
    """The unit name value means, completed with .service when it ends in no unit type (as systemctl does);
    raises OptionError naming where for anything that is not one unit's name (a pattern, a path, a template)."""
    if not isinstance(value, str) or not value.strip():
        raise OptionError(where, f"must be a unit name such as munge.service, got {show(value)}")
    if value != value.strip():
        raise OptionError(where, f"must not start or end with white space, got {show(value)}")
    if "/" in value:
        raise OptionError(
            where, f"must be a unit name, not a path, got {show(value)} (systemd-escape --path names a mount unit)"
        )
    if any(char in value for char in "*?["):
        raise OptionError(where, f"must name one unit, not a pattern, got {show(value)}: list each unit")
    if not _NAME.fullmatch(value):
        raise OptionError(
            where, f"must be a unit name (letters, digits and ':-_.\\@', such as munge.service), got {show(value)}"
        )
    name = value if value.rpartition(".")[2] in UNIT_TYPES and "." in value else f"{value}.service"
    prefix = name.rpartition(".")[0]
    if not prefix or prefix.endswith(".") or prefix.startswith("@") or prefix.count("@") > 1:
        raise OptionError(where, f"is not a valid unit name, got {show(value)}")
    if prefix.endswith("@"):
        raise OptionError(
            where, f"is a template, got {show(value)}: name an instance ({prefix}NAME.{name.rpartition('.')[2]})"
        )
    if len(name) > _NAME_MAX:
        raise OptionError(where, f"is longer than systemd's {_NAME_MAX} characters, got {show(value)}")
    return name


# ---------------------------------------------------------------------------------------------------------
# Reading `systemctl show`


def parse_show(text: str) -> list:
    """The blocks of `systemctl show` output, in order: [{"Id": "munge.service", "LoadState": "loaded", ...}].

    systemctl prints one Key=Value line per property and an empty line between two units (systemctl-show.c,
    show_one()); a property asked for by --property is printed even when empty (UnitFileState= of a unit that
    has no unit file). Raises ParseError for a line that is not Key=Value or a key twice in a block."""
    blocks: list = []
    current = None
    for number, line in enumerate((text or "").split("\n"), 1):
        if not line.strip():
            current = None
            continue
        match = _LINE.fullmatch(line)
        if not match:
            raise ParseError(f"line {number} is not a Key=Value line: {show(line)}")
        key, value = match.groups()
        if current is None:
            current = {}
            blocks.append(current)
        if key in current:
            raise ParseError(
                f"line {number} gives {key} a second time in one unit's block (no empty line between two units?)"
            )
        current[key] = value
    return blocks


def unit_states(names: list, blocks: list) -> list:
    """The state of each unit of names (complete unit names, in the order they were given to systemctl show)
    from parse_show()'s blocks: [{"id", "load_state", "active_state", "unit_file_state"}], in the same order.

    systemctl prints the blocks in argument order; the Id of a block is the unit systemd loaded, which is the
    name asked or, for an alias, the unit it names (of the same type). Raises ParseError naming the unit(s) when
    the blocks cannot be the units asked: another number of blocks, a block without Id, LoadState or
    ActiveState, an Id that is another unit asked (the blocks out of order) or no unit name."""
    if len(blocks) != len(names):
        raise ParseError(
            f"it printed {len(blocks)} unit block(s) for the {len(names)} unit(s) asked "
            f"({', '.join(names)}): one block per unit was expected"
        )
    states = []
    for index, (name, block) in enumerate(zip(names, blocks)):
        where = f"the block of {name} (block {index + 1})"
        missing = [key for key in ("Id", "LoadState", "ActiveState") if not block.get(key)]
        if missing:
            raise ParseError(f"{where} has no {', '.join(missing)}")
        unit_id = block["Id"]
        # Another unit asked whose own block is not its own: the blocks are out of order. (Whose block is its
        # own: this name is an alias of it, which plan() refuses as the same unit listed twice.)
        if unit_id != name and unit_id in names and blocks[names.index(unit_id)].get("Id") != unit_id:
            raise ParseError(f"{where} is the block of {unit_id}: the blocks are not in the order asked")
        if not _NAME.fullmatch(unit_id) or unit_id.rpartition(".")[2] != name.rpartition(".")[2]:
            raise ParseError(f"{where} has Id={show(unit_id)}, not a unit name of the type asked")
        states.append(
            {
                "id": unit_id,
                "load_state": block["LoadState"],
                "active_state": block["ActiveState"],
                # Older systemd leaves an empty property out even when it is asked for.
                "unit_file_state": block.get("UnitFileState", ""),
            }
        )
    return states


# ---------------------------------------------------------------------------------------------------------
# Deciding


def _load_problem(name: str, unit: dict, state: dict):
    """Why the unit cannot be brought to its wanted state, from its LoadState; None when it can. A unit that is
    only read (neither enabled nor state wanted) has no problem: a missing one reads as not running."""
    if unit["enabled"] is None and unit["state"] is None:
        return None
    load = state["load_state"]
    if load == NOT_FOUND:
        return (
            f"{name}: no such unit (systemctl show says LoadState=not-found); install the package that ships it "
            "first (a unit file this play wrote needs `systemctl daemon-reload` before this task)"
        )
    if load == MASKED:
        wants = []
        if unit["enabled"] is True:
            wants.append("enabled")
        if unit["state"] == "started":
            wants.append("started")
        if wants:
            return (
                f"{name} is masked (systemctl show says LoadState=masked) and cannot be {' or '.join(wants)}: "
                f"run `systemctl unmask {name}` first if it is meant to run"
            )
        return None
    if load != LOADED:
        return (
            f"{name}: systemd could not load it (systemctl show says LoadState={load or '(empty)'}): "
            f"`systemctl status {name}` says why"
        )
    return None


_NOT_INSTALLABLE_WHY = {
    "static": "no [Install] section, it starts when another unit needs it",
    "indirect": "only Also= or another name enables it",
    "generated": "a generator wrote it and enables it",
    "transient": "created at run time, it has no unit file to disable",
}


def _enable_verb(name: str, enabled, file_state: str):
    """(verb or None, problem or None) for the wanted boot state (enabled true/false, None: left alone)."""
    if enabled is None:
        return None, None
    if not file_state:
        return None, (
            f"{name}: systemctl show gives no UnitFileState: systemd has no unit file of it to enable or disable "
            "(a device or scope unit, or a SysV init script on an old systemd: use ansible.builtin.systemd_service)"
        )
    if file_state not in UNIT_FILE_STATES:
        return None, (
            f"{name}: systemctl show gives UnitFileState={show(file_state)}, which systemctl(1) does not document: "
            "not enabled or disabled (ansible.builtin.systemd_service asks `systemctl is-enabled` instead)"
        )
    if enabled:
        if file_state in ENABLE_FROM:
            return ENABLE, None
        if file_state in ("masked", "masked-runtime"):
            return None, f"{name} is masked (UnitFileState={file_state}): run `systemctl unmask {name}` first"
        if file_state == "bad":
            return None, f"{name}: its unit file is invalid (UnitFileState=bad): `systemctl status {name}` says why"
        return None, None  # enabled, alias, or one that cannot be enabled and counts as enabled (static...)
    if file_state in DISABLE_FROM:
        return DISABLE, None
    if file_state in NOT_INSTALLABLE:
        return None, (
            f"{name} cannot be disabled: it is {file_state} (systemctl(1), is-enabled: "
            f"{_NOT_INSTALLABLE_WHY[file_state]}); leave enabled out for it, or mask it "
            f"(`systemctl mask {name}`) to keep it from ever starting"
        )
    return None, None


def _active_verb(name: str, wanted, active: str):
    """(verb or None, problem or None) for the wanted running state (started/stopped, None: left alone)."""
    if wanted is None:
        return None, None
    if active not in ACTIVE_STATES:
        return None, f"{name}: systemctl show gives ActiveState={show(active)}, not a state systemd.unit(5) documents"
    if wanted == "started":
        return (None if active in RUNNING else START), None
    return (None if active in STOPPED else STOP), None


def plan(units: list, states: list) -> list:
    """What to run, in order, to bring each unit to its wanted state.

    units: [{"name": complete unit name, "enabled": True/False/None, "state": "started"/"stopped"/None}];
    states: unit_states() of the same units, in the same order. Returns [{"name", "unit", "verb"}]: for each
    unit in list order, enable or disable first, then start or stop; "unit" is the unit systemd loaded (its Id:
    the unit an alias names) and is what systemctl is given. Raises UnitError naming every unit whose wanted
    state cannot be reached (missing, masked, not installable, listed twice through an alias), before anything
    runs."""
    actions: list = []
    problems: list = []
    seen: dict = {}
    for unit, state in zip(units, states):
        name = unit["name"]
        if state["id"] in seen:
            problems.append(
                f"{name} and {seen[state['id']]} are one unit ({state['id']}; one is an alias): list it once"
            )
            continue
        seen[state["id"]] = name
        problem = _load_problem(name, unit, state)
        if problem:
            problems.append(problem)
            continue
        verbs = []
        for verb, why in (
            _enable_verb(name, unit["enabled"], state["unit_file_state"]),
            _active_verb(name, unit["state"], state["active_state"]),
        ):
            if why:
                problems.append(why)
            elif verb:
                verbs.append(verb)
        actions.extend({"name": name, "unit": state["id"], "verb": verb} for verb in verbs)
    if problems:
        raise UnitError(problems)
    return actions


# ---------------------------------------------------------------------------------------------------------
# Saying it


def after_state(state: dict, verbs) -> dict:
    """The state a unit has after verbs (enable, disable, start, stop) ran on it."""
    after = dict(state)
    for verb in verbs:
        if verb in (ENABLE, DISABLE):
            after["unit_file_state"] = f"{verb}d"
        else:
            after["active_state"] = "active" if verb == START else "inactive"
    return after


def _line(name: str, state: dict) -> str:
    return f"{name}: enabled={state['unit_file_state']} active={state['active_state']}\n"


def diff_text(units: list, states: list, actions: list) -> dict:
    """{"before", "after"}: one line per unit that changes, in list order, such as
    "munge.service: enabled=disabled active=inactive" and "munge.service: enabled=enabled active=active"."""
    before, after = [], []
    for unit, state in zip(units, states):
        verbs = [action["verb"] for action in actions if action["name"] == unit["name"]]
        if verbs:
            before.append(_line(unit["name"], state))
            after.append(_line(unit["name"], after_state(state, verbs)))
    return {"before": "".join(before), "after": "".join(after)}
