#!/usr/bin/python3
"""The lab kernel logs an Xid now, as the NVIDIA driver does when a GPU faults (lab/profiles/SCHEMA.md `xid`: the
same line, from the lab kernel's own code). Usage: raise_xid.py <gpu index> <code> <message>."""

import sys

sys.path.insert(0, "/usr/local/lib/gpuforge-lab")
import simkernel

hardware = simkernel.load_hardware()
fault = {"type": "xid", "gpu": int(sys.argv[1]), "code": int(sys.argv[2]), "message": sys.argv[3]}
for line in simkernel._xid_lines({"gpu": hardware.get("gpu"), "faults": [fault]}):
    simkernel.kernel_log(line)
    print(line)
