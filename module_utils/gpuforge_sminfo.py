"""InfiniBand subnet manager state (`sminfo`) and the fabric-level judgement of which SM is master.

Stdlib only; runs on the managed node's Python 3.8+.

Format: infiniband-diags sminfo.c (linux-rdma/rdma-core@v50.0:infiniband-diags/sminfo.c) prints one line,
``sminfo: sm lid %d sm guid 0x%PRIx64, activity count %u priority %d state %d %s``, the last field being one of
SMINFO_NOTACT, SMINFO_DISCOVER, SMINFO_STANDBY, SMINFO_MASTER for states 0-3 (and ``???`` past them). The GUID is
printed without zero padding (``0x2c90200259201``), so GUIDs are compared as numbers, never as strings. Priorities
are 0-15 (sminfo(8): ``-p, --priority <priority> set priority (0-15)``). Real captures the tests read are listed in
tests/fixtures/sminfo/SOURCES.md; one of them was wrapped by a mail client, so any run of whitespace (line breaks
included) separates the fields.

Judging a fabric: the InfiniBand Architecture Specification's SM election makes exactly one SM master per subnet;
the one with the highest priority wins, ties going to the lowest port GUID (OpenSM's osm_sm_is_greater_than,
linux-rdma/opensm@3.3.23:include/opensm/osm_sm.h, used by opensm/osm_sminfo_rcv.c and opensm/osm_state_mgr.c).
gpuforge configures one preferred SM (the highest sm_priority) and standbys below it, so the fabric is healthy when
exactly one SM reports MASTER, it is the preferred one, and every SM reports the priority it was configured with.
"""

from __future__ import annotations

import re

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import FAIL, PASS, WARN, node_check
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError

__all__ = [
    "CHECK_NAME",
    "STATE_NAMES",
    "ParseError",
    "judge_fabric",
    "judge_subnet_manager",
    "normalize_guid",
    "parse_sminfo",
    "read_run",
]

# sminfo.c statestr[], indexed by the SMInfo state field.
STATE_NAMES = ("SMINFO_NOTACT", "SMINFO_DISCOVER", "SMINFO_STANDBY", "SMINFO_MASTER")
MASTER = 3
PRIORITY_MAX = 15

_LINE = re.compile(
    r"sminfo: sm lid (?P<lid>\d+) sm guid (?P<guid>0x[0-9a-fA-F]+), activity count (?P<act>\d+) "
    r"priority (?P<prio>\d+) state (?P<state>\d+) (?P<name>SMINFO_[A-Z]+|\?\?\?)"
)


def normalize_guid(guid) -> str:
    """A port GUID as sminfo's unpadded form would compare: 16 lower-case hex digits with 0x. Accepts an int, "0x..."
    or the colon-separated form ibv_devinfo prints (0002:c902:0025:930c)."""
    if isinstance(guid, int) and not isinstance(guid, bool):
        value = guid
    else:
        text = str(guid).strip().lower().replace(":", "")
        if text.startswith("0x"):
            text = text[2:]
        if not text or len(text) > 16 or not re.fullmatch(r"[0-9a-f]+", text):
            raise ValueError(f"{guid!r} is not a 64-bit port GUID (0x followed by up to 16 hex digits)")
        value = int(text, 16)
    if not 0 <= value < 1 << 64:
        raise ValueError(f"{guid!r} is not a 64-bit port GUID")
    return f"0x{value:016x}"


def parse_sminfo(text: str) -> dict:
    """The SMInfo one `sminfo` run printed: sm_lid, sm_guid (normalized), activity_count, priority, state,
    state_name. ParseError when there is no sminfo line, more than one, or a field out of its range."""
    flat = " ".join(text.split())
    found = list(_LINE.finditer(flat))
    if not found:
        raise ParseError("no 'sminfo: sm lid N sm guid 0x..., activity count N priority N state N NAME' line")
    if len(found) > 1:
        raise ParseError(f"{len(found)} sminfo lines in one output; parse each run's output on its own")
    match = found[0]
    state = int(match["state"])
    priority = int(match["prio"])
    if priority > PRIORITY_MAX:
        raise ParseError(f"priority {priority} is outside 0-{PRIORITY_MAX}")
    expected_name = STATE_NAMES[state] if state < len(STATE_NAMES) else "???"
    if match["name"] != expected_name:
        raise ParseError(f"state {state} is printed as {match['name']}, sminfo prints {expected_name}")
    try:
        guid = normalize_guid(match["guid"])
    except ValueError as err:
        raise ParseError(str(err)) from None
    return {
        "sm_lid": int(match["lid"]),
        "sm_guid": guid,
        "activity_count": int(match["act"]),
        "priority": priority,
        "state": state,
        "state_name": match["name"],
    }


def judge_fabric(readings: list, subnet_managers: list) -> dict:
    """Judge one subnet from the SMInfo of each configured SM port.

    readings: parse_sminfo results, one per SM asked (``sminfo -G <port guid>``), in any order.
    subnet_managers: the configured SMs, each {"host", "guid", "priority"}; the preferred one is the highest
    priority (a tie there is an inventory error: the election would fall to the lowest GUID, not to the operator).

    Returns {"ok", "problems", "master", "preferred"}; each problem names the SM (host and GUID) and the fix.
    """
    configured = {}
    for sm in subnet_managers:
        configured[normalize_guid(sm["guid"])] = {"host": sm["host"], "priority": int(sm["priority"])}
    if not configured:
        raise ValueError("no subnet managers configured to judge the fabric against")
    top = max(sm["priority"] for sm in configured.values())
    preferred = sorted(guid for guid, sm in configured.items() if sm["priority"] == top)
    problems = []
    if len(preferred) > 1:
        hosts = ", ".join(f"{configured[g]['host']} ({g})" for g in preferred)
        problems.append(f"{hosts} share the highest sm_priority {top}: give the preferred SM a higher one")

    def name(guid):
        return f"{configured[guid]['host']} ({guid})" if guid in configured else f"unconfigured SM {guid}"

    masters = {}
    for reading in readings:
        guid = reading["sm_guid"]
        if reading["state"] == MASTER:
            masters.setdefault(guid, reading)
        if guid in configured and reading["priority"] != configured[guid]["priority"]:
            problems.append(
                f"{name(guid)} runs at priority {reading['priority']}, configured {configured[guid]['priority']}: "
                "restart its OpenSM after the configuration changed"
            )
    if not masters:
        problems.append("no SM is master: the fabric has no subnet manager running (start OpenSM on an SM node)")
    elif len(masters) > 1:
        priorities = {m["priority"] for m in masters.values()}
        detail = f"at equal priority {priorities.pop()}" if len(priorities) == 1 else "at different priorities"
        hosts = ", ".join(name(g) for g in sorted(masters))
        problems.append(
            f"{len(masters)} SMs are master {detail}: {hosts}; the subnet is split or an SM ignores the other "
            "(check the cabling between them and give each SM its own sm_priority)"
        )
    else:
        master = next(iter(masters))
        if master != preferred[0]:
            problems.append(
                f"master is {name(master)}, not the preferred {name(preferred[0])} (priority {top}): "
                "start OpenSM on the preferred SM, or fix the priorities"
            )
    return {
        "ok": not problems,
        "problems": problems,
        "master": sorted(masters)[0] if len(masters) == 1 else None,
        "preferred": preferred[0],
    }


CHECK_NAME = "subnet_manager"
REMEDY_NO_MASTER = (
    "Start the subnet manager: on the preferred SM host `systemctl start opensmd` (opensm on Debian's in-box package), "
    "or enable the switch's SM; then validate again"
)
REMEDY_MASTERS = (
    "Give every SM its own sm_priority (mlnx_ofed_opensm_priority per SM host), restart OpenSM where it changed, "
    "and check the cabling between the SMs' parts of the fabric"
)


def read_run(rc, stdout, stderr) -> dict:
    """One sminfo run's SMInfo (parse_sminfo), or ParseError naming how it failed: sminfo prints
    ``sminfo: iberror: failed: <what>`` and exits 255 when no SM answers (infiniband-diags ibdiag_common.c ibexit)."""
    text = stdout or ""
    failure = re.search(r"\S*: iberror: (?:\[pid \d+\] \w+: )?failed: .*", text)
    if rc or failure:
        said = failure.group(0).strip() if failure else (stderr or text or "").strip()[:200]
        raise ParseError(f"sminfo exited with code {rc}: {said or 'no output'}")
    return parse_sminfo(text)


def judge_subnet_manager(plain, asked=(), subnet_managers=()) -> dict:
    """The subnet_manager check of one InfiniBand node.

    plain: (rc, stdout, stderr) of `sminfo` (the SM the node's port names: the master it sees); asked: one
    (guid, rc, stdout, stderr) per configured SM, of `sminfo -G <guid>`; subnet_managers: the configured SMs
    ({host, guid, priority}; empty where the switches run the SM). FAIL when no SM answers, when the SM the node sees
    is not master, when two SMs are master (judge_fabric) or the master is not the preferred one; WARN when a
    configured SM does not answer (no standby to fail over to).
    """
    configured = [
        {"host": sm["host"], "guid": normalize_guid(sm["guid"]), "priority": int(sm["priority"])}
        for sm in subnet_managers or []
    ]
    wanted = {"subnet_managers": configured} if configured else {"master": "one SM in state 3 SMINFO_MASTER"}
    try:
        seen = read_run(*plain)
    except ParseError as exc:
        fault = f"no subnet manager answers: {exc}"
        return node_check(CHECK_NAME, FAIL, {"master": None}, wanted, fault, REMEDY_NO_MASTER)
    readings, silent = [seen], []
    for guid, rc, stdout, stderr in asked or ():
        try:
            readings.append(read_run(rc, stdout, stderr))
        except ParseError as exc:
            silent.append(f"{normalize_guid(guid)} ({exc})")
    observed = {
        "master": seen if seen["state"] == MASTER else None,
        "sms": sorted({r["sm_guid"]: r for r in readings}.values(), key=lambda r: r["sm_guid"]),
    }
    if seen["state"] != MASTER:
        fault = f"the SM at lid {seen['sm_lid']} ({seen['sm_guid']}) is {seen['state_name']}, not master"
        return node_check(CHECK_NAME, FAIL, observed, wanted, fault, REMEDY_NO_MASTER)
    if configured:
        verdict = judge_fabric(readings, configured)
        problems = verdict["problems"]
    else:
        masters = sorted({r["sm_guid"] for r in readings if r["state"] == MASTER})
        problems = [f"{len(masters)} SMs are master: {', '.join(masters)}"] if len(masters) > 1 else []
    if problems:
        return node_check(CHECK_NAME, FAIL, observed, wanted, "; ".join(problems), REMEDY_MASTERS)
    if silent:
        fault = "configured SM does not answer (no standby to fail over to): " + "; ".join(silent)
        return node_check(CHECK_NAME, WARN, observed, wanted, fault, "Start OpenSM on that SM host")
    return node_check(CHECK_NAME, PASS, observed, wanted)
