"""Simulated `perfquery` (infiniband-diags): `perfquery [-C ca] [-P port] [-r|-R] [lid [port]]`.

Prints one PortCounters block as the real tool does: `# Port counters: Lid <lid> port <n> (CapMask: 0x..)`
and `<Name>:<dots><value>` lines padded to a fixed column (libibmad's dump format; field names and widths
of rdma-core libibmad/fields.c). Counters saturate at their width instead of wrapping.

Counter values come from the hardware document's faults (lab/profiles/SCHEMA.md):
* `ib_port_errors` {hca, port, counters: {Name: growth per read}, initial: {Name: value}} - each read of the
  port (a counter file in the run directory) adds `growth` once more, so a read before and one after a
  benchmark show the counters grow;
* `ib_link_flap` {hca, port, count} - LinkDownedCounter and LinkErrorRecoveryCounter start at `count`.
Data and packet counters grow by a fixed amount per read (traffic). `-R` resets the port's counters
(the read count goes back to zero and `initial` values are cleared); `-r` reads, then resets.
Only an Active InfiniBand port answers; another port ends in an `ibwarn`/`ibpanic` pair and exit 255
(the lab's wording: the real message names the failing MAD call).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from gpuforge_sim import ib_ports
from gpuforge_sim.hardware import faults_of, run_dir

# (name, width in bits) in the order libibmad prints PortCounters (rdma-core libibmad/fields.c).
FIELDS = (
    ("SymbolErrorCounter", 16),
    ("LinkErrorRecoveryCounter", 8),
    ("LinkDownedCounter", 8),
    ("PortRcvErrors", 16),
    ("PortRcvRemotePhysicalErrors", 16),
    ("PortRcvSwitchRelayErrors", 16),
    ("PortXmitDiscards", 16),
    ("PortXmitConstraintErrors", 8),
    ("PortRcvConstraintErrors", 8),
    ("LocalLinkIntegrityErrors", 4),
    ("ExcessiveBufferOverrunErrors", 4),
    ("VL15Dropped", 16),
    ("PortXmitData", 32),
    ("PortRcvData", 32),
    ("PortXmitPkts", 32),
    ("PortRcvPkts", 32),
    ("PortXmitWait", 32),
)
COUNTER_NAMES = tuple(name for name, _bits in FIELDS)
# Traffic per read (lab values): data counters count octets / 4, as perfquery(8) notes.
_TRAFFIC = {"PortXmitData": 262144, "PortRcvData": 262144, "PortXmitPkts": 1024, "PortRcvPkts": 1024}
CAP_MASK = 0x5A00  # lab value for a ConnectX PMA port (CapMask is printed as the real tool prints it)


def _line(name: str, value) -> str:
    # libibmad _mad_dump_field: name, ':', then dots up to column 32, then the value.
    return f"{name}:{'.' * max(32 - len(name), 0)}{value}"


def _state_path(hca: str, port: int) -> str:
    return os.path.join(run_dir(), f"perfquery-{hca}-{port}.json")


def _state(hca: str, port: int) -> dict:
    try:
        with open(_state_path(hca, port), encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {"reads": 0, "reset": False}


def _save(hca: str, port: int, state: dict) -> None:
    os.makedirs(run_dir(), exist_ok=True)
    with open(_state_path(hca, port), "w", encoding="utf-8") as handle:
        json.dump(state, handle)


def counters(hw: dict, hca: str, port: int, reads: int, reset: bool = False) -> dict:
    """Counter values at the given read number (0 = first read) for one port, faults applied."""
    values = {name: 0 for name in COUNTER_NAMES}
    for name, step in _TRAFFIC.items():
        values[name] = step * (reads + 1)
    for fault in faults_of(hw, "ib_link_flap"):
        if fault.get("hca") == hca and int(fault.get("port", 1)) == port and not reset:
            values["LinkDownedCounter"] += int(fault.get("count", 1))
            values["LinkErrorRecoveryCounter"] += int(fault.get("count", 1))
    for fault in faults_of(hw, "ib_port_errors"):
        if fault.get("hca") != hca or int(fault.get("port", 1)) != port:
            continue
        if not reset:
            for name, value in (fault.get("initial") or {}).items():
                values[name] += int(value)
        for name, growth in (fault.get("counters") or {}).items():
            values[name] += int(growth) * reads
    bits = dict(FIELDS)
    return {name: min(value, (1 << bits[name]) - 1) for name, value in values.items()}


def _fail(message: str) -> int:
    pid = ib_ports.pid()
    sys.stderr.write(f"ibwarn: [{pid}] main: {message}\nibpanic: [{pid}] main: perfquery failed\n")
    return 255


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="perfquery", add_help=True)
    parser.add_argument("-C", "--Ca", dest="ca")
    parser.add_argument("-P", "--Port", dest="ca_port", type=int)
    parser.add_argument("-r", "--reset_after_read", action="store_true")
    parser.add_argument("-R", "--Reset_only", action="store_true")
    parser.add_argument("target", nargs="*")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    hw = ib_ports.load()
    hcas = ib_ports.sorted_by_name(ib_ports.ports_view(hw))
    number = args.ca_port or (int(args.target[1], 0) if len(args.target) > 1 else 1)
    hca, port = ib_ports.find_port(hcas, args.ca, number)
    if hca is None:
        return _fail(f"can't open UMAD port ({args.ca or 'first CA'}:{number})")
    if port is None or port["link_layer"] != "InfiniBand" or port["state"] != "Active" or not port["lid"]:
        return _fail(f"can't resolve self port {hca['name']}:{number} (not an Active InfiniBand port)")
    state = _state(hca["name"], number)
    if args.Reset_only:
        _save(hca["name"], number, {"reads": 0, "reset": True})
        return 0
    values = counters(hw, hca["name"], number, state["reads"], state.get("reset", False))
    if args.reset_after_read:
        _save(hca["name"], number, {"reads": 0, "reset": True})
    else:
        _save(hca["name"], number, {"reads": state["reads"] + 1, "reset": state.get("reset", False)})
    lid = int(args.target[0], 0) if args.target else port["lid"]
    lines = [f"# Port counters: Lid {lid} port {number} (CapMask: 0x{CAP_MASK:04X})", _line("PortSelect", number)]
    lines.append(_line("CounterSelect", "0x0000"))
    lines.extend(_line(name, values[name]) for name in COUNTER_NAMES)
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
