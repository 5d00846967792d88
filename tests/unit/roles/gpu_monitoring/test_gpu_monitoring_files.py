"""The gpu_monitoring role's one files task and one units task per host (tasks/files.yml): what each kind of host
gets, and what the handlers decide from what the files task and the package install changed (vars/main.yml)."""

from __future__ import annotations

import pytest
from test_gpu_monitoring_templates import role

COLLECTOR = [
    "/usr/local/lib/gpuforge/gpuforge_gpu_metrics.py",
    "/etc/gpuforge/gpu-metrics.json",
    "/etc/systemd/system/gpuforge-gpu-metrics.service",
    "/etc/systemd/system/gpuforge-gpu-metrics.timer",
]
NODE = ["/etc/default/prometheus-node-exporter", *COLLECTOR]
SERVER = ["/etc/prometheus/rules/gpuforge-gpu.rules.yml", "/etc/prometheus/prometheus.yml", "/etc/default/prometheus"]
GRAFANA = [
    "/etc/grafana/provisioning/datasources/gpuforge-prometheus.yml",
    "/etc/grafana/provisioning/dashboards/gpuforge.yml",
    "/var/lib/grafana/dashboards/gpuforge/gpuforge-gpus.json",
]
FILES_TASK = "This host's monitoring files"


def files_args(render) -> dict:
    return render.task_args("files.yml", FILES_TASK)


def paths(render) -> list:
    return [entry["path"] for entry in files_args(render)["files"]]


@pytest.mark.parametrize(
    ("host", "extra", "expected"),
    [
        # head01 is the monitoring server and a scraped head node: both sets, one module run.
        ("head01", {}, NODE + SERVER + GRAFANA),
        ("head01", {"gpu_monitoring_grafana_provisioning": False}, NODE + SERVER),
        ("gpu01", {}, NODE),
        ("stor01", {}, NODE),
    ],
)
def test_each_host_gets_its_own_files_in_one_task(host, extra, expected):
    render = role(host=host, **extra)
    assert paths(render) == expected
    assert render.conditions("files.yml", FILES_TASK) == [True]


def test_a_server_that_is_not_scraped_gets_only_the_servers_files():
    render = role(host="head01", gpu_monitoring_scrape_groups=["gpu_nodes"])
    assert paths(render) == SERVER + GRAFANA


def test_a_host_that_is_neither_runs_nothing():
    render = role(host="stor01", gpu_monitoring_scrape_groups=["gpu_nodes"])
    assert render.conditions("files.yml", FILES_TASK) == [False]
    assert render.conditions("files.yml", "This host's monitoring services run") == [False]


def test_prometheus_files_are_checked_with_promtool_and_only_they():
    render = role()
    validated = {f["path"]: f["validate"] for f in files_args(render)["files"] if "validate" in f}
    assert validated == {
        "/etc/prometheus/rules/gpuforge-gpu.rules.yml": "/usr/bin/promtool check rules %s",
        "/etc/prometheus/prometheus.yml": "/usr/bin/promtool check config %s",
    }


def units(render):
    return [unit["name"] for unit in render.task_args("files.yml", "This host's monitoring services run")["units"]]


def test_each_host_starts_its_own_units_in_one_task():
    assert units(role(host="head01")) == ["prometheus-node-exporter", "gpuforge-gpu-metrics.timer", "prometheus"]
    assert units(role(host="gpu01")) == ["prometheus-node-exporter", "gpuforge-gpu-metrics.timer"]


NOTHING = {
    "node_exporter_needs_restart": False,
    "collector_changed": False,
    "prometheus_needs_restart": False,
    "prometheus_needs_reload": False,
    "prometheus_touched": False,
}


def decisions(host="head01", files_changed=(), install=None, os_name="debian12", units_changed=False):
    extra = {
        "gpu_monitoring_files": {"changed": bool(files_changed), "changed_paths": list(files_changed)},
        "gpu_monitoring_units": {"changed": units_changed},
    }
    if install is not None:
        extra["gpu_monitoring_packages_installed"] = install
    render = role(os_name=os_name, host=host, **extra)
    return {name: render.var(f"gpu_monitoring_{name} | bool") for name in NOTHING}


def test_a_converged_host_restarts_nothing():
    assert decisions() == NOTHING
    assert decisions(install={"changed": False, "unmet": [], "apt_ran": False}) == NOTHING


def test_a_new_configuration_reloads_prometheus_and_new_arguments_restart_it_once():
    reload = {**NOTHING, "prometheus_needs_reload": True, "prometheus_touched": True}
    assert decisions(files_changed=["/etc/prometheus/prometheus.yml"]) == reload
    both = decisions(files_changed=["/etc/prometheus/prometheus.yml", "/etc/default/prometheus"])
    # The restart reads the configuration too.
    assert both == {**NOTHING, "prometheus_needs_restart": True, "prometheus_touched": True}


def test_prometheus_readiness_is_checked_after_this_run_touched_it():
    # Restarted, reloaded (above) or started by the units task: there is a load to confirm. A converged server
    # (test_a_converged_host_restarts_nothing) skips the request.
    assert decisions(units_changed=True)["prometheus_touched"] is True
    task = role(host="head01").find_task("main.yml", "Prometheus is ready")
    assert "gpu_monitoring_prometheus_touched | bool" in task["when"]


def test_collector_files_rerun_the_collector_and_node_exporter_arguments_restart_node_exporter():
    assert decisions(files_changed=[COLLECTOR[0]]) == {**NOTHING, "collector_changed": True}
    assert decisions(files_changed=["/etc/default/prometheus-node-exporter"]) == {
        **NOTHING,
        "node_exporter_needs_restart": True,
    }
    # Prometheus' files are not the collector's.
    assert decisions(files_changed=SERVER[:2])["collector_changed"] is False


def test_the_package_an_install_changed_is_restarted_and_only_that_one():
    # apt_pinned names what it handed to apt ("<name>>=<floor>"); policy-rc.d 101 kept both from starting.
    only_node_exporter = {"changed": True, "unmet": ["prometheus-node-exporter>=1.5.0-1+b6"], "apt_ran": True}
    assert decisions(install=only_node_exporter) == {**NOTHING, "node_exporter_needs_restart": True}
    both = {"changed": True, "unmet": ["prometheus>=2.42.0+ds-5+deb12u1", "prometheus-node-exporter>=1.5.0-1+b6"]}
    assert decisions(install=both) == {
        **NOTHING,
        "node_exporter_needs_restart": True,
        "prometheus_needs_restart": True,
        "prometheus_touched": True,
    }
