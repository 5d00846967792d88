"""Build the lab node image once: debootstrap Debian 12 + the lab overlay, then `podman import`.

The image tag carries a hash of everything that goes into it, so a rebuild happens
only when the package list or the overlay changes.
"""

from __future__ import annotations

import fnmatch
import hashlib
import shutil
import subprocess
from pathlib import Path

from gpuforge.lab.debian_subset import DEBIAN_MIRROR, REPO_PATH
from gpuforge.lab.mirror import MIRROR_URL
from gpuforge.lab.podman import PodmanError, exists, podman
from gpuforge.paths import LAB_DIR, LAB_STATE_DIR

IMAGE_DIR = LAB_DIR / "image"
IMAGE_REPO = "localhost/gpuforge-lab-node"
SUITE = "bookworm"
BUILDER_REVISION = "5"  # bump when the build steps below change
# Nodes take Debian packages from the lab mirror (internal network), trusting this lab's archive key.
LAB_KEYRING = "/usr/share/keyrings/gpuforge-lab-archive-keyring.asc"
LAB_TOOLS_PATH = "gpuforge-lab/tools"
# systemd units that cannot work in a container (no kernel modules, no consoles) or slow the boot.
MASKED_UNITS = [
    "systemd-modules-load.service",
    "getty.target",
    "console-getty.service",
    "systemd-udevd.service",
    "systemd-udev-trigger.service",
    "systemd-networkd-wait-online.service",
]


def package_list() -> list[str]:
    lines = (IMAGE_DIR / "packages.txt").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


# Python's bytecode caches are not part of the overlay: a test that imports the overlay's simulator modules (the
# unit suite on the newest ansible-core's Python writes __pycache__/*.cpython-313.pyc there) must not change the
# image's hash. It did: every make test rebuilt the image and its OS-shape layers in the smoke test, an hour in.
BYTECODE_PATTERNS = ("__pycache__", "*.pyc")


def overlay_files() -> list[Path]:
    """The overlay's files that go into the image: what _customize copies, by the same BYTECODE_PATTERNS, which
    shutil.ignore_patterns matches against each name in the tree."""
    overlay = IMAGE_DIR / "overlay"
    return [
        path
        for path in sorted(overlay.rglob("*"))
        if path.is_file()
        and not any(
            fnmatch.fnmatch(part, pattern) for part in path.relative_to(overlay).parts for pattern in BYTECODE_PATTERNS
        )
    ]


def content_hash(key: bytes) -> str:
    digest = hashlib.sha256()
    digest.update(f"{BUILDER_REVISION}\n{SUITE}\n".encode())
    digest.update(key)
    digest.update("\n".join(package_list()).encode())
    for path in overlay_files():
        digest.update(str(path.relative_to(IMAGE_DIR)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def image_tag(key: bytes) -> str:
    return f"{IMAGE_REPO}:{content_hash(key)}"


def _source(path: str) -> str:
    return f"Types: deb\nURIs: {MIRROR_URL}/{path}/\nSuites: /\nSigned-By: {LAB_KEYRING}\n"


def debian_sources() -> str:
    """The Debian archive as a stock Debian 12 host lists it: one suite, component main only (a role that needs
    contrib must enable it, as NVIDIA's Debian instructions do)."""
    return f"Types: deb\nURIs: {MIRROR_URL}/{REPO_PATH}/\nSuites: {SUITE}\nComponents: main\nSigned-By: {LAB_KEYRING}\n"


def lab_tools_sources() -> str:
    """The simulator library is part of the simulated hardware, so every node has its source from the start."""
    return _source(LAB_TOOLS_PATH)


def _customize(rootfs: Path, key: bytes) -> None:
    leave_out = shutil.ignore_patterns(*BYTECODE_PATTERNS)
    shutil.copytree(IMAGE_DIR / "overlay", rootfs, dirs_exist_ok=True, symlinks=True, ignore=leave_out)
    (rootfs / "etc/apt/sources.list").unlink(missing_ok=True)
    (rootfs / LAB_KEYRING.lstrip("/")).write_bytes(key)
    (rootfs / "etc/apt/sources.list.d/debian.sources").write_text(debian_sources(), encoding="utf-8")
    # Same file name as the lab_mirror scenario's deb822_repository, so that one replaces, never duplicates, it.
    (rootfs / "etc/apt/sources.list.d/gpuforge-lab-tools.sources").write_text(lab_tools_sources(), encoding="utf-8")
    systemd = rootfs / "etc/systemd/system"
    for unit in MASKED_UNITS:
        link = systemd / unit
        link.unlink(missing_ok=True)
        link.symlink_to("/dev/null")
    wants = systemd / "sysinit.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    boot_link = wants / "gpuforge-lab-boot.service"
    boot_link.unlink(missing_ok=True)
    boot_link.symlink_to("/etc/systemd/system/gpuforge-lab-boot.service")
    (rootfs / "etc/machine-id").write_text("", encoding="utf-8")
    # openssh-server's postinst generated host keys in the build: every node would share them. Each node gets
    # its own from `gpuforge lab up` (gpuforge.lab.ssh), mounted where the overlay's sshd drop-in looks.
    for key in (rootfs / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    # No recommends by default, as on a minimal server install; keeps lab installs fast.
    (rootfs / "etc/apt/apt.conf.d/90gpuforge-lab").write_text(
        'APT::Install-Recommends "false";\nAcquire::Retries "3";\n', encoding="utf-8"
    )
    shutil.rmtree(rootfs / "var/lib/apt/lists", ignore_errors=True)
    (rootfs / "var/lib/apt/lists/partial").mkdir(parents=True, exist_ok=True)


def _unmount(rootfs: Path) -> None:
    """Unmount what debootstrap left mounted in rootfs: a failed run, and sometimes a successful one, leaves
    /proc mounted there, which the image's tar would otherwise try to archive."""
    with open("/proc/mounts", encoding="utf-8") as handle:
        mounts = [line.split()[1] for line in handle if line.split()[1].startswith(str(rootfs) + "/")]
    for mountpoint in sorted(mounts, reverse=True):
        subprocess.run(["umount", "-l", mountpoint], check=False)


def _release(rootfs: Path) -> None:
    """Remove a previous build, first unmounting what a failed debootstrap may have left mounted in it."""
    _unmount(rootfs)
    shutil.rmtree(rootfs, ignore_errors=True)


def build(key: bytes, force: bool = False, log=print) -> str:
    """Return the tag of the lab node image that trusts archive `key`, building it only if missing."""
    tag = image_tag(key)
    if exists("image", tag) and not force:
        return tag
    if shutil.which("debootstrap") is None:
        raise PodmanError("debootstrap is not installed: run 'make setup' (as root)")
    build_dir = LAB_STATE_DIR / "build"
    rootfs = build_dir / "rootfs"
    _release(rootfs)
    rootfs.mkdir(parents=True)
    log(f"lab: building image {tag} with debootstrap (a few minutes, once)")
    command = [
        "debootstrap",
        "--variant=minbase",
        f"--include={','.join(package_list())}",
        SUITE,
        str(rootfs),
        DEBIAN_MIRROR,
    ]
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-8:])
        raise PodmanError(f"debootstrap failed ({proc.returncode}); is {DEBIAN_MIRROR} reachable?\n{tail}")
    _unmount(rootfs)
    _customize(rootfs, key)
    archive = build_dir / "rootfs.tar"
    # --one-file-system: nothing mounted inside rootfs (a leftover /proc) belongs in the image.
    subprocess.run(
        ["tar", "-C", str(rootfs), "--numeric-owner", "--one-file-system", "-cf", str(archive), "."], check=True
    )
    podman(
        "import",
        "--change",
        'CMD ["/sbin/init"]',
        "--change",
        "ENV container=podman",
        "--change",
        "STOPSIGNAL SIGRTMIN+3",
        str(archive),
        tag,
    )
    _release(rootfs)
    archive.unlink(missing_ok=True)
    return tag
