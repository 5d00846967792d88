"""Simulated nvidia-modprobe: load the NVIDIA kernel modules (recorded in the lab's module list).

nvidia-modprobe            load nvidia
nvidia-modprobe -u         also load nvidia_uvm
nvidia-modprobe -c N       also create /dev/nvidiaN (a no-op here; the lab has no device nodes)
"""

from __future__ import annotations

import sys

from gpuforge_sim import driver_state


def main(argv: list[str] | None = None, out=None, err=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    err = err or sys.stderr
    wanted = ["nvidia"]
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-u", "--unified-memory"):
            wanted.append("nvidia_uvm")
        elif arg in ("-c", "--create-nvidia-device-file"):
            i += 1
            if i >= len(argv) or not argv[i].isdigit():
                err.write("nvidia-modprobe: option -c needs a device minor number\n")
                return 1
        elif arg.startswith("-c") and arg[2:].isdigit():
            pass
        elif arg in ("-m", "--modeset"):
            wanted.append("nvidia_modeset")
        else:
            err.write(f'nvidia-modprobe: unrecognized option: "{arg}"\n')
            return 1
        i += 1
    for module in wanted:
        if not driver_state.load_module(module):
            # Real nvidia-modprobe exits non-zero silently when modprobe fails.
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
