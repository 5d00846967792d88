#!/usr/bin/python3
"""A job that leaves a process on a GPU: the lab's nvidia-smi lists it from now on, holding its memory (lab fault
gpu_process_left, lab/profiles/SCHEMA.md), as a process that escaped the job's cleanup would show.
Usage: leave_gpu_process.py <gpu index> <pid> <name>."""

import json
import sys

PATH = "/etc/gpuforge-lab/hardware.json"
with open(PATH, encoding="utf-8") as handle:
    hardware = json.load(handle)
fault = {"type": "gpu_process_left", "gpu": int(sys.argv[1]), "pid": int(sys.argv[2]), "name": sys.argv[3]}
hardware["faults"] = [*hardware.get("faults", []), fault]
with open(PATH, "w", encoding="utf-8") as handle:
    json.dump(hardware, handle, indent=1)
print(json.dumps(fault))
