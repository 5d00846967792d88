"""The lab's stand-in for a site's NVIDIA vGPU guest driver package (docs/lab.md, "vGPU guest driver stand-in").

NVIDIA publishes the guest driver only to licensed customers, so a site serves the .deb/.rpm of its guest driver
bundle from its own web server and pins each file's sha256 (roles/vgpu_guest). The lab does the same: this module
builds a LAB STAND-IN of that package, with the real package's name and file names
(nvidia-linux-grid-<branch>_<release>_amd64.deb, nvidia-linux-grid-<branch>-<release>-1.x86_64.rpm) but a simulated
payload - the simulated nvidia-smi, a simulated nvidia-gridd (gpuforge_sim.nvidia_gridd) with its systemd unit, and
the driver's simulated kernel module marker - and publishes both files as plain downloads in DIRECTORY of the mirror
with a SHA256SUMS (sha256sum(1) format) of the lab's own builds: molecule/vgpu_guest reads the digests from it the way
a site copies them into its inventory. Not an apt or dnf repository: the role downloads the file, not a package name.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

# Where the files lie under the mirror root (http://mirror/<DIRECTORY>/).
DIRECTORY = "site/nvidia-vgpu-guest"
BRANCH = "535"
RELEASE = "535.161.08"  # NVIDIA vGPU software 16.5's Linux guest driver release (the role's README example)
CUDA_VERSION = "12.2"  # what a 535 driver reports (the lab's nvidia-driver.json convention)

NVIDIA_GRIDD_UNIT = """[Unit]
Description=NVIDIA Grid Daemon (gpuforge lab stand-in, docs/lab.md)
Wants=network-online.target
After=network-online.target

[Service]
# The stand-in daemon stays in the foreground; it returns the licence (removes its state) when stopped.
Type=simple
ExecStart=/usr/bin/nvidia-gridd

[Install]
WantedBy=multi-user.target
"""


def package() -> dict:
    """The stand-in package in the mirror's package-dict shape (mirror.build_deb, rpm_repo.build_rpm)."""
    return {
        "name": f"nvidia-linux-grid-{BRANCH}",
        "version": RELEASE,
        "depends": ["gpuforge-lab-sim"],
        "description": (
            f"NVIDIA vGPU guest driver {RELEASE} (gpuforge LAB STAND-IN - simulated nvidia-smi and nvidia-gridd)"
        ),
        "commands": {
            "/usr/bin/nvidia-smi": "gpuforge_sim.nvidia_smi",
            "/usr/bin/nvidia-gridd": "gpuforge_sim.nvidia_gridd",
        },
        "files": {
            "/usr/lib/gpuforge-lab/nvidia-driver.json": json.dumps(
                {"driver_version": RELEASE, "cuda_version": CUDA_VERSION}
            ),
            # The simulated nvidia-smi takes the licence from nvidia-gridd's lease where this file is installed.
            "/usr/lib/gpuforge-lab/vgpu-guest-driver.json": json.dumps({"release": RELEASE, "licence_from": "gridd"}),
        },
        # The guest driver's kernel module (the simulated nvidia-smi loads it as the real one asks nvidia-modprobe).
        "modules": {"nvidia": {"size": 56823808, "depends": []}},
        "units": {"nvidia-gridd.service": NVIDIA_GRIDD_UNIT},
    }


def inputs_hash() -> str:
    """What the stand-in is built from (this module; the simulators are hashed by the mirror)."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def publish(mirror_root: Path, staging_root: Path, log=print) -> dict[str, str]:
    """Build the .deb (dpkg-deb) and the .rpm (Debian's rpmbuild), write SHA256SUMS and swap the directory into the
    served mirror; returns {file name: sha256}."""
    from gpuforge.lab import mirror, rpm_repo  # rpm_repo imports mirror, which imports this module

    spec = package()
    next_dir = staging_root / "vgpu-guest-next"
    shutil.rmtree(next_dir, ignore_errors=True)
    next_dir.mkdir(parents=True)
    built = [mirror.build_deb(spec, staging_root / "vgpu-guest-deb", next_dir)]
    missing = rpm_repo.tools_available()
    if missing:
        log(f"lab: vGPU guest stand-in without its .rpm ({', '.join(missing)} missing)")
    else:
        built.append(rpm_repo.build_rpm(spec, staging_root / "vgpu-guest-rpm", next_dir))
    sums = {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in built}
    (next_dir / "SHA256SUMS").write_text(
        "".join(f"{digest}  {name}\n" for name, digest in sorted(sums.items())), encoding="utf-8"
    )
    mirror._swap(next_dir, mirror_root / DIRECTORY)
    log(f"lab: vGPU guest driver stand-in published in {DIRECTORY}: {', '.join(sorted(sums))}")
    return sums
