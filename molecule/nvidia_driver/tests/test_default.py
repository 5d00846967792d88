"""nvidia_driver on a DGX-1 lab node: packages from the mirror, nouveau replaced, modules, daemons, nvidia-smi."""

import json


def _lsmod_names(host) -> list[str]:
    return [line.split()[0] for line in host.check_output("lsmod").splitlines()[1:]]


def test_driver_packages_pinned_from_mirror(host):
    # V100 (Volta) needs the proprietary kernel modules: the open flavour must not be installed.
    for name in ("cuda-drivers-535", "nvidia-driver-535", "nvidia-kernel-dkms-535", "nvidia-smi-535"):
        package = host.package(name)
        assert package.is_installed, name
        assert package.version == "535.183.01-1", name
    assert not host.package("nvidia-kernel-open-dkms-535").is_installed
    assert not host.package("nvidia-fabricmanager-535").is_installed
    policy = host.check_output("apt-cache policy cuda-drivers-535")
    assert "http://mirror/cuda/repos/debian12/x86_64" in policy


def test_cuda_repository_is_signed(host):
    source = host.file("/etc/apt/sources.list.d/cuda.sources")
    assert source.contains("URIs: http://mirror/cuda/repos/debian12/x86_64/")
    assert source.contains("Signed-By: /etc/apt/keyrings/cuda.asc")


def test_nouveau_blacklisted_and_initramfs_rebuilt(host):
    blacklist = host.file("/etc/modprobe.d/blacklist-nouveau.conf")
    assert blacklist.contains("^blacklist nouveau$")
    assert blacklist.contains("^options nouveau modeset=0$")
    records = [
        json.loads(line) for line in host.file("/var/lib/gpuforge-lab/initramfs.log").content_string.splitlines()
    ]
    # Rebuilt once (idempotence: the second converge must not rebuild again), after the blacklist existed.
    assert len(records) == 1
    assert records[0]["argv"] == ["-u"]
    assert "nouveau" in records[0]["blacklisted"]


def test_module_table(host):
    names = _lsmod_names(host)
    assert "nvidia" in names
    assert "nvidia_uvm" in names
    assert "nouveau" not in names
    assert host.file("/etc/modules-load.d/nvidia.conf").contains("^nvidia$")
    assert host.file("/etc/modules-load.d/nvidia-uvm.conf").contains("^nvidia-uvm$")


def test_persistence_daemon(host):
    service = host.service("nvidia-persistenced")
    assert service.is_enabled
    assert service.is_running


def test_nvidia_smi_answers_with_8_gpus(host):
    listing = host.check_output("nvidia-smi -L").splitlines()
    assert len(listing) == 8
    assert listing[0].startswith("GPU 0: Tesla V100-SXM2-16GB (UUID: GPU-")
    name = host.check_output("nvidia-smi --query-gpu=gpu_name --format=csv,noheader --id=0")
    assert name.replace(" ", "-") == "Tesla-V100-SXM2-16GB"
    assert "Persistence Mode                      : Enabled" in host.check_output("nvidia-smi -q -i 0")
