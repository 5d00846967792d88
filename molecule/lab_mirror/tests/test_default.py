"""The lab node image, its simulated kernel and the signed mirror, checked on a live container."""

import json


def test_simulator_package_installed_from_mirror(host):
    package = host.package("gpuforge-lab-sim")
    assert package.is_installed
    assert package.version == "1.0.0-1"
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
