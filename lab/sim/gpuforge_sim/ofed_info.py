"""Simulated `ofed_info` (MLNX_OFED / DOCA-OFED 2.9.1 user space = MLNX_OFED 24.10-1.1.4.0).

`ofed_info -s` prints the one-line release tag (`MLNX_OFED_LINUX-24.10-1.1.4.0:`), `-n` the bare
version; plain `ofed_info` prints the release, the component source packages and the installed
OFED packages as the real script does on Debian (`dpkg -l` lines).
"""

from __future__ import annotations

import subprocess
import sys

VERSION = "24.10-1.1.4.0"
RELEASE = f"MLNX_OFED_LINUX-{VERSION}"
# Components of the 24.10-1.1.4.0 release and their source packages (as `ofed_info` lists them).
COMPONENTS = [
    ("mlnx-ofed-kernel", "mlnx-ofed-kernel-24.10.OFED.24.10.1.1.4.1.src.rpm"),
    ("rdma-core", "rdma-core-2410mlnx54-1.2410068.src.rpm"),
    ("opensm", "opensm-5.21.0.MLNX20241126.dc7c2998-0.1.2410068.src.rpm"),
    ("perftest", "perftest-24.10.0-0.65.g9093bae.2410068.src.rpm"),
]
PACKAGES = [
    "mlnx-ofed-kernel-dkms",
    "mlnx-ofed-kernel-utils",
    "rdma-core",
    "ibverbs-utils",
    "infiniband-diags",
    "perftest",
    "opensm",
    "mlnx-ofed-all",
    "doca-ofed",
]


def installed_packages() -> list[str]:
    """`dpkg -l`-style lines of the OFED packages that are installed (empty off Debian)."""
    try:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f", "${db:Status-Abbrev} ${Package} ${Version} ${Architecture}\n", *PACKAGES],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
    except OSError:
        return []
    lines = []
    for raw in out.splitlines():
        fields = raw.split()
        if len(fields) == 4 and fields[0] == "ii":
            lines.append(f"ii  {fields[1]:<30} {fields[2]:<40} {fields[3]}")
    return lines


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "-s" in args:
        print(f"{RELEASE}:")
        return 0
    if "-n" in args:
        print(VERSION)
        return 0
    if args and args[0] not in ("-l", "-a"):
        print(f"Usage: ofed_info [-s|-n|-l|-a] (unknown option {args[0]})", file=sys.stderr)
        return 1
    out = [f"{RELEASE} (OFED-{VERSION.rsplit('.', 1)[0]}):", ""]
    for name, source in COMPONENTS:
        out += [f"{name}:", f"mlnx_ofed_{name}/{source}", ""]
    out += ["Installed Packages:", "-------------------", *installed_packages()]
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
