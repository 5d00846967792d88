"""The lab network's leases and the mirror's liveness (src/gpuforge/lab/cluster.py)."""

import ipaddress
import os
import subprocess
from pathlib import Path

from gpuforge.lab import cluster


def test_running_with_live_pid_is_kept():
    assert not cluster._server_gone({"State": {"Running": True, "Pid": os.getpid()}})


def test_running_with_dead_pid_is_gone():
    # A pid above the kernel's pid_max cannot be a live process.
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text(encoding="utf-8"))
    assert cluster._server_gone({"State": {"Running": True, "Pid": pid_max + 1}})


def test_running_without_pid_is_gone():
    assert cluster._server_gone({"State": {"Running": True, "Pid": 0}})


def test_stopped_is_not_gone_it_is_started():
    assert not cluster._server_gone({"State": {"Running": False, "Pid": 0}})


def test_ensure_mirror_replaces_a_dead_server(monkeypatch, tmp_path):
    calls = []
    repo = type("Repo", (), {"root": tmp_path, "url": "http://mirror"})()
    monkeypatch.setattr(cluster.mirror, "build", lambda tag, log=print: repo)
    monkeypatch.setattr(cluster, "exists", lambda kind, name: True)
    info = {
        "Mounts": [{"Destination": "/srv/mirror", "Source": str(tmp_path)}],
        "ImageName": "lab:tag",
        "State": {"Running": True, "Pid": 0},
    }
    monkeypatch.setattr(cluster, "inspect", lambda kind, names: [info])
    monkeypatch.setattr(cluster, "podman", lambda *argv: calls.append(argv) or "")
    logged = []
    assert cluster.ensure_mirror("lab:tag", log=logged.append) == "http://mirror"
    assert calls[0] == ("rm", "-f", "-t", "5", cluster.MIRROR_CONTAINER)
    assert calls[1][:3] == ("run", "-d", "--name")
    assert "server process is gone" in logged[0]


def test_dynamic_range_leaves_out_static_addresses_and_the_broadcast():
    subnet = ipaddress.ip_network(cluster.SUBNET)
    dynamic = ipaddress.ip_network(cluster.DYNAMIC_RANGE)
    assert dynamic.subnet_of(subnet)
    assert subnet.broadcast_address not in dynamic
    assert ipaddress.ip_address(cluster.MIRROR_IP) not in dynamic
    assert ipaddress.ip_address(cluster.node_ip(0)) not in dynamic


def _network(end_ip, internal=True):
    # The shape `podman network inspect` printed for the lab network with podman 4.3.1 (Debian 12).
    return {
        "internal": internal,
        "subnets": [{"subnet": "10.242.0.0/24", "lease_range": {"start_ip": "10.242.0.129", "end_ip": end_ip}}],
    }


def test_network_faults():
    assert cluster.network_faults(_network("10.242.0.191")) == []
    assert cluster.network_faults(_network("10.242.0.255")) == ["leases the broadcast address 10.242.0.255"]
    assert cluster.network_faults(_network("10.242.0.191", internal=False)) == ["is not internal"]


def test_ensure_network_recreates_when_only_the_mirror_uses_it(monkeypatch):
    calls = []
    monkeypatch.setattr(cluster, "exists", lambda kind, name: True)
    monkeypatch.setattr(cluster, "inspect", lambda kind, names: [_network("10.242.0.255")])

    def podman(*argv):
        calls.append(argv)
        return cluster.MIRROR_CONTAINER + "\n" if argv[0] == "ps" else ""

    monkeypatch.setattr(cluster, "podman", podman)
    assert cluster.ensure_network(log=lambda line: None) is True
    assert ("rm", "-f", "-t", "5", cluster.MIRROR_CONTAINER) in calls
    assert ("network", "rm", cluster.NETWORK) in calls
    create = next(call for call in calls if call[:2] == ("network", "create"))
    assert create[create.index("--ip-range") + 1] == cluster.DYNAMIC_RANGE


def test_ensure_network_keeps_a_faulty_network_that_nodes_use(monkeypatch):
    calls, logged = [], []
    monkeypatch.setattr(cluster, "exists", lambda kind, name: True)
    monkeypatch.setattr(cluster, "inspect", lambda kind, names: [_network("10.242.0.255")])
    monkeypatch.setattr(
        cluster, "podman", lambda *argv: calls.append(argv) or "gpuforge-lab-gpu01\ngpuforge-lab-mirror\n"
    )
    assert cluster.ensure_network(log=logged.append) is False
    assert [call[0] for call in calls] == ["ps"]
    assert "gpuforge-lab-gpu01" in logged[0] and "gpuforge-lab-mirror" not in logged[0]
    assert "gpuforge lab down" in logged[1]


def test_forget_facts_drops_both_cache_file_names_of_the_hosts_only(tmp_path):
    # ansible-core 2.19's jsonfile cache wrote s1_<host>; older releases wrote <host>.
    for name in ("s1_gpu01", "gpu01", "s1_gpu010", "s1_head01", "s1_localhost", ".hidden"):
        (tmp_path / name).write_text("{}", encoding="utf-8")
    assert cluster.forget_facts(["gpu01", "head01"], cache_dir=tmp_path) == ["gpu01", "s1_gpu01", "s1_head01"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".hidden", "s1_gpu010", "s1_localhost"]


def test_forget_facts_without_a_cache_is_nothing(tmp_path):
    assert cluster.forget_facts(["gpu01"], cache_dir=tmp_path / "absent") == []


def test_fact_cache_dir_is_the_one_ansible_cfg_names():
    import configparser

    from gpuforge.paths import FACT_CACHE_DIR, PROJECT_ROOT

    config = configparser.ConfigParser()
    config.read(PROJECT_ROOT / "ansible.cfg")
    assert PROJECT_ROOT / config["defaults"]["fact_caching_connection"] == FACT_CACHE_DIR


def test_down_forgets_the_removed_nodes_facts(monkeypatch, tmp_path):
    (tmp_path / "s1_gpu01").write_text("{}", encoding="utf-8")
    (tmp_path / "s1_head01").write_text("{}", encoding="utf-8")
    monkeypatch.setattr(cluster.forget_facts, "__defaults__", (tmp_path,))
    monkeypatch.setattr(cluster, "MOLECULE_LANES_PID_FILE", tmp_path / "no-lanes.pid")
    monkeypatch.setattr(cluster, "podman", lambda *argv: "gpuforge-lab-gpu01" if argv[0] == "ps" else "")
    monkeypatch.setattr(cluster, "exists", lambda kind, name: False)
    monkeypatch.setattr(cluster, "SHARED_DIR", tmp_path / "shared")
    monkeypatch.setattr(cluster.inventory, "remove", lambda mirror_vars: None)
    monkeypatch.setattr(cluster.ssh, "remove", lambda: None)
    cluster._down(log=lambda line: None)
    assert [p.name for p in tmp_path.iterdir()] == ["s1_head01"]


def test_molecule_lanes_pid_is_a_live_process_from_the_pid_file(tmp_path):
    pid_file = tmp_path / "lanes.pid"
    assert cluster.molecule_lanes_pid(pid_file) is None
    pid_file.write_text("not a pid\n", encoding="utf-8")
    assert cluster.molecule_lanes_pid(pid_file) is None
    pid_file.write_text(f"{os.getpid()}\n", encoding="utf-8")
    assert cluster.molecule_lanes_pid(pid_file) == os.getpid()
    ended = subprocess.Popen(["true"])
    ended.wait()
    pid_file.write_text(f"{ended.pid}\n", encoding="utf-8")
    assert cluster.molecule_lanes_pid(pid_file) is None


def _down_with_podman(monkeypatch, tmp_path, lanes_pid: int | None, on_network: str = "") -> tuple[list, list]:
    """Run cluster._down against a recording podman; the lanes' PID file names `lanes_pid` (None: no file).

    The inventory's removal is recorded in the calls as ("inventory.remove", mirror_vars)."""
    calls, logged = [], []
    pid_file = tmp_path / "lanes.pid"
    if lanes_pid is not None:
        pid_file.write_text(f"{lanes_pid}\n", encoding="utf-8")
    monkeypatch.setattr(cluster, "MOLECULE_LANES_PID_FILE", pid_file)
    monkeypatch.setattr(cluster.forget_facts, "__defaults__", (tmp_path / "facts",))

    def podman(*argv):
        calls.append(argv)
        if argv[0] != "ps":
            return ""
        if "label=io.gpuforge.lab=node" in argv:
            return "gpuforge-lab-gpu01"
        if "label=io.gpuforge.lab" in argv:
            return "gpuforge-lab-gpu01 gpuforge-lab-mirror"
        return on_network

    monkeypatch.setattr(cluster, "podman", podman)
    monkeypatch.setattr(cluster, "exists", lambda kind, name: True)
    monkeypatch.setattr(cluster, "SHARED_DIR", tmp_path / "shared")
    monkeypatch.setattr(
        cluster.inventory, "remove", lambda mirror_vars: calls.append(("inventory.remove", mirror_vars))
    )
    monkeypatch.setattr(cluster.ssh, "remove", lambda: None)
    cluster._down(log=logged.append)
    return calls, logged


def test_down_while_molecule_lanes_run_removes_the_nodes_and_keeps_mirror_and_network(monkeypatch, tmp_path):
    calls, logged = _down_with_podman(monkeypatch, tmp_path, lanes_pid=os.getpid())
    removed = [call for call in calls if call[0] == "rm"]
    assert removed == [("rm", "-f", "-t", "5", "gpuforge-lab-gpu01")]
    assert not [call for call in calls if call[:2] == ("network", "rm")]
    assert f"the Molecule lanes (pid {os.getpid()}) use them" in logged[-1]
    # The scenarios still to run read the mirror's URL from lab_generated.yml (a CI run lost it to make smoke).
    assert ("inventory.remove", False) in calls


def test_down_without_molecule_lanes_removes_mirror_and_network(monkeypatch, tmp_path):
    calls, logged = _down_with_podman(monkeypatch, tmp_path, lanes_pid=None)
    assert ("rm", "-f", "-t", "5", "gpuforge-lab-gpu01", "gpuforge-lab-mirror") in calls
    assert ("network", "rm", cluster.NETWORK) in calls
    assert logged[-1] == f"lab: removed network {cluster.NETWORK}"
    assert ("inventory.remove", True) in calls


def test_down_keeps_the_network_that_other_containers_use(monkeypatch, tmp_path):
    calls, logged = _down_with_podman(monkeypatch, tmp_path, lanes_pid=None, on_network="gpuforge-mol-instance")
    assert not [call for call in calls if call[:2] == ("network", "rm")]
    assert logged[-1] == f"lab: network {cluster.NETWORK} kept, still used by gpuforge-mol-instance"


def test_inventory_remove_keeps_the_mirror_variables_only_when_asked(monkeypatch, tmp_path):
    hosts, generated = tmp_path / "hosts.yml", tmp_path / "lab_generated.yml"
    monkeypatch.setattr(cluster.inventory, "HOSTS_FILE", hosts)
    monkeypatch.setattr(cluster.inventory, "GENERATED_VARS", generated)
    for path in (hosts, generated):
        path.write_text("---\n", encoding="utf-8")
    cluster.inventory.remove(mirror_vars=False)
    assert not hosts.exists() and generated.exists()
    cluster.inventory.remove()
    assert not generated.exists()
