"""The Debian packages lab nodes may install (lab/packages/debian.txt), with the dependencies the lab
image lacks, downloaded once on the control machine for the mirror's signed `debian/bookworm` repo.

Lab nodes sit on an internal network: they reach the mirror, never deb.debian.org. The host's apt
resolves the dependency closure against the image's own dpkg status (so nothing already in the image
is fetched) and verifies every file against the Debian archive signatures while downloading.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from gpuforge import vendor_facts
from gpuforge.lab.podman import podman
from gpuforge.paths import LAB_DIR, LAB_STATE_DIR

PACKAGE_LIST = LAB_DIR / "packages" / "debian.txt"
WORK_DIR = LAB_STATE_DIR / "debian"
# The lab's Debian archive: dists/bookworm/{main,contrib} like deb.debian.org (contrib: NVIDIA's debian12
# driver packages depend on Debian contrib packages, vendor_facts/debian-contrib/bookworm.yml).
REPO_PATH = "debian"
SUITE = "bookworm"
COMPONENTS = ("main", "contrib")
DEBIAN_MIRROR = os.environ.get("GPUFORGE_DEBIAN_MIRROR", "http://deb.debian.org/debian")
DEBIAN_SECURITY_MIRROR = os.environ.get("GPUFORGE_DEBIAN_SECURITY_MIRROR", "http://deb.debian.org/debian-security")
DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
REGISTRY_ARCHIVE = "debian-contrib/bookworm"


class DebianSubsetError(RuntimeError):
    """The Debian packages could not be resolved or downloaded; the message names the step and the fix."""


def package_list() -> list[str]:
    """lab/packages/debian.txt, plus the Debian archive packages the vendor registry says vendor packages need
    (vendor_facts/debian-contrib/bookworm.yml)."""
    lines = PACKAGE_LIST.read_text(encoding="utf-8").splitlines()
    listed = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    registry = sorted({package.name for package in vendor_facts.repository(REGISTRY_ARCHIVE).packages})
    return listed + [name for name in registry if name not in listed]


def inputs_hash(image_status: str) -> str:
    """What the download depends on: the image's installed packages (not its tag, so that an overlay-only
    image change costs no download), the mirrors and the list."""
    text = "\n".join([DEBIAN_MIRROR, DEBIAN_SECURITY_MIRROR, *package_list(), image_status])
    return hashlib.sha256(text.encode()).hexdigest()


def sources_list() -> str:
    signed = f"[signed-by={DEBIAN_KEYRING}]"
    return (
        f"deb {signed} {DEBIAN_MIRROR} bookworm bookworm-updates main contrib\n"
        f"deb {signed} {DEBIAN_SECURITY_MIRROR} bookworm-security main contrib\n"
    )


def apt_options(work: Path, status: Path) -> list[str]:
    """apt-get options that use only `work` for state and `status` as the installed-package database."""
    settings = {
        "Dir::State": work / "state",
        "Dir::State::status": status,
        "Dir::Cache": work / "cache",
        "Dir::Etc::SourceList": work / "sources.list",
        "Dir::Etc::SourceParts": work / "sources.list.d",
        "Dir::Etc::Preferences": work / "preferences",
        "Dir::Etc::PreferencesParts": work / "preferences.d",
        # The lab image installs without recommends (lab/image: 90gpuforge-lab), so resolve the same way.
        "APT::Install-Recommends": "false",
        "Debug::NoLocking": "true",
    }
    return [item for key, value in settings.items() for item in ("-o", f"{key}={value}")]


def _apt(work: Path, status: Path, *args: str) -> None:
    command = ["apt-get", "-q", *apt_options(work, status), *args]
    proc = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ, LC_ALL="C"), check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-8:])
        raise DebianSubsetError(
            f"apt-get {args[0]} for the lab's Debian packages failed ({proc.returncode}); is {DEBIAN_MIRROR} "
            f"reachable from this machine (or GPUFORGE_DEBIAN_MIRROR set to a reachable mirror)?\n{tail}"
        )


def download(image_tag: str, log=print) -> tuple[list[Path], str]:
    """The .deb files for lab/packages/debian.txt against image `image_tag`, and the inputs' hash; the download
    is cached until that hash changes."""
    archives = WORK_DIR / "cache" / "archives"
    stamp = WORK_DIR / ".inputs"
    image_status = podman("run", "--rm", "--network=none", image_tag, "cat", "/var/lib/dpkg/status")
    wanted = inputs_hash(image_status)
    if not (stamp.is_file() and stamp.read_text(encoding="utf-8") == wanted):
        log("lab: downloading the Debian packages lab nodes install (lab/packages/debian.txt)")
        shutil.rmtree(WORK_DIR, ignore_errors=True)
        for directory in ("state/lists/partial", "cache/archives/partial", "sources.list.d", "preferences.d"):
            (WORK_DIR / directory).mkdir(parents=True)
        (WORK_DIR / "sources.list").write_text(sources_list(), encoding="utf-8")
        (WORK_DIR / "preferences").write_text("", encoding="utf-8")
        status = WORK_DIR / "image-dpkg-status"
        status.write_text(image_status, encoding="utf-8")
        _apt(WORK_DIR, status, "update")
        _apt(WORK_DIR, status, "install", "--download-only", "--yes", *package_list())
        stamp.write_text(wanted, encoding="utf-8")
    return sorted(archives.glob("*.deb")), wanted


def package_name(deb: Path) -> str:
    """Debian pool file names are <name>_<version>_<arch>.deb."""
    return deb.name.split("_", 1)[0]
