"""Simulated `sminfo` (infiniband-diags): `sminfo [-C ca] [-P port] [-G|-L] [sm_lid|sm_guid]`.

Output and failures as rdma-core's infiniband-diags/sminfo.c prints them (v50.0):

* an answer is one line on stdout, ``sminfo: sm lid %d sm guid 0x%PRIx64, activity count %u priority %d state %d
  %s`` (the GUID unpadded, as in the captures of tests/fixtures/sminfo), exit 0;
* no SM answers: libibmad's mad_rpc (libibmad/rpc.c) warns ``ibwarn: [<pid>] mad_rpc: _do_madrpc failed; dport
  (Lid <n>)`` on stderr after its retries time out (portid2str prints ``Lid %d``), and sminfo's IBEXIT("query")
  prints ``sminfo: iberror: failed: query`` on stdout (ibdiag_common.c ibexit) and exits -1, status 255. MLNX_OFED's
  README ("Starting and Verifying the IB Fabric") names this failure as what sminfo prints when no SM is running;
* ``-G <guid>`` first asks the SA for the port's LID (ib_path_query_via); without a master SM that fails with
  ``ibwarn: [<pid>] mad_rpc_rmpp: _do_madrpc failed; dport (Lid <n>)``, ``ibwarn: [<pid>] ib_path_query_via: sa
  call path_query failed`` and ``sminfo: iberror: failed: can't resolve destination port <guid>``.

The fabric's SMs (lab/profiles/SCHEMA.md "Subnet managers"): the hardware document's ``subnet_managers``
({guid, lid, priority} each) or, without one, the lab fabric's SM on the head node (lab/profiles/head.yml: port GUID
0x98039b0300a4c600, LID 1, the SM LID every lab profile's InfiniBand ports carry) at OpenSM's default priority 0.
An OpenSM running on this node (the lab's opensm, found in the process table) joins them with the port it binds to
(``guid`` of its opensm.conf, else the first active InfiniBand port) and the ``sm_priority`` of that file. The
election is the InfiniBand one OpenSM implements (osm_sm_is_greater_than): the highest priority is master, ties to
the lowest GUID; the others are standby. Plain ``sminfo`` asks the SM at the local port's SM LID: the master.

Faults: ``sm_missing`` (no SM answers: every query fails as above) and ``sm_duplicate_master`` (a second SM,
``guid``/``lid``, is master at the master's priority - a split subnet or an SM that does not see the other: both
answer state 3 SMINFO_MASTER, and this node's port points at the second one, so plain sminfo reports it).
"""

from __future__ import annotations

import os
import sys

from gpuforge_sim import hardware, ib_ports

MASTER, STANDBY = 3, 2
STATE_NAMES = ("SMINFO_NOTACT", "SMINFO_DISCOVER", "SMINFO_STANDBY", "SMINFO_MASTER")
# The lab fabric's SM when the hardware document names none: the head node's port (lab/profiles/head.yml).
LAB_SM = {"guid": 0x98039B0300A4C600, "lid": 1, "priority": 0}
# A second master of `sm_duplicate_master` when the fault names none (a GUID no lab profile uses).
DUPLICATE_SM = {"guid": 0x98039B0300A4C700, "lid": 2}
OPENSM_CONF_PATHS = ("/etc/opensm/opensm.conf", "/etc/rdma/opensm.conf")


def _int(value) -> int:
    return int(value, 0) if isinstance(value, str) else int(value)


def _local_ib_port(hw: dict) -> dict | None:
    for hca in ib_ports.ports_view(hw):
        for port in hca["ports"]:
            if port["link_layer"] == "InfiniBand" and port["state"] == "Active":
                return port
    return None


def _opensm_running() -> bool:
    """Whether an opensm process runs on this node ($GPUFORGE_LAB_PROC, default /proc: the process table)."""
    proc = os.environ.get("GPUFORGE_LAB_PROC", "/proc")
    try:
        entries = [e for e in os.listdir(proc) if e.isdigit()]
    except OSError:
        return False
    for entry in entries:
        try:
            with open(os.path.join(proc, entry, "cmdline"), "rb") as handle:
                argv = handle.read().split(b"\0")
        except OSError:
            continue
        # opensm itself, `python3 /usr/sbin/opensm`, or the lab's /usr/sbin/opensm wrapper (src/gpuforge/lab/mirror.py),
        # which execs `python3 -c 'import sys; from gpuforge_sim.opensm import main; ...'`
        if any(os.path.basename(arg.decode(errors="replace")) == "opensm" for arg in argv[:2] if arg):
            return True
        if len(argv) > 2 and argv[1] == b"-c" and b"from gpuforge_sim.opensm import main" in argv[2]:
            return True
    return False


def _opensm_conf() -> dict:
    """`key value` lines of the installed opensm.conf ($GPUFORGE_LAB_OPENSM_CONF overrides the path)."""
    paths = [os.environ["GPUFORGE_LAB_OPENSM_CONF"]] if os.environ.get("GPUFORGE_LAB_OPENSM_CONF") else []
    for path in paths + list(OPENSM_CONF_PATHS):
        try:
            with open(path, encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        except OSError:
            continue
        conf = {}
        for line in lines:
            parts = line.split(None, 1)
            if len(parts) == 2 and not parts[0].startswith("#"):
                conf[parts[0]] = parts[1].strip()
        return conf
    return {}


def fabric(hw: dict) -> list[dict]:
    """The SMs of the node's subnet after the election: [{guid, lid, priority, state}], master first."""
    sms = [
        {"guid": _int(sm["guid"]), "lid": _int(sm["lid"]), "priority": int(sm.get("priority", 0))}
        for sm in hw.get("subnet_managers") or [LAB_SM]
    ]
    port = _local_ib_port(hw)
    if port is not None and _opensm_running():
        conf = _opensm_conf()
        guid = _int(conf["guid"]) if conf.get("guid", "0x0") not in ("0x0", "0", "0x0000000000000000") else None
        guid = guid or port["port_guid"]
        local = {"guid": guid, "lid": port["lid"], "priority": int(conf.get("sm_priority", 0))}
        sms = [sm for sm in sms if sm["guid"] != guid and sm["lid"] != local["lid"]] + [local]
    sms.sort(key=lambda sm: (-sm["priority"], sm["guid"]))
    for index, sm in enumerate(sms):
        sm["state"] = MASTER if index == 0 else STANDBY
    for fault in hardware.faults_of(hw, "sm_duplicate_master"):
        second = {
            "guid": _int(fault.get("guid", DUPLICATE_SM["guid"])),
            "lid": _int(fault.get("lid", DUPLICATE_SM["lid"])),
            "priority": sms[0]["priority"],
            "state": MASTER,
        }
        sms = [sms[0], second] + [sm for sm in sms[1:] if sm["guid"] != second["guid"]]
    return sms


def port_sm_lid(hw: dict, port: dict, sms: list[dict] | None = None) -> int:
    """The SM LID an Active InfiniBand port holds (ibstat's `SM lid`, the LID plain sminfo asks): the elected master's;
    on a split subnet (sm_duplicate_master) the second master's, whose part this node is in; with no SM answering
    (sm_missing) the one it learned before (the profile's), which now times out. Other ports keep theirs (0)."""
    if port["link_layer"] != "InfiniBand" or port["state"] != "Active" or hardware.faults_of(hw, "sm_missing"):
        return port["sm_lid"]
    sms = fabric(hw) if sms is None else sms
    if not sms:
        return port["sm_lid"]
    return sms[1]["lid"] if hardware.faults_of(hw, "sm_duplicate_master") else sms[0]["lid"]


def _activity(sm: dict) -> int:
    """The SM's activity count: it grows between two queries (a counter per SM in the run directory)."""
    path = os.path.join(hardware.run_dir(), f"sminfo-activity-{sm['guid']:016x}")
    try:
        with open(path, encoding="ascii") as handle:
            count = int(handle.read().strip() or 0)
    except (OSError, ValueError):
        count = 0
    count += 1
    try:
        os.makedirs(hardware.run_dir(), exist_ok=True)
        with open(path, "w", encoding="ascii") as handle:
            handle.write(str(count))
    except OSError:
        pass
    return count


def _line(sm: dict) -> str:
    return (
        f"sminfo: sm lid {sm['lid']} sm guid 0x{sm['guid']:x}, activity count {_activity(sm)} "
        f"priority {sm['priority']} state {sm['state']} {STATE_NAMES[sm['state']]}\n"
    )


def _fail(message: str, warnings: list[str]) -> int:
    for warning in warnings:
        sys.stderr.write(f"ibwarn: [{ib_ports.pid()}] {warning}\n")
    sys.stdout.write(f"sminfo: iberror: failed: {message}\n")
    return 255


def _options(args: list[str]) -> tuple[str, list[str]]:
    """(destination type L|G|D, positional arguments); -C/-P/-t take a value."""
    dest, positional, skip = "L", [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("-C", "-P", "-t", "--Ca", "--Port", "--timeout"):
            skip = True
        elif arg in ("-G", "--Guid"):
            dest = "G"
        elif arg in ("-L", "--Lid"):
            dest = "L"
        elif arg in ("-D", "--Direct"):
            dest = "D"
        elif not arg.startswith("-"):
            positional.append(arg)
    return dest, positional


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "-V" in args or "--version" in args:
        sys.stderr.write("sminfo BUILD VERSION: 50.0\n")
        return 0
    hw = ib_ports.load()
    port = _local_ib_port(hw)
    if port is None:  # no InfiniBand port to send from (an Ethernet-only node): umad cannot open one
        warning = "mad_rpc_open_port: can't open UMAD port ((null):0)"
        return _fail("Failed to open '(null)' port '0'", [warning])
    dest, positional = _options(args)
    missing = bool(hardware.faults_of(hw, "sm_missing"))
    sms = [] if missing else fabric(hw)
    sm_lid = port_sm_lid(hw, port, sms)
    if positional and dest == "G":
        wanted = _int(positional[0])
        found = next((sm for sm in sms if sm["guid"] == wanted), None)
        if not sms:
            warnings = [
                f"mad_rpc_rmpp: _do_madrpc failed; dport (Lid {sm_lid})",
                "ib_path_query_via: sa call path_query failed",
            ]
            return _fail(f"can't resolve destination port {positional[0]}", warnings)
        if found is None:  # a port with no SM answers SMInfo with an error status, which sminfo reports silently
            return _fail("query", [])
        sys.stdout.write(_line(found))
        return 0
    lid = _int(positional[0]) if positional and dest == "L" else sm_lid
    if positional and dest == "D":  # a directed route: only the local port (path 0) is modelled
        if positional[0] not in ("0", "0,"):
            return _fail(f"can't resolve destination port {positional[0]}", [])
        lid = port["lid"]
    found = next((sm for sm in sms if sm["lid"] == lid), None)
    if found is None:
        # an SM that stopped: its LID times out; a LID without an SM answers with an error status (silent)
        return _fail("query", [f"mad_rpc: _do_madrpc failed; dport (Lid {lid})"] if lid == sm_lid else [])
    sys.stdout.write(_line(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
