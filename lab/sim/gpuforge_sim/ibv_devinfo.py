"""Simulated `ibv_devinfo` (rdma-core): `ibv_devinfo [-d dev] [-i port] [-l] [-v]`.

Tab layout as the real tool prints it. `-v` adds the per-port verbose attributes (width, speed,
physical state, GIDs, ...); the device-wide verbose attributes (max_qp, odp caps, ...) are not
simulated. Devices are listed in the hardware document's order.
"""

from __future__ import annotations

import argparse
import sys

from gpuforge_sim import ib_ports

_MTU_CODES = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}
_WIDTH_CODES = {"1X": 1, "2X": 16, "4X": 2, "8X": 4, "12X": 8}
_SPEED_CODES = {
    "SDR": ("2.5 Gbps", 1),
    "DDR": ("5.0 Gbps", 2),
    "QDR": ("10.0 Gbps", 4),
    "FDR10": ("10.0 Gbps", 8),
    "FDR": ("14.0 Gbps", 16),
    "EDR": ("25.0 Gbps", 32),
    "HDR": ("50.0 Gbps", 64),
    "NDR": ("100.0 Gbps", 128),
    "XDR": ("200.0 Gbps", 256),
}
_PORT_STATES = {
    "Down": "PORT_DOWN",
    "Initializing": "PORT_INIT",
    "Armed": "PORT_ARMED",
    "Active": "PORT_ACTIVE",
}
_PHYS_STATES = {
    "Sleep": "SLEEP",
    "Polling": "POLLING",
    "Disabled": "DISABLED",
    "PortConfigurationTraining": "PORT_CONFIGURATION TRAINNING",
    "LinkUp": "LINK_UP",
    "LinkErrorRecovery": "LINK_ERROR_RECOVERY",
    "PhyTest": "PHY TEST",
}


def _guid(value: int) -> str:
    digits = f"{value:016x}"
    return ":".join(digits[i : i + 4] for i in range(0, 16, 4))


def _active_mtu(port: dict) -> int:
    # A RoCE port without link reports the 1024 default (real ibv_devinfo of a PORT_DOWN CX-6 Dx).
    if port["link_layer"] == "Ethernet" and port["phys_state"] != "LinkUp":
        return 1024
    return port["mtu"] if port["mtu"] in _MTU_CODES else 4096


def _verbose_port(port: dict) -> list[str]:
    ethernet = port["link_layer"] == "Ethernet"
    speed_text, speed_code = _SPEED_CODES.get(port["speed"], ("invalid speed", 0))
    lines = [
        "\t\t\tmax_msg_sz:\t\t0x40000000",
        f"\t\t\tport_cap_flags:\t\t0x{port['capability_mask']:08x}",
        "\t\t\tport_cap_flags2:\t0x0000",
        "\t\t\tmax_vl_num:\t\tinvalid value (0)" if ethernet else "\t\t\tmax_vl_num:\t\t4 (3)",
        "\t\t\tbad_pkey_cntr:\t\t0x0",
        "\t\t\tqkey_viol_cntr:\t\t0x0",
        "\t\t\tsm_sl:\t\t\t0",
        f"\t\t\tpkey_tbl_len:\t\t{1 if ethernet else 128}",
        f"\t\t\tgid_tbl_len:\t\t{256 if ethernet else 8}",
        f"\t\t\tsubnet_timeout:\t\t{0 if ethernet else 18}",
        "\t\t\tinit_type_reply:\t0",
        f"\t\t\tactive_width:\t\t{port['width']} ({_WIDTH_CODES.get(port['width'], 0)})",
        f"\t\t\tactive_speed:\t\t{speed_text} ({speed_code})",
        f"\t\t\tphys_state:\t\t{_PHYS_STATES[port['phys_state']]} ({port['phys_state_code']})",
    ]
    if port["port_guid"]:
        gid = ib_ports.gid0(port)
        lines.append(f"\t\t\tGID[  0]:\t\t{gid}")
        if ethernet:  # RoCE lists the link-local GID once per RoCE version (v1, v2)
            lines.append(f"\t\t\tGID[  1]:\t\t{gid}")
    return lines


def _hca_lines(hca: dict, port_filter: int, verbose: bool) -> list[str]:
    lines = [
        f"hca_id:\t{hca['name']}",
        "\ttransport:\t\t\tInfiniBand (0)",
        f"\tfw_ver:\t\t\t\t{hca.get('fw_ver', '')}",
        f"\tnode_guid:\t\t\t{_guid(hca['node_guid_int'])}",
        f"\tsys_image_guid:\t\t\t{_guid(hca['sys_image_guid_int'])}",
        "\tvendor_id:\t\t\t0x02c9",
        f"\tvendor_part_id:\t\t\t{int(hca.get('vendor_part_id', 0))}",
        f"\thw_ver:\t\t\t\t0x{int(str(hca.get('hw_ver', '0')), 0):X}",
    ]
    if hca.get("board_id"):
        lines.append(f"\tboard_id:\t\t\t{hca['board_id']}")
    lines.append(f"\tphys_port_cnt:\t\t\t{len(hca['ports'])}")
    for port in hca["ports"]:
        if port_filter and port["port"] != port_filter:
            continue
        mtu = _active_mtu(port)
        lines += [
            f"\t\tport:\t{port['port']}",
            f"\t\t\tstate:\t\t\t{_PORT_STATES[port['state']]} ({port['state_code']})",
            "\t\t\tmax_mtu:\t\t4096 (5)",
            f"\t\t\tactive_mtu:\t\t{mtu} ({_MTU_CODES[mtu]})",
            f"\t\t\tsm_lid:\t\t\t{port['sm_lid']}",
            f"\t\t\tport_lid:\t\t{port['lid']}",
            f"\t\t\tport_lmc:\t\t0x{port['lmc']:02x}",
            f"\t\t\tlink_layer:\t\t{port['link_layer']}",
        ]
        if verbose:
            lines += _verbose_port(port)
        lines.append("")
    return lines


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ibv_devinfo")
    parser.add_argument("-d", "--ib-dev")
    parser.add_argument("-i", "--ib-port", type=lambda v: int(v, 0), default=0)
    parser.add_argument("-l", "--list", action="store_true")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    hcas = ib_ports.ports_view(ib_ports.load())
    if args.list:
        names = "".join(f"\t{h['name']}\n" for h in hcas)
        sys.stdout.write(f"{len(hcas)} HCA{'' if len(hcas) == 1 else 's'} found:\n{names}\n")
        return 0
    if args.ib_dev:
        hcas = [h for h in hcas if h["name"] == args.ib_dev]
        if not hcas:
            sys.stderr.write(f"IB device '{args.ib_dev}' wasn't found\n")
            return 255
    elif not hcas:
        sys.stderr.write("No IB devices found\n")
        return 255
    rc = 0
    out: list[str] = []
    for hca in hcas:
        if args.ib_port and args.ib_port > len(hca["ports"]):
            sys.stdout.write("\n".join(out) + ("\n" if out else ""))
            out = []
            sys.stderr.write("Invalid port requested for device\n")
            rc |= 4
            continue
        out += _hca_lines(hca, args.ib_port, args.verbose)
    sys.stdout.write("\n".join(out) + ("\n" if out else ""))
    return rc


if __name__ == "__main__":
    sys.exit(main())
