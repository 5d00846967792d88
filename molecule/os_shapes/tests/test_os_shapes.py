"""The lab's OS shapes with the NVIDIA driver: Ansible's facts as on the real OS, the OS's own package manager.

Facts recorded from the real OSes (real_os_facts.yml, sources there) are compared with those the converge gathered
on each node. On RHEL 9 the driver comes through dnf from the mirror's signed RPM repository, its nvidia-driver
module stream enabled and the driver packages version-locked; on Ubuntu 22.04 and 24.04 through apt from NVIDIA's
ubuntu2204 and ubuntu2404 repository subsets, pinned although newer builds are published. Names and versions:
vendor_facts/nvidia-cuda/<os>.yml.
"""

import json
from pathlib import Path

import pytest
import yaml

from gpuforge import vendor_facts
from gpuforge.paths import PROJECT_ROOT

REAL_FACTS = yaml.safe_load((Path(__file__).parent / "real_os_facts.yml").read_text(encoding="utf-8"))
PINS = yaml.safe_load((PROJECT_ROOT / "roles/gpuforge/defaults/main/gpu_stack.yml").read_text(encoding="utf-8"))


def _shape(host) -> str:
    name = host.backend.get_hostname()
    return next(shape for shape in REAL_FACTS if name.endswith("-" + shape))


def _release(shape: str) -> str:
    return PINS["gpuforge_nvidia_driver_versions"]["cuda"][shape]


def _lsmod_names(host) -> list[str]:
    return [line.split()[0] for line in host.check_output("lsmod").splitlines()[1:]]


def test_facts_are_those_of_the_real_os(host):
    shape = _shape(host)
    gathered = json.loads(host.file("/root/gpuforge-os-facts.json").content_string)
    assert gathered == REAL_FACTS[shape]["facts"]


def test_userland_beneath_is_debian(host):
    # What docs/lab.md says: the package manager is the OS's, the userland Debian's.
    assert host.file("/etc/debian_version").exists
    assert host.run("dpkg-query -W -f='${Version}' libc6").stdout.startswith("2.36")


def test_driver_installed_through_the_os_package_manager_on_its_pinned_release(host):
    shape = _shape(host)
    release = _release(shape)
    if shape == "rhel9":
        # rpmsign (rpm 4.18) adds a header signature: tag RSAHEADER.
        query_format = "%{EPOCH}:%{VERSION}-%{RELEASE} %{RSAHEADER:pgpsig}\\n"
        query = host.check_output(f"rpm -q --qf '{query_format}' nvidia-driver-cuda")
        assert query.startswith(f"3:{release}-"), query
        # Signed by the key the repository's gpgcheck trusts (the lab key, imported by rpm_key).
        assert "Key ID" in query, query
        assert host.run("dpkg-query -W nvidia-driver-cuda").rc != 0
    else:
        branch = release.split(".")[0]
        for name in (
            f"nvidia-driver-{branch}",
            f"nvidia-utils-{branch}",
            f"nvidia-dkms-{branch}",
            f"cuda-drivers-{branch}",
        ):
            package = host.package(name)
            assert package.is_installed, name
            assert package.version.startswith(release + "-"), (name, package.version)
        cuda = vendor_facts.repository(f"nvidia-cuda/{shape}")
        assert cuda.versions(f"nvidia-driver-{branch}")[-1].split("-")[0] != release, "no newer build: proves nothing"
        assert not host.package(f"nvidia-driver-{branch}-open").is_installed


def test_rhel_module_stream_enabled_and_versions_locked(host):
    if _shape(host) != "rhel9":
        pytest.skip("RHEL only: dnf module streams and versionlock")
    release = _release("rhel9")
    branch = release.split(".")[0]
    modules = host.check_output("dnf -q --cacheonly module list --enabled nvidia-driver")
    assert f"{branch}-dkms [e]" in modules, modules
    locks = host.check_output("dnf -q versionlock list")
    for name in ("nvidia-driver", "nvidia-driver-cuda", "nvidia-modprobe", "nvidia-persistenced"):
        assert f"{name}-3:{release}-" in locks, (name, locks)
    repo = host.file("/etc/yum.repos.d/cuda.repo")
    assert repo.contains("^gpgcheck *= *1"), repo.content_string
    # The dkms stream's kernel module package, at the release (it carries the lab's module markers).
    assert host.package("kmod-nvidia-latest-dkms").version == release


def test_ubuntu_sources_are_the_ubuntu_archive_and_nvidia_repository(host):
    shape = _shape(host)
    if not shape.startswith("ubuntu"):
        pytest.skip("Ubuntu only")
    codename = REAL_FACTS[shape]["facts"]["distribution_release"]
    assert not host.file("/etc/apt/sources.list.d/debian.sources").exists
    assert host.file("/etc/apt/sources.list").contains(f" {codename}-security ")
    assert host.file("/etc/apt/sources.list.d/cuda.sources").contains(f"/cuda/repos/{shape}/x86_64/")
    assert host.run("apt-get update").rc == 0


def test_modules_loaded_and_nvidia_smi_answers(host):
    shape = _shape(host)
    names = _lsmod_names(host)
    for module in ("nvidia", "nvidia_uvm"):
        assert module in names, names
    assert "nouveau" not in names
    out = host.check_output("nvidia-smi --query-gpu=driver_version --format=csv,noheader")
    assert out.splitlines() == [_release(shape)] * 8, out


def test_gpu_selinux_changes_nothing_on_ubuntu(host):
    """converge.yml's gpu_selinux play: Ubuntu runs AppArmor, SELinux is disabled, and the role installed nothing."""
    if _shape(host) == "rhel9":
        pytest.skip("molecule/gpu_selinux runs the role on RHEL 9 with SELinux enabled")
    decided = json.loads(host.file("/root/gpuforge-gpu-selinux.json").content_string)
    assert decided["enabled"] is False and decided["selinux_status"] != "enabled", decided
    for package in ("selinux-policy-default", "selinux-policy-dev", "semodule-utils", "checkpolicy"):
        assert host.run(f"dpkg-query -W -f='${{Status}}' {package}").stdout != "install ok installed", package
    assert not host.file("/var/lib/gpuforge/selinux").exists
