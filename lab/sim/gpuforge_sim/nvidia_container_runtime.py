"""Simulated nvidia-container-runtime (NVIDIA Container Toolkit 1.17.8): an honest stand-in.

The real binary is a runc shim: it adds the NVIDIA prestart hook (or CDI edits) to a GPU container's
OCI spec and execs runc. The lab has no GPU to hand to a container, so this stand-in answers
`--version` like the real one and otherwise prints what it would do and exits non-zero: a runtime
that reported success without doing anything would hide a misconfiguration.
"""

from __future__ import annotations

import sys

VERSION = "1.17.8"


def main(argv: list[str] | None = None, out=None, err=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    out = out or sys.stdout
    err = err or sys.stderr
    if "--version" in argv or "-v" in argv:
        out.write(f"NVIDIA Container Runtime version {VERSION}\n")
        out.write("commit: 0000000000000000000000000000000000000000\nspec: 1.2.0\n")
        return 0
    err.write(
        "gpuforge lab: nvidia-container-runtime would add the NVIDIA prestart hook "
        "(/usr/bin/nvidia-container-runtime-hook prestart) to the OCI spec and exec runc with: "
        + " ".join(argv)
        + "\ngpuforge lab: no GPU in the lab; refusing to start GPU containers\n"
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
