"""The lab's stand-ins of Prometheus' and node_exporter's release tarballs (src/gpuforge/lab/prometheus_releases.py):
upstream's layout (<name>-<version>.linux-amd64/ with the binaries at its top) filled from the Debian packages, the
version Debian's upstream version, a sha256sums.txt in upstream's format that matches the file, the same bytes from
the same packages, and the lab inventory's generated variables read back from the mirror. The packages here are
small ones built with dpkg-deb in the Debian packages' layout (file names and paths of prometheus 2.42.0+ds-5+deb12u1
and prometheus-node-exporter 1.5.0-1+b6)."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tarfile

import pytest

from gpuforge.lab import prometheus_releases

pytestmark = pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="dpkg-deb builds the test packages")

PACKAGES = {
    "prometheus_2.42.0+ds-5+deb12u1_amd64.deb": {
        "usr/bin/prometheus": "#!/bin/sh\necho prometheus\n",
        "usr/bin/promtool": "#!/bin/sh\necho promtool\n",
        "etc/prometheus/prometheus.yml": "global: {}\n",
        "etc/prometheus/consoles/README.consoles": "consoles\n",
        "etc/prometheus/console_libraries/README.consoles": "libraries\n",
        "usr/share/prometheus/web/static/x.css": "not in upstream's tarball\n",
    },
    "prometheus-node-exporter_1.5.0-1+b6_amd64.deb": {
        "usr/bin/prometheus-node-exporter": "#!/bin/sh\necho node_exporter\n",
        "usr/share/doc/prometheus-node-exporter/NOTICE": "notice\n",
    },
    "python3-prometheus-client_0.16.0-0.1_all.deb": {"usr/lib/python3/dist-packages/x.py": ""},
}


def _deb(tmp_path, file_name, files):
    name, version, _arch = file_name[:-4].split("_")
    root = tmp_path / "build" / name
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
        (root / path).chmod(0o755 if path.startswith("usr/bin/") else 0o644)
    (root / "DEBIAN").mkdir()
    control = f"Package: {name}\nVersion: {version}\nArchitecture: amd64\nMaintainer: t <t@t>\nDescription: t\n"
    (root / "DEBIAN" / "control").write_text(control, encoding="utf-8")
    deb = tmp_path / "debs" / file_name
    deb.parent.mkdir(exist_ok=True)
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(root), str(deb)], check=True, capture_output=True)
    return deb


@pytest.fixture
def debs(tmp_path):
    return [_deb(tmp_path, file_name, files) for file_name, files in PACKAGES.items()]


def members(path):
    with tarfile.open(path) as tar:
        return {m.name: (m.type == tarfile.DIRTYPE, oct(m.mode), m.uid, m.mtime) for m in tar.getmembers()}


@pytest.mark.parametrize(
    ("debian", "upstream"),
    [("2.42.0+ds-5+deb12u1", "2.42.0"), ("1.5.0-1+b6", "1.5.0"), ("1:2.45.3+ds-2ubuntu0.3", "2.45.3")],
)
def test_upstream_version(debian, upstream):
    assert prometheus_releases.upstream_version(debian) == upstream


def test_stand_ins_in_upstreams_layout_with_their_sums(tmp_path, debs):
    mirror = tmp_path / "mirror"
    published = prometheus_releases.publish(mirror, debs, tmp_path / "staging", log=lambda _m: None)
    assert {name: release["version"] for name, release in published.items()} == {
        "prometheus": "2.42.0",
        "node_exporter": "1.5.0",
    }
    release_dir = mirror / "prometheus" / "prometheus" / "releases" / "download" / "v2.42.0"
    assert sorted(p.name for p in release_dir.iterdir()) == ["prometheus-2.42.0.linux-amd64.tar.gz", "sha256sums.txt"]
    archive = release_dir / "prometheus-2.42.0.linux-amd64.tar.gz"
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    assert published["prometheus"]["sha256"] == digest
    assert (release_dir / "sha256sums.txt").read_text() == f"{digest}  prometheus-2.42.0.linux-amd64.tar.gz\n"
    top = "prometheus-2.42.0.linux-amd64"
    epoch = prometheus_releases.EPOCH
    assert members(archive) == {
        top: (True, "0o755", 0, epoch),
        f"{top}/prometheus": (False, "0o755", 0, epoch),
        f"{top}/promtool": (False, "0o755", 0, epoch),
        f"{top}/prometheus.yml": (False, "0o644", 0, epoch),
        f"{top}/consoles": (True, "0o755", 0, epoch),
        f"{top}/consoles/README.consoles": (False, "0o644", 0, epoch),
        f"{top}/console_libraries": (True, "0o755", 0, epoch),
        f"{top}/console_libraries/README.consoles": (False, "0o644", 0, epoch),
    }
    with tarfile.open(archive) as tar:
        assert tar.extractfile(f"{top}/promtool").read() == b"#!/bin/sh\necho promtool\n"
    node = mirror / "prometheus" / "node_exporter" / "releases" / "download" / "v1.5.0"
    with tarfile.open(node / "node_exporter-1.5.0.linux-amd64.tar.gz") as tar:
        assert sorted(tar.getnames()) == [
            "node_exporter-1.5.0.linux-amd64",
            "node_exporter-1.5.0.linux-amd64/NOTICE",
            "node_exporter-1.5.0.linux-amd64/node_exporter",
        ]
        binary = tar.extractfile("node_exporter-1.5.0.linux-amd64/node_exporter").read()
    assert binary == b"#!/bin/sh\necho node_exporter\n"


def test_the_same_packages_give_the_same_bytes_and_the_inventory_reads_them_back(tmp_path, debs):
    mirror = tmp_path / "mirror"
    assert prometheus_releases.generated_vars(mirror) == {}
    first = prometheus_releases.publish(mirror, debs, tmp_path / "staging", log=lambda _m: None)
    again = prometheus_releases.publish(mirror, debs, tmp_path / "staging", log=lambda _m: None)
    assert first == again
    assert prometheus_releases.generated_vars(mirror) == {
        "gpuforge_lab_prometheus_release_version": "2.42.0",
        "gpuforge_lab_prometheus_release_sha256": first["prometheus"]["sha256"],
        "gpuforge_lab_node_exporter_release_version": "1.5.0",
        "gpuforge_lab_node_exporter_release_sha256": first["node_exporter"]["sha256"],
    }


def test_a_missing_package_or_file_is_an_error(tmp_path, debs):
    with pytest.raises(prometheus_releases.ReleaseError, match=r"expected one prometheus-node-exporter \.deb"):
        prometheus_releases.publish(tmp_path / "m", debs[:1], tmp_path / "s", log=lambda _m: None)
    broken = _deb(tmp_path / "broken", "prometheus_2.42.0+ds-5+deb12u1_amd64.deb", {"usr/bin/prometheus": "x"})
    with pytest.raises(prometheus_releases.ReleaseError, match="usr/bin/promtool not in the package"):
        prometheus_releases.publish(tmp_path / "m", [broken, debs[1]], tmp_path / "s", log=lambda _m: None)
