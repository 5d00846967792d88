"""gpu_monitoring on EL 9 (tasks/setup-RedHat.yml, vars/RedHat.yml): not refused, Prometheus and node_exporter from the
pinned upstream release tarballs (sha256 checked, base URL overridable for a mirror), the role's own units with the
arguments files the Debian path's templates fill, and restarts decided from what the install changed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from test_gpu_monitoring_files import NOTHING, decisions, files_args, units
from test_gpu_monitoring_templates import role

ROOT = Path(__file__).resolve().parents[4]
PROMETHEUS_SHA256 = "2234aa0f66d9f9b854144f6faaaed72a316df7a680d9dad7cb48e49a6fa5332c"
NODE_EXPORTER_SHA256 = "6809dd0b3ec45fd6e992c19071d6b5253aed3ead7bf0686885a51d85c6643c66"
GUARD = "Refuse an image-based host and a package without a pinned version"


def releases(render) -> list[dict]:
    return render.var("gpu_monitoring_releases_wanted")


def test_el9_is_not_refused():
    # The old role refused EL until the site pinned EPEL versions; the pins are the release tarballs' now.
    assert role("rhel9", host="head01").refused("main.yml", GUARD) is False
    assert role("rhel9", host="gpu01").refused("main.yml", GUARD) is False


def test_an_emptied_release_version_is_refused_naming_the_variables():
    render = role("rhel9", host="gpu01", gpu_monitoring_node_exporter_version="")
    assert render.refused("main.yml", GUARD) is True
    message = " ".join(render.message("main.yml", GUARD).split())
    assert "no version pinned for node_exporter on RedHat" in message
    assert "Set gpu_monitoring_prometheus_version and gpu_monitoring_node_exporter_version" in message


def test_each_host_downloads_its_releases_pinned_and_checked():
    render = role("rhel9", host="head01")
    args = [render.task_args("setup-RedHat.yml", "Download the release tarballs", item=r) for r in releases(render)]
    assert [(a["url"], a["dest"], a["checksum"]) for a in args] == [
        (
            "https://github.com/prometheus/prometheus/releases/download/v2.53.1/prometheus-2.53.1.linux-amd64.tar.gz",
            "/var/cache/gpuforge/releases/prometheus-2.53.1.linux-amd64.tar.gz",
            f"sha256:{PROMETHEUS_SHA256}",
        ),
        (
            "https://github.com/prometheus/node_exporter/releases/download/v1.8.2/"
            "node_exporter-1.8.2.linux-amd64.tar.gz",
            "/var/cache/gpuforge/releases/node_exporter-1.8.2.linux-amd64.tar.gz",
            f"sha256:{NODE_EXPORTER_SHA256}",
        ),
    ]
    # A scraped node that is not the server gets node_exporter only.
    assert [r["name"] for r in releases(role("rhel9", host="gpu01"))] == ["node_exporter"]


def test_a_mirror_and_other_pins_replace_github():
    render = role(
        "rhel9",
        host="gpu01",
        gpu_monitoring_node_exporter_base_url="http://mirror.example/node_exporter/",
        gpu_monitoring_node_exporter_version="1.5.0",
        gpu_monitoring_node_exporter_sha256="a" * 64,
    )
    (release,) = releases(render)
    args = render.task_args("setup-RedHat.yml", "Download the release tarballs", item=release)
    assert args["url"] == "http://mirror.example/node_exporter/v1.5.0/node_exporter-1.5.0.linux-amd64.tar.gz"
    assert args["checksum"] == "sha256:" + "a" * 64
    unpack = render.task_args("setup-RedHat.yml", "Unpack them under /opt", item=release)
    assert (unpack["src"], unpack["dest"], unpack["remote_src"]) == (
        "/var/cache/gpuforge/releases/node_exporter-1.5.0.linux-amd64.tar.gz",
        "/opt",
        True,
    )
    assert release["directory"] == "/opt/node_exporter-1.5.0.linux-amd64"


def test_binaries_go_to_usr_local_bin():
    render = role("rhel9", host="head01")
    pairs = render.expr("{{ gpu_monitoring_releases_wanted | subelements('binaries') }}")
    copies = [render.task_args("setup-RedHat.yml", "The binaries in /usr/local/bin", item=p) for p in pairs]
    assert [(c["src"], c["dest"], c["mode"]) for c in copies] == [
        ("/opt/prometheus-2.53.1.linux-amd64/prometheus", "/usr/local/bin/prometheus", "0755"),
        ("/opt/prometheus-2.53.1.linux-amd64/promtool", "/usr/local/bin/promtool", "0755"),
        ("/opt/node_exporter-1.8.2.linux-amd64/node_exporter", "/usr/local/bin/node_exporter", "0755"),
    ]


def test_units_run_the_binaries_with_the_arguments_the_debian_path_configures():
    render = role("rhel9", host="head01")
    node = render.template("node_exporter.service.j2")
    assert "ExecStart=/usr/local/bin/node_exporter $ARGS" in node
    assert "EnvironmentFile=/etc/sysconfig/node_exporter" in node
    assert re.search(r"^User=node_exporter$", node, re.M)
    server = render.template("prometheus.service.j2")
    assert "ExecStart=/usr/local/bin/prometheus $ARGS" in server
    assert "ExecReload=/bin/kill -HUP $MAINPID" in server
    assert re.search(r"^User=prometheus$", server, re.M)
    # The same templates fill the arguments files as on Debian: same listen ports, the textfile directory the
    # collector writes to, the storage directory the role creates for the prometheus user.
    node_args = render.template("node-exporter.default.j2")
    assert '--web.listen-address=:9100 --collector.textfile.directory=/var/lib/prometheus/node-exporter"' in node_args
    server_args = render.template("prometheus.default.j2")
    assert "--storage.tsdb.path=/var/lib/prometheus/metrics2/" in server_args
    assert "--web.listen-address=:9090" in server_args
    assert (
        render.var("gpu_monitoring_collector_config")["output"] == "/var/lib/prometheus/node-exporter/gpuforge_gpu.prom"
    )


def test_el_files_and_units_are_the_releases():
    render = role("rhel9", host="head01")
    paths = [entry["path"] for entry in files_args(render)["files"]]
    assert "/etc/sysconfig/node_exporter" in paths and "/etc/sysconfig/prometheus" in paths
    validated = {f["path"]: f["validate"] for f in files_args(render)["files"] if "validate" in f}
    assert set(validated.values()) == {
        "/usr/local/bin/promtool check rules %s",
        "/usr/local/bin/promtool check config %s",
    }
    assert units(render) == ["node_exporter", "gpuforge-gpu-metrics.timer", "prometheus"]


def _results(*changed):
    return {"changed": any(c for _item, c in changed), "results": [{"item": i, "changed": c} for i, c in changed]}


@pytest.mark.parametrize(
    ("registered", "expected"),
    [
        ({}, NOTHING),
        # A converged host: every loop item unchanged.
        (
            {
                "gpu_monitoring_release_unpacked": _results(({"name": "prometheus"}, False)),
                "gpu_monitoring_release_binaries": _results(([{"name": "prometheus"}, "promtool"], False)),
                "gpu_monitoring_release_units": _results(({"name": "node_exporter"}, False)),
            },
            NOTHING,
        ),
        # A new node_exporter version unpacked: node_exporter restarts, Prometheus does not.
        (
            {
                "gpu_monitoring_release_unpacked": _results(
                    ({"name": "node_exporter"}, True), ({"name": "prometheus"}, False)
                )
            },
            {**NOTHING, "node_exporter_needs_restart": True},
        ),
        # A binary copied (item [release, binary]) or a unit rewritten: that service restarts.
        (
            {"gpu_monitoring_release_binaries": _results(([{"name": "prometheus"}, "promtool"], True))},
            {**NOTHING, "prometheus_needs_restart": True, "prometheus_touched": True},
        ),
        (
            {
                "gpu_monitoring_release_units": _results(
                    ({"name": "node_exporter"}, True), ({"name": "prometheus"}, True)
                )
            },
            {
                **NOTHING,
                "node_exporter_needs_restart": True,
                "prometheus_needs_restart": True,
                "prometheus_touched": True,
            },
        ),
    ],
)
def test_what_the_install_changed_is_restarted_and_only_that(registered, expected):
    render = role("rhel9", host="head01", **registered)
    assert {name: render.var(f"gpu_monitoring_{name} | bool") for name in NOTHING} == expected
    # The Debian path's own decision (apt_pinned's result) is not what EL reads.
    assert decisions(os_name="rhel9") == NOTHING


def test_the_pins_cite_their_sources():
    defaults = yaml.safe_load((ROOT / "roles" / "gpu_monitoring" / "defaults" / "main.yml").read_text())
    assert defaults["gpu_monitoring_prometheus_sha256"] == PROMETHEUS_SHA256
    assert defaults["gpu_monitoring_node_exporter_sha256"] == NODE_EXPORTER_SHA256
    sources = (ROOT / "docs" / "sources.md").read_text(encoding="utf-8")
    for digest in (PROMETHEUS_SHA256, NODE_EXPORTER_SHA256):
        assert digest in sources
    assert "polymathrobotics/oci" in sources and "zulip/zulip" in sources and "openstack/kolla" in sources
