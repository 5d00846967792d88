"""Simulated `ibdev2netdev` (MLNX_OFED script): `ibdev2netdev [-v]`.

One line per RDMA port that has a network device: `mlx5_0 port 1 ==> ib0 (Up)`. The netdev is
Up when it has carrier: an IPoIB interface once its port is Active, a RoCE interface once its
port is physically LinkUp. `-v` adds the PCI address, device id, firmware and port state; the lab
has no PCI VPD, so the part number prints as `NA` and the description is empty, as the script
does on a host without a readable VPD.
"""

from __future__ import annotations

import sys

from gpuforge_sim import ib_ports


def netdev_state(port: dict) -> str:
    if port["link_layer"] == "Ethernet":
        return "Up" if port["phys_state"] == "LinkUp" else "Down"
    return "Up" if port["state"] == "Active" else "Down"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    verbose = "-v" in args or "--verbose" in args
    out = []
    for hca in ib_ports.sorted_by_name(ib_ports.ports_view(ib_ports.load())):
        for port in hca["ports"]:
            if not port.get("netdev"):
                continue
            link = netdev_state(port)
            if verbose:
                state = f"{ib_ports.SYSFS_STATE[port['state']]:<6}"
                out.append(
                    f"{hca.get('bus_id', 'NA')} {hca['name']} (MT{hca.get('vendor_part_id', 0)} - NA) "
                    f" fw {hca.get('fw_ver', 'NA')} port {port['port']} ({state}) "
                    f"==> {port['netdev']} ({link})"
                )
            else:
                out.append(f"{hca['name']} port {port['port']} ==> {port['netdev']} ({link})")
    if out:
        sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
