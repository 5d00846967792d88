"""The lab's stand-ins for Prometheus' and node_exporter's upstream release tarballs (docs/lab.md, "Prometheus release
stand-ins").

On EL the gpu_monitoring role installs Prometheus and node_exporter from the upstream release tarballs
(<base>/v<version>/<name>-<version>.linux-amd64.tar.gz, sha256 pinned). Lab nodes cannot reach GitHub, so the mirror
serves LAB STAND-INS at the same relative paths: tarballs laid out as upstream's (<name>-<version>.linux-amd64/ with
the binaries at its top) whose binaries are Debian 12's builds, taken from the Debian packages the lab already
downloads for the Debian path (lab/packages/debian.txt: prometheus, prometheus-node-exporter). The version is the
Debian package's upstream version (2.42.0+ds-5+deb12u1 -> 2.42.0). Beside each tarball a sha256sums.txt in
upstream's format; `gpuforge lab prepare` writes the versions and digests into the lab inventory's generated
variables (generated_vars), which inventories/lab/group_vars/all/gpu_monitoring.yml hands to the role: the digests
are the lab's own files', computed when the lab builds them, never upstream's.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import re
import shutil
import tarfile
from pathlib import Path

# name -> the Debian package, the upstream repository (the mirror path <repository>/releases/download/v<version>/) and
# the tarball's members: path in the tarball's top directory -> path in the package (a trailing / copies a folder).
RELEASES = {
    "prometheus": {
        "debian": "prometheus",
        "repository": "prometheus/prometheus",
        "members": {
            "prometheus": "usr/bin/prometheus",
            "promtool": "usr/bin/promtool",
            "prometheus.yml": "etc/prometheus/prometheus.yml",
            "consoles/": "etc/prometheus/consoles/",
            "console_libraries/": "etc/prometheus/console_libraries/",
        },
    },
    "node_exporter": {
        "debian": "prometheus-node-exporter",
        "repository": "prometheus/node_exporter",
        "members": {
            "node_exporter": "usr/bin/prometheus-node-exporter",
            "NOTICE": "usr/share/doc/prometheus-node-exporter/NOTICE",
        },
    },
}
SUMS = "sha256sums.txt"  # upstream's name for the digests beside a release's files
EPOCH = 1_700_000_000  # every member's mtime (the mirror's REPRODUCIBLE_EPOCH): the same packages give the same bytes


class ReleaseError(RuntimeError):
    """A Debian package the stand-ins are made from is missing or lacks a file."""


def upstream_version(debian_version: str) -> str:
    """Debian's version without epoch, revision and repack suffix (2.42.0+ds-5+deb12u1 -> 2.42.0)."""
    version = debian_version.split(":", 1)[-1].rsplit("-", 1)[0]
    return re.sub(r"\+ds\d*$", "", version)


def archive_name(name: str, version: str) -> str:
    return f"{name}-{version}.linux-amd64.tar.gz"


def directory(mirror_root: Path, name: str) -> Path:
    """Where a release's versions lie under the mirror: <repository>/releases/download (the role's base URL)."""
    return mirror_root / RELEASES[name]["repository"] / "releases" / "download"


def inputs_hash() -> str:
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def _add(tar: tarfile.TarFile, arcname: str, source: Path) -> None:
    info = tarfile.TarInfo(arcname + ("/" if source.is_dir() else ""))
    info.mtime, info.uid, info.gid, info.uname, info.gname = EPOCH, 0, 0, "root", "root"
    if source.is_dir():
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(info)
        for child in sorted(source.iterdir()):
            _add(tar, f"{arcname}/{child.name}", child)
        return
    info.size, info.mode = source.stat().st_size, 0o755 if source.stat().st_mode & 0o111 else 0o644
    with source.open("rb") as handle:
        tar.addfile(info, handle)


def build_archive(name: str, version: str, unpacked: Path) -> bytes:
    """The tarball's bytes: <name>-<version>.linux-amd64/ and its members from the unpacked Debian package."""
    top = f"{name}-{version}.linux-amd64"
    buffer = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=6, mtime=0) as compressed,
        tarfile.open(fileobj=compressed, mode="w", format=tarfile.GNU_FORMAT) as tar,
    ):
        info = tarfile.TarInfo(top + "/")
        info.type, info.mode, info.mtime, info.uname, info.gname = tarfile.DIRTYPE, 0o755, EPOCH, "root", "root"
        tar.addfile(info)
        for member, source in RELEASES[name]["members"].items():
            path = unpacked / source.rstrip("/")
            if not path.exists():
                raise ReleaseError(f"{RELEASES[name]['debian']}: {source} not in the package (needed as {member})")
            _add(tar, f"{top}/{member.rstrip('/')}", path)
    return buffer.getvalue()


def publish(mirror_root: Path, debs: list[Path], staging_root: Path, log=print) -> dict[str, dict]:
    """Build each stand-in from its Debian package, write it with its sha256sums.txt under the mirror (one version
    per release, swapped in whole); returns {name: {version, sha256}}."""
    from gpuforge.lab import mirror  # mirror imports this module

    published = {}
    for name, release in RELEASES.items():
        found = [deb for deb in debs if deb.name.split("_", 1)[0] == release["debian"]]
        if len(found) != 1:
            raise ReleaseError(f"{name} stand-in: expected one {release['debian']} .deb among the lab's, found {found}")
        version = upstream_version(found[0].name.split("_")[1].replace("%3a", ":"))
        unpacked = staging_root / f"release-{name}"
        shutil.rmtree(unpacked, ignore_errors=True)
        unpacked.mkdir(parents=True)
        mirror._run(["dpkg-deb", "-x", str(found[0]), str(unpacked)])
        data = build_archive(name, version, unpacked)
        shutil.rmtree(unpacked, ignore_errors=True)
        digest = hashlib.sha256(data).hexdigest()
        next_dir = staging_root / f"release-{name}-next"
        shutil.rmtree(next_dir, ignore_errors=True)
        (next_dir / f"v{version}").mkdir(parents=True)
        (next_dir / f"v{version}" / archive_name(name, version)).write_bytes(data)
        (next_dir / f"v{version}" / SUMS).write_text(f"{digest}  {archive_name(name, version)}\n", encoding="utf-8")
        mirror._swap(next_dir, directory(mirror_root, name))
        published[name] = {"version": version, "sha256": digest}
    names = ", ".join(f"{name} {release['version']}" for name, release in published.items())
    log(f"lab: Prometheus release stand-ins published: {names}")
    return published


def published(mirror_root: Path) -> dict[str, dict]:
    """{name: {version, sha256}} read back from the mirror's sha256sums.txt files; {} before the mirror is built."""
    found = {}
    for name in RELEASES:
        for sums in sorted(directory(mirror_root, name).glob(f"v*/{SUMS}")):
            version = sums.parent.name[1:]
            for line in sums.read_text(encoding="utf-8").splitlines():
                digest, _, file_name = line.partition("  ")
                if file_name == archive_name(name, version):
                    found[name] = {"version": version, "sha256": digest}
    return found


def generated_vars(mirror_root: Path) -> dict[str, str]:
    """The lab inventory's generated variables for the stand-ins (inventories/lab/group_vars/all/gpu_monitoring.yml)."""
    values = {}
    for name, release in published(mirror_root).items():
        values[f"gpuforge_lab_{name}_release_version"] = release["version"]
        values[f"gpuforge_lab_{name}_release_sha256"] = release["sha256"]
    return values
