"""nvidia_container_toolkit on lab nodes (Debian 12, RHEL 9, Ubuntu 24.04/22.04): pinned packages from NVIDIA's signed
repository, OCI hook, containerd config edited (Debian 12), CDI, cli checks, container smoke test (Debian 12)."""

import json
import os
from pathlib import Path

import yaml

from gpuforge.paths import PROJECT_ROOT

PACKAGES = (
    "nvidia-container-toolkit",
    "nvidia-container-toolkit-base",
    "libnvidia-container-tools",
    "libnvidia-container1",
)
# The one release the lab's registry publishes (vendor_facts/nvidia-container-toolkit/{deb,rpm}.yml).
PACKAGE_VERSION = "1.17.8-1"


def test_toolkit_pinned_from_mirror(host, shape):
    if shape.startswith("rhel"):
        for name in PACKAGES:
            # rpm splits version and release: testinfra's version is the part before the dash.
            assert host.check_output(f"rpm -q --qf '%{{VERSION}}-%{{RELEASE}}' {name}") == PACKAGE_VERSION, name
            assert host.check_output(f"dnf -q repoquery --installed --qf '%{{from_repo}}' {name}") == (
                "nvidia-container-toolkit"
            ), name
        repo = host.file("/etc/yum.repos.d/nvidia-container-toolkit.repo")
        # The role's RedHat vars keep dnf's $basearch, as NVIDIA's own .repo file does.
        assert repo.contains(r"baseurl = http://mirror/libnvidia-container/stable/rpm/\$basearch")
        # Both signatures checked (NVIDIA's .repo file checks the metadata's only; roles/vendor_repository).
        assert repo.contains("^gpgcheck = 1") and repo.contains("^repo_gpgcheck = 1")
        # Every installed package carries a header signature (dnf refuses an unsigned one with gpgcheck on).
        for name in PACKAGES:
            assert host.check_output(f"rpm -q --qf '%{{RSAHEADER:pgpsig}}' {name}").startswith("RSA/SHA256, "), name
        return
    for name in PACKAGES:
        package = host.package(name)
        assert package.is_installed, name
        assert package.version == PACKAGE_VERSION, name
    policy = host.check_output("apt-cache policy nvidia-container-toolkit")
    assert "http://mirror/libnvidia-container/stable/deb/amd64" in policy
    source = host.file("/etc/apt/sources.list.d/nvidia-container-toolkit.sources")
    assert source.contains("Signed-By: /etc/apt/keyrings/nvidia-container-toolkit.asc")


def test_oci_prestart_hook(host):
    hook = json.loads(host.file("/usr/share/containers/oci/hooks.d/oci-nvidia-hook.json").content_string)
    assert hook["hook"]["path"] == "/usr/bin/nvidia-container-runtime-hook"
    assert hook["hook"]["args"] == ["nvidia-container-runtime-hook", "prestart"]
    assert hook["stages"] == ["prestart"]
    assert host.file("/usr/bin/nvidia-container-runtime-hook").is_executable


def test_containerd_config_has_nvidia_runtime_and_kept_the_rest(host, shape):
    if shape != "debian12":
        # converge.yml asks for containerd on the Debian 12 node only; the others have none to configure.
        assert not host.file("/etc/containerd").exists
        return
    config = host.file("/etc/containerd/config.toml").content_string
    assert config.count('[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]') == 1
    assert 'BinaryName = "/usr/bin/nvidia-container-runtime"' in config
    assert host.service("containerd").is_running


def test_cdi_spec_lists_the_8_gpus(host):
    spec = yaml.safe_load(host.file("/etc/cdi/nvidia.yaml").content_string)
    assert spec["kind"] == "nvidia.com/gpu"
    names = [device["name"] for device in spec["devices"]]
    assert names[:1] == ["0"] and names[-1] == "all"
    assert len(names) == 17


def test_container_cli_sees_driver(host, shape):
    listing = host.check_output("nvidia-container-cli -k list").splitlines()
    assert "/dev/nvidiactl" in listing
    # The driver the nvidia_driver role pinned for this OS (roles/gpuforge/defaults/main/gpu_stack.yml), in the
    # OS's library directory.
    pins = yaml.safe_load((PROJECT_ROOT / "roles/gpuforge/defaults/main/gpu_stack.yml").read_text(encoding="utf-8"))
    release = pins["gpuforge_nvidia_driver_versions"]["cuda"][shape]
    lib_dir = "/usr/lib64" if shape.startswith("rhel") else "/usr/lib/x86_64-linux-gnu"
    assert f"{lib_dir}/libnvidia-ml.so.{release}" in listing
    info = host.check_output("nvidia-container-cli info")
    assert info.count("Model:          Tesla V100-SXM2-16GB") == 8


def test_container_smoke_test_record(host, shape):
    """converge.yml ran the smoke test in bundle mode on the Debian 12 node: runc created a container on the node with
    the role's OCI hook file and with the CDI spec; each got the 8 simulated GPUs' device files and /dev/nvidiactl."""
    record_dir = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "validation"
    name = host.backend.get_hostname()
    if shape != "debian12":
        # Only the Debian 12 node has runc (prepare.yml) and runs privileged, as bundle mode needs.
        assert not (record_dir / f"container-smoke-{name}.json").exists()
        return
    record = json.loads((record_dir / f"container-smoke-{name}.json").read_text(encoding="utf-8"))
    checks = {check["check"]: check for check in record["records"]}  # node_check records
    assert {check["verdict"] for check in checks.values()} == {"PASS"}
    assert set(checks) == {
        "container_devices_oci_hook",
        "container_driver_libraries_oci_hook",
        "container_devices_cdi",
        "container_driver_libraries_cdi",
    }
    expected = sorted([f"/dev/nvidia{i}" for i in range(8)] + ["/dev/nvidiactl"])
    for method in ("oci_hook", "cdi"):
        devices = checks[f"container_devices_{method}"]["observed"]["devices"]
        assert sorted(devices) == expected
        assert devices["/dev/nvidiactl"] == [195, 255]
    # No runc container and no bundle directory is left behind on the node.
    assert host.check_output("find /tmp -maxdepth 1 -name 'gpuforge-smoke-*'") == ""
