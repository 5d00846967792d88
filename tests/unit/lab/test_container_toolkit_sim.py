"""Simulated NVIDIA Container Toolkit tools: nvidia-ctk, nvidia-container-cli, runtime and hook stand-ins."""

from __future__ import annotations

import io
import json
import os
import stat

import pytest
import yaml
from gpuforge_sim import (
    driver_state,
    nvidia_container_cli,
    nvidia_container_runtime,
    nvidia_container_runtime_hook,
    nvidia_ctk,
    nvidia_smi,
)

from gpuforge.lab.profiles import hardware_document, load_profile


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A lab node with the 535 driver package installed; node(profile, faults, loaded) writes its state."""
    lib = tmp_path / "lib"
    (lib / "modules").mkdir(parents=True)
    for name, depends in (("nvidia", []), ("nvidia_uvm", ["nvidia"])):
        (lib / "modules" / f"{name}.ko").write_text(json.dumps({"size": 1000, "depends": depends}))
    (lib / "nvidia-driver.json").write_text(json.dumps({"driver_version": "535.183.01", "cuda_version": "12.2"}))
    monkeypatch.setenv("GPUFORGE_LAB_RUN", str(tmp_path / "run"))
    monkeypatch.setenv("GPUFORGE_LAB_LIB", str(lib))
    monkeypatch.setenv("GPUFORGE_LAB_HARDWARE", str(tmp_path / "hardware.json"))

    def make(profile: str = "dgx1-v100-edr", faults: list | None = None, loaded: bool = True) -> dict:
        document = hardware_document(load_profile(profile), faults or [])
        document["hostname"] = "lab-node"
        (tmp_path / "hardware.json").write_text(json.dumps(document), encoding="utf-8")
        if loaded:
            driver_state.load_module("nvidia")
        return document

    make.path = tmp_path
    return make


def call(tool, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = tool.main(list(argv), out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def test_ctk_version_two_line_layout():
    rc, out, _ = call(nvidia_ctk, "--version")
    assert rc == 0
    assert out.splitlines()[0] == "NVIDIA Container Toolkit CLI version 1.17.8"
    assert out.splitlines()[1].startswith("commit: ")


def test_docker_configure_keeps_existing_keys_and_is_stable(tmp_path):
    daemon = tmp_path / "daemon.json"
    daemon.write_text(json.dumps({"log-driver": "journald", "runtimes": {"crun": {"path": "/usr/bin/crun"}}}))
    rc, _, err = call(nvidia_ctk, "runtime", "configure", "--runtime=docker", f"--config={daemon}", "--set-as-default")
    assert rc == 0
    assert f"Wrote updated config to {daemon}" in err
    config = json.loads(daemon.read_text())
    assert config["log-driver"] == "journald"
    assert config["runtimes"] == {
        "crun": {"path": "/usr/bin/crun"},
        "nvidia": {"args": [], "path": "nvidia-container-runtime"},
    }
    assert config["default-runtime"] == "nvidia"
    first = daemon.read_bytes()
    call(nvidia_ctk, "runtime", "configure", "--runtime=docker", f"--config={daemon}", "--set-as-default")
    assert daemon.read_bytes() == first


def test_docker_configure_rejects_broken_json(tmp_path):
    daemon = tmp_path / "daemon.json"
    daemon.write_text("{not json")
    rc, _, err = call(nvidia_ctk, "runtime", "configure", "--runtime=docker", f"--config={daemon}")
    assert rc == 1 and "unable to load config for runtime docker" in err
    assert daemon.read_text() == "{not json"


def test_containerd_configure_appends_runtime_table_once(tmp_path):
    config = tmp_path / "config.toml"
    original = 'version = 2\n\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "registry.k8s.io/pause:3.9"\n'
    config.write_text(original)
    rc, _, _ = call(nvidia_ctk, "runtime", "configure", "--runtime=containerd", "--config", str(config))
    assert rc == 0
    text = config.read_text()
    assert text.startswith(original)
    assert '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]' in text
    assert 'BinaryName = "/usr/bin/nvidia-container-runtime"' in text
    call(nvidia_ctk, "runtime", "configure", "--runtime=containerd", "--config", str(config))
    assert config.read_text() == text
    call(nvidia_ctk, "runtime", "configure", "--runtime=containerd", "--config", str(config), "--set-as-default")
    defaulted = config.read_text()
    assert defaulted.count('default_runtime_name = "nvidia"') == 1
    call(nvidia_ctk, "runtime", "configure", "--runtime=containerd", "--config", str(config), "--set-as-default")
    assert config.read_text() == defaulted


def test_crio_configure_and_dry_run(tmp_path):
    config = tmp_path / "crio.conf"
    config.write_text('[crio.runtime]\ndefault_runtime = "runc"\n')
    rc, out, _ = call(nvidia_ctk, "runtime", "configure", "--runtime=crio", f"--config={config}", "--dry-run")
    assert rc == 0 and "[crio.runtime.runtimes.nvidia]" in out
    assert config.read_text() == '[crio.runtime]\ndefault_runtime = "runc"\n'
    call(nvidia_ctk, "runtime", "configure", "--runtime=crio", f"--config={config}", "--set-as-default")
    text = config.read_text()
    assert 'default_runtime = "nvidia"' in text and 'default_runtime = "runc"' not in text
    assert 'runtime_path = "/usr/bin/nvidia-container-runtime"' in text


def test_unknown_runtime_is_an_error():
    rc, _, err = call(nvidia_ctk, "runtime", "configure", "--runtime=lxc")
    assert rc == 1 and "unrecognized runtime 'lxc'" in err


def test_cdi_generate_lists_every_gpu_by_index_and_uuid(node):
    node("dgx1-v100-edr")
    output = node.path / "cdi" / "nvidia.yaml"
    rc, _, err = call(nvidia_ctk, "cdi", "generate", f"--output={output}")
    assert rc == 0 and "Generated CDI spec with version 0.5.0" in err
    spec = yaml.safe_load(output.read_text())
    assert spec["kind"] == "nvidia.com/gpu"
    names = [device["name"] for device in spec["devices"]]
    assert len(names) == 17  # 8 by index, 8 by UUID, all
    assert names[0] == "0" and names[-1] == "all"
    smi_out = io.StringIO()
    nvidia_smi.main(["-L"], out=smi_out, err=io.StringIO())
    uuids = [line.split("UUID: ")[1].rstrip(")") for line in smi_out.getvalue().splitlines()]
    assert names[1] == uuids[0]
    assert [n["path"] for n in spec["devices"][-1]["containerEdits"]["deviceNodes"]][-1] == "/dev/nvidia7"


def test_cdi_generate_drops_missing_gpu_and_needs_driver(node):
    node("dgx1-v100-edr", [{"type": "gpu_missing", "gpu": 2}])
    rc, out, _ = call(nvidia_ctk, "cdi", "generate")
    assert rc == 0
    assert len(yaml.safe_load(out)["devices"]) == 15
    (node.path / "run" / "modules").unlink()
    rc, _, err = call(nvidia_ctk, "cdi", "generate")
    assert rc == 1 and "ERROR_DRIVER_NOT_LOADED" in err


def test_cli_info_real_layout(node):
    node("dgx1-v100-edr")
    rc, out, _ = call(nvidia_container_cli, "info")
    assert rc == 0
    lines = out.splitlines()
    assert lines[:2] == ["NVRM version:   535.183.01", "CUDA version:   12.2"]
    assert lines.count("Model:          Tesla V100-SXM2-16GB") == 8
    assert "Bus Location:   00000000:06:00.0" in lines
    assert lines.count("Architecture:   7.0") == 8


def test_cli_list_needs_driver_unless_k_loads_it(node, monkeypatch):
    node("dgx1-v100-edr", loaded=False)
    monkeypatch.setattr(nvidia_container_cli, "REDHAT_RELEASE", str(node.path / "no-redhat-release"))
    rc, _, err = call(nvidia_container_cli, "list")
    assert rc == 1 and err == "nvidia-container-cli: initialization error: nvml error: driver not loaded\n"
    rc, out, _ = call(nvidia_container_cli, "-k", "list")
    assert rc == 0
    assert driver_state.loaded_modules() == ["nvidia", "nvidia_uvm"]
    paths = out.splitlines()
    assert paths[:2] == ["/dev/nvidiactl", "/dev/nvidia-uvm"]
    assert [p for p in paths if p.startswith("/dev/nvidia") and p[11:].isdigit()] == [
        f"/dev/nvidia{i}" for i in range(8)
    ]
    assert "/usr/bin/nvidia-smi" in paths
    assert "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.535.183.01" in paths


def test_cli_list_prints_rhel_library_directory_on_a_rhel_shaped_node(node, monkeypatch):
    # A RHEL node's driver libraries are in /usr/lib64; a list with Debian's multiarch paths there would send
    # gpu_selinux's restorecon and the smoke test's library check to files that do not exist.
    node("dgx1-v100-edr")
    release = node.path / "redhat-release"
    release.write_text("Red Hat Enterprise Linux release 9.4 (Plow)\n", encoding="utf-8")
    monkeypatch.setattr(nvidia_container_cli, "REDHAT_RELEASE", str(release))
    rc, out, _ = call(nvidia_container_cli, "list")
    assert rc == 0
    libraries = [path for path in out.splitlines() if ".so." in path]
    assert "/usr/lib64/libnvidia-ml.so.535.183.01" in libraries
    assert all(path.startswith("/usr/lib64/") for path in libraries)


def test_cli_usage_error():
    assert call(nvidia_container_cli, "frobnicate")[0] == 64


def test_runtime_stand_in_version_and_refusal():
    rc, out, _ = call(nvidia_container_runtime, "--version")
    assert rc == 0 and out.startswith("NVIDIA Container Runtime version 1.17.8\n")
    rc, _, err = call(nvidia_container_runtime, "create", "--bundle", "/tmp/b", "ctr")
    assert rc == 1 and "exec runc with: create --bundle /tmp/b ctr" in err


def _hook(tmp_path, env: list[str]) -> tuple[int, str]:
    (tmp_path / "config.json").write_text(json.dumps({"process": {"env": env}}))
    err = io.StringIO()
    state = io.StringIO(json.dumps({"pid": 42, "bundle": str(tmp_path)}))
    rc = nvidia_container_runtime_hook.main(["prestart"], out=io.StringIO(), err=err, stdin=state)
    return rc, err.getvalue()


def test_hook_passes_non_gpu_containers_and_needs_the_driver_for_gpu_ones(node, tmp_path):
    assert _hook(tmp_path, ["PATH=/bin"]) == (0, "")
    assert _hook(tmp_path, ["NVIDIA_VISIBLE_DEVICES=void"]) == (0, "")
    node("dgx1-v100-edr", loaded=False)
    rc, err = _hook(tmp_path, ["NVIDIA_VISIBLE_DEVICES=all"])
    assert rc == 1 and err == "nvidia-container-cli: initialization error: nvml error: driver not loaded\n"


@pytest.fixture
def container(node, tmp_path, monkeypatch):
    """A created container as the prestart hook sees it: <proc>/42/root/<bundle>/rootfs/dev, and the node's
    device files (mknod, as the simulated nvidia-persistenced makes them) in tmp_path/dev."""
    if os.geteuid() != 0:
        pytest.skip("creating device files (mknod) needs root")
    monkeypatch.setenv("GPUFORGE_LAB_DEV_DIR", str(tmp_path / "dev"))
    (tmp_path / "dev").mkdir()
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "config.json").write_text(json.dumps({"root": {"path": "rootfs"}}))
    container_dev = tmp_path / "proc" / "42" / "root" / str(bundle / "rootfs" / "dev").lstrip("/")
    container_dev.mkdir(parents=True)
    return {"state": {"pid": 42, "bundle": str(bundle)}, "dev": container_dev, "proc": str(tmp_path / "proc")}


def _configure(container, devices: str) -> tuple[int, str]:
    err = io.StringIO()
    rc = nvidia_container_runtime_hook.configure(container["state"], devices, err, proc=container["proc"])
    return rc, err.getvalue()


def test_hook_injects_the_node_device_files_for_the_requested_gpus(node, container):
    document = node("dgx1-v100-edr")
    driver_state.create_device_files(range(document["gpu"]["count"]))
    smi = io.StringIO()
    nvidia_smi.main(["-L"], out=smi, err=io.StringIO())
    uuid3 = smi.getvalue().splitlines()[3].split("UUID: ")[1].rstrip(")")
    rc, err = _configure(container, f"1,{uuid3}")
    assert rc == 0, err
    injected = {path.name: os.stat(path).st_rdev for path in container["dev"].iterdir()}
    assert injected == {
        name: os.makedev(195, minor) for name, minor in (("nvidiactl", 255), ("nvidia1", 1), ("nvidia3", 3))
    }
    assert stat.S_ISCHR(os.stat(container["dev"] / "nvidia3").st_mode)
    assert "no driver libraries to mount" in err


def test_hook_refuses_unknown_gpus_and_missing_device_files(node, container):
    node("dgx1-v100-edr", [{"type": "gpu_missing", "gpu": 7}])
    driver_state.create_device_files(range(7))
    rc, err = _configure(container, "7")
    assert rc == 1 and err == "nvidia-container-cli: device error: unknown device id: 7\n"
    os.unlink(os.path.join(driver_state.dev_dir(), "nvidia5"))
    rc, err = _configure(container, "all")
    assert rc == 1 and "nvidia5" in err
    os.unlink(os.path.join(driver_state.dev_dir(), "nvidiactl"))
    rc, err = _configure(container, "0")
    assert rc == 1 and "nvidiactl" in err
