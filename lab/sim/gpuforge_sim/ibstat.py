"""Simulated `ibstat` (infiniband-diags): `ibstat [-l] [-s] [-p] [CA [port]]`.

Prints the layout of the real binary: `CA '<name>'`, tab-indented CA fields, `\\tPort N:` and
double-tab port fields; `ibstat CA PORT` prints `CA: '<name>'` and the port unindented.
CAs are listed in directory order. Like the real tool, a CA argument matches the first CA whose
name is a prefix of it, and failures end in an `ibpanic: [pid] main: ...` line and exit 255.
"""

from __future__ import annotations

import argparse
import sys

from gpuforge_sim import ib_ports, sminfo


def _panic(message: str) -> int:
    sys.stderr.write(f"ibpanic: [{ib_ports.pid()}] main: {message}\n")
    return 255


def _port_lines(port: dict, indent: str) -> list[str]:
    rate = ib_ports.format_rate(port["rate_gbit_per_s"])
    return [
        f"{indent}State: {port['state']}",
        f"{indent}Physical state: {port['phys_state']}",
        f"{indent}Rate: {rate}",
        f"{indent}Base lid: {port['lid']}",
        f"{indent}LMC: {port['lmc']}",
        f"{indent}SM lid: {port['sm_lid']}",
        f"{indent}Capability mask: 0x{port['capability_mask']:08x}",
        f"{indent}Port GUID: 0x{port['port_guid']:016x}",
        f"{indent}Link layer: {port['link_layer']}",
    ]


def _ca_lines(hca: dict, short: bool) -> list[str]:
    hw_ver = int(str(hca.get("hw_ver", "0")), 0)
    lines = [
        f"CA '{hca['name']}'",
        f"\tCA type: {hca.get('ca_type', '')}",
        f"\tNumber of ports: {len(hca['ports'])}",
        f"\tFirmware version: {hca.get('fw_ver', '')}",
        f"\tHardware version: {hw_ver:x}",
        f"\tNode GUID: 0x{hca['node_guid_int']:016x}",
        f"\tSystem image GUID: 0x{hca['sys_image_guid_int']:016x}",
    ]
    if not short:
        for port in hca["ports"]:
            lines.append(f"\tPort {port['port']}:")
            lines.extend(_port_lines(port, "\t\t"))
    return lines


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ibstat", add_help=True)
    parser.add_argument("-l", "--list_of_cas", action="store_true")
    parser.add_argument("-s", "--short", action="store_true")
    parser.add_argument("-p", "--port_list", action="store_true")
    parser.add_argument("ca_name", nargs="?")
    parser.add_argument("portnum", nargs="?")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    hw = ib_ports.load()
    hcas = ib_ports.sorted_by_name(ib_ports.ports_view(hw))
    # The SM lid sminfo asks (the elected master's, a split subnet's second master's): one subnet manager view.
    sms = None
    for port in (port for hca in hcas for port in hca["ports"]):
        if port["link_layer"] == "InfiniBand" and port["state"] == "Active":
            sms = sminfo.fabric(hw) if sms is None else sms
            port["sm_lid"] = sminfo.port_sm_lid(hw, port, sms)
    if args.ca_name:
        # ibstat compares only strlen(ca_name) characters: 'mlx5_10' selects mlx5_1 if listed first.
        chosen = [h for h in hcas if args.ca_name.startswith(h["name"])][:1]
        if not chosen:
            return _panic(f"'{args.ca_name}' IB device can't be found")
        hcas = chosen
    out: list[str] = []
    if args.port_list:
        out = [f"0x{p['port_guid']:016x}" for h in hcas for p in h["ports"] if p["port_guid"]]
    elif args.list_of_cas:
        out = [h["name"] for h in hcas]
    elif args.portnum is not None:
        hca = hcas[0]
        number = int(args.portnum, 0)
        port = next((p for p in hca["ports"] if p["port"] == number), None)
        if port is None:
            sys.stdout.write(
                f"ibwarn: [{ib_ports.pid()}] ca_stat: CA: '{hca['name']}' has no port number {number}"
                f" - max ({len(hca['ports'])})\n"
            )
            return _panic(f"stat of IB device '{hca['name']}' failed")
        out = [f"CA: '{hca['name']}'", f"Port {number}:", *_port_lines(port, "")]
    else:
        for hca in hcas:
            out.extend(_ca_lines(hca, args.short))
    if out:
        sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
