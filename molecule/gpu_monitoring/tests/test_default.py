"""GPU monitoring on the lab: Prometheus scrapes every node, the collector writes the simulated GPUs' metrics,
and the faults side_effect.yml injected into mon-dgx1 fire their alerts there and nowhere else.

Prometheus and node-exporter are Debian's packages (real; on the Ubuntu-shaped nodes under noble's and jammy's
names and versions); on the RHEL 9-shaped mon-rhel9, a second Prometheus server, they are the role's EL install from
release tarballs, the lab mirror's stand-ins with Debian's binaries. The GPUs, nvidia-smi, ibstat and the kernel log
are the lab's simulations.
"""

import json
import re
import time
from pathlib import Path

import pytest
import yaml

PROMETHEUS = "http://127.0.0.1:9090"
NODES = {"mon-head", "mon-dgx1", "mon-c4140", "mon-rhel9"}
# The release stand-ins' versions and sha256 as `gpuforge lab prepare` built them
# (src/gpuforge/lab/prometheus_releases.py).
LAB_GENERATED = Path(__file__).resolve().parents[3] / "inventories" / "lab" / "group_vars" / "all" / "lab_generated.yml"
# Alerts the injected faults must fire on mon-dgx1 (GpuThermalSlowdown and IbPortDown after their `for: 1m`).
EXPECTED_ALERTS = {
    "GpuXidFatal",
    "GpuXid",
    "GpuEccDoubleBitErrors",
    "GpuRowRemapPending",
    "GpuThermalSlowdown",
    "GpuMissing",
    "IbPortDown",
}
ALERT_WAIT_S = 240
# The collector's timer and Prometheus's scrape run every 15 s (role defaults); under CI's load the first scrape after
# side_effect.yml can come later than verify's first query (CI run of 2026-12-02: mon-dgx1 still listed 8 GPUs).
METRIC_WAIT_S = 120


def _name(host):
    return host.backend.get_hostname()


def _get(host, path):
    script = "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())"
    return json.loads(host.check_output("python3 -c %s %s", script, PROMETHEUS + path))


def _query(host, promql):
    from urllib.parse import quote

    answer = _get(host, "/api/v1/query?query=" + quote(promql))
    assert answer["status"] == "success"
    return answer["data"]["result"]


def _firing(host):
    alerts = _get(host, "/api/v1/alerts")["data"]["alerts"]
    return [alert for alert in alerts if alert["state"] == "firing"]


def _server_only(host):
    if _name(host) != "mon-head":
        pytest.skip("asked from the Prometheus server")


def test_services_active(host):
    if _name(host) in ("mon-head", "mon-rhel9"):
        assert host.service("prometheus").is_running
        assert host.service("prometheus").is_enabled
    node_exporter = "node_exporter" if _name(host) == "mon-rhel9" else "prometheus-node-exporter"
    assert host.service(node_exporter).is_running
    assert host.service(node_exporter).is_enabled
    assert host.service("gpuforge-gpu-metrics.timer").is_running


# The pins each host's release has (roles/gpu_monitoring/defaults/main.yml): mon-head is Ubuntu 24.04-shaped,
# mon-c4140 Ubuntu 22.04-shaped, mon-dgx1 Debian 12.
PINS = {
    "mon-head": {"prometheus": "2.45.3+ds-2ubuntu0.3", "prometheus-node-exporter": "1.7.0-1ubuntu0.3"},
    "mon-dgx1": {"prometheus-node-exporter": "1.5.0-1+b6"},
    "mon-c4140": {"prometheus-node-exporter": "1.3.1-1ubuntu0.22.04.2"},
}


def test_package_versions_meet_the_pins(host):
    if _name(host) == "mon-rhel9":
        pytest.skip("no packages: release tarballs (test_the_rhel9_node_runs_the_release_binaries)")
    for name, pin in PINS[_name(host)].items():
        package = host.package(name)
        assert package.is_installed, name
        assert host.run(f"dpkg --compare-versions {package.version} ge {pin}").rc == 0, (name, package.version, pin)


@pytest.mark.parametrize(("name", "codename"), [("mon-head", "noble"), ("mon-c4140", "jammy")])
def test_the_ubuntu_shaped_nodes(host, name, codename):
    if _name(host) != name:
        pytest.skip(f"{name} only")
    assert f"VERSION_CODENAME={codename}" in host.file("/etc/os-release").content_string


def _rhel9_only(host):
    if _name(host) != "mon-rhel9":
        pytest.skip("the RHEL 9-shaped node only")


def test_the_rhel9_node_runs_the_release_binaries(host):
    """The EL path: the tarballs' binaries in /usr/local/bin, run by the role's units as their system users, the
    version the lab's stand-in has (Debian's upstream version)."""
    _rhel9_only(host)
    generated = yaml.safe_load(LAB_GENERATED.read_text(encoding="utf-8"))
    versions = {
        "prometheus": generated["gpuforge_lab_prometheus_release_version"],
        "node_exporter": generated["gpuforge_lab_node_exporter_release_version"],
    }
    for name, version in versions.items():
        archive = host.file(f"/var/cache/gpuforge/releases/{name}-{version}.linux-amd64.tar.gz")
        assert archive.sha256sum == generated[f"gpuforge_lab_{name}_release_sha256"]
        binary = host.file(f"/usr/local/bin/{name}")
        assert binary.is_file and binary.mode == 0o755 and binary.user == "root"
        assert binary.sha256sum == host.file(f"/opt/{name}-{version}.linux-amd64/{name}").sha256sum
        # "<name>, version <x.y.z> (branch: ..." (prometheus/common version.Print); Debian's prometheus says
        # "2.42.0+ds", its package's upstream version.
        printed = host.run(f"/usr/local/bin/{name} --version")
        assert printed.rc == 0
        assert re.search(rf"^{name}, version {re.escape(version)}[ +]", printed.stdout + printed.stderr, re.M)
        unit = host.file(f"/etc/systemd/system/{name}.service").content_string
        assert f"ExecStart=/usr/local/bin/{name} $ARGS" in unit
        assert f"EnvironmentFile=/etc/sysconfig/{name}" in unit
        main_pid = host.check_output(f"systemctl show -P MainPID {name}.service")
        assert host.check_output(f"stat -c %U /proc/{main_pid}") == name
    assert (
        "--collector.textfile.directory=/var/lib/prometheus/node-exporter"
        in host.file("/etc/sysconfig/node_exporter").content_string
    )


def test_the_rhel9_node_exporter_serves_the_collectors_metrics(host):
    _rhel9_only(host)
    assert host.file("/etc/os-release").contains('^ID="rhel"')
    deadline = time.time() + METRIC_WAIT_S
    while True:
        script = "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:9100/metrics').read().decode())"
        served = host.check_output("python3 -c %s", script).splitlines()
        stamps = [line for line in served if line.startswith("gpuforge_gpu_metrics_timestamp_seconds ")]
        if stamps or time.time() > deadline:
            break
        time.sleep(5)
    # The collector's own metric through the textfile collector: written within the last minutes.
    assert len(stamps) == 1
    assert time.time() - float(stamps[0].split()[1]) < 300
    assert "node_textfile_scrape_error 0" in served


def test_the_rhel9_prometheus_scrapes_every_node(host):
    """mon-rhel9's own Prometheus (the release binary) loaded gpuforge's configuration and rules and scrapes all
    four nodes, itself included."""
    _rhel9_only(host)
    assert _query(host, "prometheus_config_last_reload_successful")[0]["value"][1] == "1"
    rules = _get(host, "/api/v1/rules")["data"]["groups"]
    assert {rule["name"] for group in rules for rule in group["rules"]} >= EXPECTED_ALERTS
    deadline = time.time() + 90
    while True:
        up = {r["metric"]["instance"]: r["value"][1] for r in _query(host, 'up{job="node"}')}
        if (set(up) == NODES and set(up.values()) == {"1"}) or time.time() > deadline:
            break
        time.sleep(5)
    assert up == dict.fromkeys(NODES, "1")
    listed = {r["metric"]["instance"] for r in _query(host, "gpuforge_gpu_metrics_timestamp_seconds")}
    assert listed == NODES


def test_scrape_targets_are_the_inventory_nodes_and_all_up(host):
    _server_only(host)
    deadline = time.time() + 90
    while True:
        results = _query(host, 'up{job="node"}')
        up = {result["metric"]["instance"]: result["value"][1] for result in results}
        if (set(up) == NODES and set(up.values()) == {"1"}) or time.time() > deadline:
            break
        time.sleep(5)
    assert up == dict.fromkeys(NODES, "1")


def test_configuration_loaded(host):
    _server_only(host)
    result = _query(host, "prometheus_config_last_reload_successful")
    assert result[0]["value"][1] == "1"
    rules = _get(host, "/api/v1/rules")["data"]["groups"]
    names = {rule["name"] for group in rules for rule in group["rules"]}
    assert names >= EXPECTED_ALERTS


def test_collector_metrics_reach_prometheus(host):
    _server_only(host)
    # mon-dgx1 lost GPU 7 in side_effect.yml; the C4140 keeps its 4 V100.
    wanted = {"mon-dgx1": "7", "mon-c4140": "4"}
    deadline = time.time() + METRIC_WAIT_S
    while True:
        counts = {r["metric"]["instance"]: r["value"][1] for r in _query(host, "gpuforge_gpus_listed")}
        if counts == wanted or time.time() > deadline:
            break
        time.sleep(5)
    assert counts == wanted
    expected = {r["metric"]["instance"]: r["value"][1] for r in _query(host, "gpuforge_gpus_expected")}
    assert expected == {"mon-dgx1": "8", "mon-c4140": "4"}
    names = {r["metric"]["name"] for r in _query(host, "gpuforge_gpu_info")}
    assert names == {"Tesla V100-SXM2-16GB"}
    # Ports from the simulated ibstat: 4 EDR ports on the DGX-1, 1 on the C4140 and 1 on the head node.
    ports = _query(host, "gpuforge_ib_port_active")
    per_node = {}
    for result in ports:
        per_node[result["metric"]["instance"]] = per_node.get(result["metric"]["instance"], 0) + 1
    assert per_node == {"mon-dgx1": 4, "mon-c4140": 1, "mon-head": 1}


def test_textfile_on_the_node(host):
    if _name(host) in ("mon-head", "mon-rhel9"):
        pytest.skip("no GPUs on the head nodes")
    wanted = 7 if _name(host) == "mon-dgx1" else 4
    deadline = time.time() + METRIC_WAIT_S
    while True:
        text = host.file("/var/lib/prometheus/node-exporter/gpuforge_gpu.prom").content_string
        if f"gpuforge_gpus_listed {float(wanted)}" in text.splitlines() or time.time() > deadline:
            break
        time.sleep(5)
    assert f"gpuforge_gpus_listed {float(wanted)}" in text.splitlines()
    # node-exporter serves it.
    script = "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:9100/metrics').read().decode())"
    served = host.check_output("python3 -c %s", script)
    assert f"gpuforge_gpus_listed {wanted}" in served.splitlines()


def test_injected_faults_fire_their_alerts_on_that_node_only(host):
    _server_only(host)
    deadline = time.time() + ALERT_WAIT_S
    while True:
        firing = _firing(host)
        on_dgx1 = {alert["labels"]["alertname"] for alert in firing if alert["labels"]["instance"] == "mon-dgx1"}
        if on_dgx1 >= EXPECTED_ALERTS or time.time() > deadline:
            break
        time.sleep(10)
    assert on_dgx1 == EXPECTED_ALERTS
    elsewhere = [alert["labels"] for alert in firing if alert["labels"]["instance"] != "mon-dgx1"]
    assert elsewhere == []
    by_name = {}
    for alert in firing:
        by_name.setdefault(alert["labels"]["alertname"], []).append(alert["labels"])
    assert [labels["xid"] for labels in by_name["GpuXidFatal"]] == ["79"]
    assert [labels["xid"] for labels in by_name["GpuXid"]] == ["13"]
    assert by_name["GpuXidFatal"][0]["severity"] == "critical"
    assert [(labels["hca"], labels["port"]) for labels in by_name["IbPortDown"]] == [("mlx5_0", "1")]
    assert len(by_name["GpuEccDoubleBitErrors"]) == 1
    assert len(by_name["GpuThermalSlowdown"]) == 1
    assert by_name["GpuRowRemapPending"][0]["mechanism"] == "page_retirement"  # Volta retires pages


def test_alerts_query_agrees(host):
    _server_only(host)
    firing = _query(host, 'ALERTS{alertstate="firing", alertname="GpuMissing"}')
    assert [result["metric"]["instance"] for result in firing] == ["mon-dgx1"]
