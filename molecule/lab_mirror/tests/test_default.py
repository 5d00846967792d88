"""The lab node image, its simulated kernel and the signed mirror, checked on a live container."""

import json

import yaml

from gpuforge.paths import PROJECT_ROOT

SIM_PACKAGE = yaml.safe_load((PROJECT_ROOT / "lab/packages/packages.yml").read_text(encoding="utf-8"))["sim_package"]


def test_simulator_package_installed_from_mirror(host):
    package = host.package(SIM_PACKAGE["name"])
    assert package.is_installed
    assert package.version == SIM_PACKAGE["version"]
    policy = host.check_output("apt-cache policy gpuforge-lab-sim")
    assert "http://mirror/gpuforge-lab/tools" in policy


def test_mirror_signature_is_enforced(host):
    source = host.file("/etc/apt/sources.list.d/gpuforge-lab-tools.sources")
    assert source.contains("Signed-By: /etc/apt/keyrings/gpuforge-lab.asc")
    # A repository whose Release signature does not verify must be refused by apt.
    result = host.run(
        "apt-get update -o Dir::Etc::sourcelist=/dev/null -o Dir::Etc::sourceparts=/etc/apt/sources.list.d"
    )
    assert result.rc == 0
    assert "NO_PUBKEY" not in result.stderr and "not signed" not in result.stderr


def test_simulated_kernel_booted_with_hardware(host):
    hardware = json.loads(host.file("/etc/gpuforge-lab/hardware.json").content_string)
    assert hardware["gpu"]["count"] == 8
    assert host.service("gpuforge-lab-boot").is_valid
    lsmod = host.check_output("lsmod")
    # No blacklist yet: the in-box nouveau driver claims the GPUs at boot, as on a fresh server.
    assert any(line.split()[0] == "nouveau" for line in lsmod.splitlines()[1:])
    assert any(line.split()[0] == "mlx5_ib" for line in lsmod.splitlines()[1:])


def test_simulated_modprobe_refuses_unknown_module(host):
    result = host.run("modprobe nvidia")
    assert result.rc == 1
    assert "Module nvidia not found" in result.stderr
