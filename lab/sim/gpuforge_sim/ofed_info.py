"""Simulated `ofed_info` (ofed-scripts).

What it prints comes from <lib dir>/ofed_info.json, which the lab mirror generates from the vendor facts
registry for the repository the package was published in (vendor_facts/nvidia-doca/<os>.yml: facts
ofed_info_s, ofed_info_n, ofed_version): a DOCA-OFED install prints `OFED-internal-<version>:` for
`-s`, the tarball installer's build would print `MLNX_OFED_LINUX-<version>:`. `-n` prints the version;
plain `ofed_info` prints the release, the component source packages and the installed OFED packages as
the real script does on Debian (`dpkg -l` lines).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from gpuforge_sim.hardware import lib_dir


def release_data() -> dict | None:
    """{release_tag, version, ofed} of the installed ofed-scripts package (None, with a message, if absent)."""
    path = os.path.join(lib_dir(), "ofed_info.json")
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        sys.stderr.write(f"ofed_info: {path} is missing or unreadable (gpuforge lab: ofed-scripts not installed?)\n")
        return None


# Components of the 24.10-1.1.4.0 release and their source packages (as `ofed_info` lists them).
COMPONENTS = [
    ("mlnx-ofed-kernel", "mlnx-ofed-kernel-24.10.OFED.24.10.1.1.4.1.src.rpm"),
    ("rdma-core", "rdma-core-2410mlnx54-1.2410068.src.rpm"),
    ("opensm", "opensm-5.21.0.MLNX20241126.dc7c2998-0.1.2410068.src.rpm"),
    ("perftest", "perftest-24.10.0-0.65.g9093bae.2410068.src.rpm"),
]
PACKAGES = [
    "ofed-scripts",
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
    data = release_data()
    if data is None:
        return 1
    if "-s" in args:
        print(data["release_tag"])
        return 0
    if "-n" in args:
        print(data["version"])
        return 0
    if args and args[0] not in ("-l", "-a"):
        print(f"Usage: ofed_info [-s|-n|-l|-a] (unknown option {args[0]})", file=sys.stderr)
        return 1
    out = [f"{data['release_tag'].rstrip(':')} (OFED-{data['ofed'].rsplit('.', 1)[0]}):", ""]
    for name, source in COMPONENTS:
        out += [f"{name}:", f"mlnx_ofed_{name}/{source}", ""]
    out += ["Installed Packages:", "-------------------", *installed_packages()]
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
