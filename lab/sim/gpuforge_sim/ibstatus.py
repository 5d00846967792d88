"""Simulated `ibstatus` (infiniband-diags script): `ibstatus [-h] [devname[:port]]...`.

The real tool is a shell script that echoes sysfs files, so each line is `\\t<label>:\\t` (or
`\\t\\t`), a space from echo's argument join, then the sysfs value; every port block ends with a
blank line. With no argument it lists every CA in directory order.
"""

from __future__ import annotations

import sys

from gpuforge_sim import ib_ports


def _usage() -> int:
    sys.stdout.write(
        "Usage:  ibstatus  [-h] [devname[:portnum]]\n"
        "\t-h:\tthis help screen\n"
        "\tExamples:\n"
        "\t\tibstatus mthca1\t\t# shows status of all ports of 'mthca1'\n"
        "\t\tibstatus mthca0:2\t# shows status port number 2 of 'mthca0'\n"
        "\t\tibstatus\t\t# default: shows status of all 'mthca0' ports\n"
    )
    return 255


def _port_block(ca: str, number: str, port: dict | None) -> list[str]:
    def value(key: str) -> str:
        # The script prints "unknown" for a sysfs file it cannot read (a port that does not exist).
        if port is None:
            return "IB" if key == "link_layer" else "unknown"
        return {
            "gid": ib_ports.gid0(port),
            "lid": f"0x{port['lid']:x}",
            "sm_lid": f"0x{port['sm_lid']:x}",
            "state": f"{port['state_code']}: {ib_ports.SYSFS_STATE[port['state']]}",
            "phys": f"{port['phys_state_code']}: {ib_ports.sysfs_phys(port)}",
            "rate": ib_ports.sysfs_rate(port),
            "link_layer": port["link_layer"],
        }[key]

    return [
        f"Infiniband device '{ca}' port {number} status:",
        f"\tdefault gid:\t {value('gid')}",
        f"\tbase lid:\t {value('lid')}",
        f"\tsm lid:\t\t {value('sm_lid')}",
        f"\tstate:\t\t {value('state')}",
        f"\tphys state:\t {value('phys')}",
        f"\trate:\t\t {value('rate')}",
        f"\tlink_layer:\t {value('link_layer')}",
        "",
    ]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "-h":
        return _usage()
    hcas = {h["name"]: h for h in ib_ports.ports_view(ib_ports.load())}
    out: list[str] = []
    if not args:
        if not hcas:
            sys.stdout.write("Fatal error:  No devices\n")
            return 255
        for name in sorted(hcas):
            for port in hcas[name]["ports"]:
                out.extend(_port_block(name, str(port["port"]), port))
    for arg in args:
        device, _sep, number = arg.partition(":")
        hca = hcas.get(device)
        if hca is None:
            sys.stdout.write("\n".join(out) + ("\n" if out else ""))
            ports_dir = f"/sys/class/infiniband/{device}/ports"
            sys.stdout.write(f"Fatal error:  device '{device}': sys files not found ({ports_dir})\n")
            return 255
        if number:
            port = next((p for p in hca["ports"] if str(p["port"]) == number), None)
            out.extend(_port_block(device, number, port))
        else:
            for port in hca["ports"]:
                out.extend(_port_block(device, str(port["port"]), port))
    sys.stdout.write("\n".join(out) + ("\n" if out else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
