"""The gpu_monitoring role rendered without hosts: scrape targets from the inventory (checked by
`promtool check config`), the collector's configuration, the package pins per OS."""

from __future__ import annotations

import subprocess

import pytest
import yaml
from gpu_stack_render import OS_FACTS, RoleRender

from gpuforge import vendor_facts

GROUPS = {
    "all": ["head01", "gpu01", "gpu02", "stor01"],
    "head_nodes": ["head01"],
    "gpu_nodes": ["gpu01", "gpu02"],
    "storage_nodes": ["stor01"],
    "monitoring_server": ["head01"],
}
HOSTVARS = {
    "head01": {"ansible_host": "192.0.2.10"},
    "gpu01": {"ansible_host": "192.0.2.101"},
    # A host whose scrape address is pinned to another network.
    "gpu02": {"ansible_host": "192.0.2.102", "gpu_monitoring_scrape_address": "198.51.100.102"},
    "stor01": {},
}


# ansible_distribution_release, which the pins are keyed by (EL: the major version is used instead).
RELEASES = {"debian12": "bookworm", "ubuntu2204": "jammy", "ubuntu2404": "noble", "rhel8": "Ootpa", "rhel9": "Plow"}


def role(os_name="debian12", host="head01", **extra) -> RoleRender:
    facts = {**OS_FACTS[os_name], "distribution_release": RELEASES[os_name]}
    return RoleRender(
        "gpu_monitoring",
        os_name,
        groups=GROUPS,
        hostvars=HOSTVARS,
        inventory_hostname=host,
        ansible_facts=facts,
        **extra,
    )


def test_scrape_targets_come_from_the_inventory(promtool, tmp_path):
    render = role()
    text = render.template("prometheus.yml.j2")
    config = yaml.safe_load(text)
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert set(jobs) == {"prometheus", "node"}
    targets = {c["labels"]["instance"]: c["targets"] for c in jobs["node"]["static_configs"]}
    assert targets == {
        "gpu01": ["192.0.2.101:9100"],
        "gpu02": ["198.51.100.102:9100"],
        "head01": ["192.0.2.10:9100"],
        "stor01": ["stor01:9100"],  # no ansible_host: its inventory name
    }
    assert config["rule_files"] == ["/etc/prometheus/rules/*.rules.yml"]
    path = tmp_path / "prometheus.yml"
    path.write_text(text, encoding="utf-8")
    result = subprocess.run([promtool, "check", "config", str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dcgm_job_only_when_asked(promtool, tmp_path):
    text = role(gpu_monitoring_gpu_exporter="dcgm").template("prometheus.yml.j2")
    jobs = {job["job_name"]: job for job in yaml.safe_load(text)["scrape_configs"]}
    dcgm = {c["labels"]["instance"]: c["targets"] for c in jobs["dcgm"]["static_configs"]}
    assert dcgm == {"gpu01": ["192.0.2.101:9400"], "gpu02": ["198.51.100.102:9400"]}
    path = tmp_path / "prometheus.yml"
    path.write_text(text, encoding="utf-8")
    result = subprocess.run([promtool, "check", "config", str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_scraped_groups_gives_an_empty_job(promtool, tmp_path):
    text = role(gpu_monitoring_scrape_groups=["no_such_group"]).template("prometheus.yml.j2")
    jobs = {job["job_name"]: job for job in yaml.safe_load(text)["scrape_configs"]}
    assert jobs["node"]["static_configs"] == []


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"gpuforge_expected_gpu_count": 8}, 8),
        ({"gpuforge_expected_system": "poweredge-c4140-v100"}, 4),
        ({}, None),
    ],
)
def test_collector_configuration(extra, expected):
    render = role(host="gpu01", **extra)
    config = render.var("gpu_monitoring_collector_config")
    assert config["expected_gpus"] == expected
    assert config["gpus"] is True
    assert config["output"] == "/var/lib/prometheus/node-exporter/gpuforge_gpu.prom"
    # The inventory's fatal Xid codes (roles/gpuforge/defaults/main/expected_hardware.yml).
    assert config["xid_fatal"] == [48, 62, 64, 74, 79, 95, 119, 120]


def test_host_roles():
    assert role(host="head01").var("gpu_monitoring_is_server") is True
    assert role(host="head01").var("gpu_monitoring_has_gpus") is False
    assert role(host="gpu01").var("gpu_monitoring_is_server") is False
    assert role(host="stor01").var("gpu_monitoring_is_node") is True


def test_debian_asks_apt_for_floors():
    render = role(host="head01")
    assert render.var("gpu_monitoring_wanted") == [
        {"name": "prometheus", "version": "2.42.0+ds-5+deb12u1"},
        {"name": "prometheus-node-exporter", "version": "1.5.0-1+b6"},
    ]
    args = render.task("setup-Debian.yml", "Install the packages")
    assert args["name"] == ["prometheus>=2.42.0+ds-5+deb12u1", "prometheus-node-exporter>=1.5.0-1+b6"]


@pytest.mark.parametrize(("os_name", "registry"), [("ubuntu2204", "ubuntu/jammy"), ("ubuntu2404", "ubuntu/noble")])
def test_ubuntu_asks_apt_for_the_registrys_builds(os_name, registry):
    """Ubuntu's pins are the builds vendor_facts/ubuntu/<release>.yml records, not the role's own numbers."""
    recorded = {package.name: package.version for package in vendor_facts.repository(registry).packages}
    render = role(os_name, host="head01")
    args = render.task("setup-Debian.yml", "Install the packages")
    assert args["name"] == [
        f"prometheus>={recorded['prometheus']}",
        f"prometheus-node-exporter>={recorded['prometheus-node-exporter']}",
    ]
