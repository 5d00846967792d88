"""nvidia_driver per OS: repository URLs, keys and package names for RHEL 8/9, Ubuntu 22.04/24.04, Debian 12."""

from __future__ import annotations

import pytest
from gpu_stack_render import RoleRender

CUDA = "https://developer.download.nvidia.com/compute/cuda/repos"


def driver(os_name: str, **extra) -> RoleRender:
    return RoleRender("nvidia_driver", os_name, **extra)


@pytest.mark.parametrize(
    ("os_name", "repo"),
    [
        ("debian12", f"{CUDA}/debian12/x86_64"),
        ("ubuntu2204", f"{CUDA}/ubuntu2204/x86_64"),
        ("ubuntu2404", f"{CUDA}/ubuntu2404/x86_64"),
        ("rhel8", f"{CUDA}/rhel8/x86_64"),
        ("rhel9", f"{CUDA}/rhel9/x86_64"),
    ],
)
def test_cuda_repository_url(os_name, repo):
    assert driver(os_name).var("nvidia_driver_cuda_repo_url") == repo


def test_flavour_follows_gpu_generation_unless_set():
    assert (
        driver("debian12", gpuforge_gpu_architecture="Volta").var("nvidia_driver_kernel_module_flavor_effective")
        == "proprietary"
    )
    assert (
        driver("debian12", gpuforge_gpu_architecture="Hopper").var("nvidia_driver_kernel_module_flavor_effective")
        == "open"
    )
    assert (
        driver("debian12", gpuforge_gpu_architecture="Turing").var("nvidia_driver_kernel_module_flavor_effective")
        == "open"
    )
    explicit = driver("debian12", gpuforge_gpu_architecture="Ampere", nvidia_driver_kernel_module_flavor="proprietary")
    assert explicit.var("nvidia_driver_kernel_module_flavor_effective") == "proprietary"
    assert driver("debian12").var("nvidia_driver_kernel_module_flavor_effective") == ""


def _apt_names(render: RoleRender) -> list[str]:
    return render.task("setup-Debian.yml", "Install the driver packages")["name"]


def test_debian12_packages_are_unversioned_with_the_release_pinned():
    # NVIDIA's debian12 repository: nvidia-kernel(-open)-dkms carry no branch in the name (vendor_facts).
    assert _apt_names(driver("debian12", gpuforge_gpu_architecture="Volta"))[:2] == [
        "nvidia-kernel-dkms=550.90.07-*",
        "cuda-drivers-550=550.90.07-*",
    ]
    hopper = driver("debian12", gpuforge_gpu_architecture="Hopper")
    assert _apt_names(hopper)[0] == "nvidia-kernel-open-dkms=550.90.07-*"


def test_site_release_sets_the_branch():
    render = driver("debian12", gpuforge_gpu_architecture="Volta", gpuforge_nvidia_driver_version="570.195.03")
    assert render.var("nvidia_driver_branch") == "570"
    assert _apt_names(render)[:2] == ["nvidia-kernel-dkms=570.195.03-*", "cuda-drivers-570=570.195.03-*"]
    assert all(name.endswith("=570.195.03-*") for name in _apt_names(render))


@pytest.mark.parametrize("os_name", ["ubuntu2204", "ubuntu2404"])
def test_ubuntu_cuda_and_canonical_sources(os_name):
    assert _apt_names(driver(os_name, gpuforge_gpu_architecture="Hopper")) == [
        "nvidia-driver-535-open=535.183.01-*",
        "cuda-drivers-535=535.183.01-*",
        "nvidia-modprobe=535.183.01-*",
    ]
    canonical = driver(os_name, gpuforge_gpu_architecture="Volta", nvidia_driver_source="canonical")
    if os_name == "ubuntu2404":
        # No canonical 535 release on 24.04: the archive's 535-server builds are transitional to 580 (review 2, F4).
        assert canonical.var("nvidia_driver_version") == ""
        assert canonical.refused("main.yml", REFUSE)
        return
    assert _apt_names(canonical) == ["nvidia-headless-535-server=535.309.01-*", "nvidia-utils-535-server=535.309.01-*"]
    assert canonical.var("nvidia_driver_header_packages")[0].startswith("linux-headers-")
    assert not canonical.refused("main.yml", REFUSE)


def test_canonical_transitional_branch_is_refused_naming_the_branch_it_installs():
    # Second vendor review, F4: noble's nvidia-graphics-drivers-535-server 535.309.01-0ubuntu0.24.04.2 binaries are
    # transitional packages to the 580 server branch; a "=535.309.01-*" pin selects them and R580 is installed.
    render = driver(
        "ubuntu2404",
        gpuforge_gpu_architecture="Volta",
        nvidia_driver_source="canonical",
        gpuforge_nvidia_driver_version="535.309.01",
    )
    assert render.refused("main.yml", REFUSE)
    message = " ".join(render.message("main.yml", REFUSE).split())
    assert "535-server packages on 24.04 are transitional packages to the 580 server branch" in message
    assert "use nvidia_driver_source cuda" in message
    jammy = driver("ubuntu2204", gpuforge_gpu_architecture="Volta", nvidia_driver_source="canonical")
    assert "transitional" not in jammy.message("main.yml", REFUSE)


def test_debian_key_and_fingerprint():
    render = driver("ubuntu2204")
    assert (
        render.expr("{{ gpuforge_cuda_repo_key_url or (nvidia_driver_cuda_repo_url ~ '/3bf863cc.pub') }}")
        == f"{CUDA}/ubuntu2204/x86_64/3bf863cc.pub"
    )
    assert render.var("gpuforge_cuda_repo_key_fingerprint") == "EB693B3035CD5710E231E123A4B469963BF863CC"


@pytest.mark.parametrize(("os_name", "major"), [("rhel8", "8"), ("rhel9", "9")])
def test_rhel_streams_epel_and_key(os_name, major):
    dkms = driver(os_name, gpuforge_gpu_architecture="Volta")
    assert dkms.var("nvidia_driver_rhel_packages")[:2] == ["@nvidia-driver:535-dkms", "nvidia-driver-535.183.01"]
    assert dkms.var("nvidia_driver_rhel_needs_epel") is True
    from role_yaml import trusted

    tasks = {
        t["name"]: t
        for t in __import__("yaml").safe_load(
            (dkms.role_dir / "tasks" / "setup-RedHat.yml").read_text(encoding="utf-8")
        )
    }
    cuda = dkms.templar.template(trusted(next(t for n, t in tasks.items() if n.startswith("Trust the CUDA"))["vars"]))
    assert cuda["vendor_repository_key_url"] == f"{CUDA}/rhel{major}/x86_64/D42D0685.pub"
    assert cuda["vendor_repository_key_fingerprint"] == "610C7B14E068A878070DA4E99CD0A493D42D0685"
    assert cuda["vendor_repository_url"] == f"{CUDA}/rhel{major}/x86_64"
    assert cuda["vendor_repository_dnf_versionlock"][0] == "nvidia-driver-535.183.01"
    open_stream = driver(os_name, gpuforge_gpu_architecture="Hopper")
    assert open_stream.var("nvidia_driver_rhel_packages")[0] == "@nvidia-driver:535-open"
    precompiled = driver(os_name, gpuforge_gpu_architecture="Hopper", nvidia_driver_rhel_install="precompiled")
    assert precompiled.var("nvidia_driver_rhel_packages")[0] == "@nvidia-driver:535"
    assert precompiled.var("nvidia_driver_rhel_needs_epel") is False
    assert dkms.var("nvidia_driver_header_packages") == [
        f"kernel-devel-{dkms.var('ansible_facts.kernel')}",
        f"kernel-headers-{dkms.var('ansible_facts.kernel')}",
    ]
    assert dkms.var("nvidia_driver_initramfs_command") == ["dracut", "--force"]


def test_rhel_versionlock_holds_dcgm_when_it_is_installed_and_the_driver_guard_pins_only_the_driver():
    on = driver("rhel9", gpuforge_gpu_architecture="Hopper", nvidia_driver_dcgm_enabled=True)
    locks = on.var("nvidia_driver_dnf_versionlock")
    assert locks[-2:] == ["datacenter-gpu-manager-4-core-4.4.1-1", "datacenter-gpu-manager-4-cuda12-4.4.1-1"]
    assert "nvidia-driver-535.183.01" in locks
    (pin,) = on.var("nvidia_driver_closure_guard_pins")
    assert pin["version"] == "535.183.01-*" and not [name for name in pin["packages"] if "datacenter" in name]
    off = driver("rhel9", gpuforge_gpu_architecture="Hopper", nvidia_driver_dcgm_enabled=False)
    assert not [name for name in off.var("nvidia_driver_dnf_versionlock") if "datacenter" in name]


def test_fabricmanager_package_names():
    assert driver("debian12").var("nvidia_driver_fabricmanager_package") == "nvidia-fabricmanager-550"
    assert driver("ubuntu2204").var("nvidia_driver_fabricmanager_package") == "nvidia-fabricmanager-535"
    assert driver("rhel9").var("nvidia_driver_fabricmanager_package") == "nvidia-fabric-manager-535.183.01"
    assert driver("debian12", gpuforge_gpu_nvswitch=True).var("nvidia_driver_fabricmanager") is True
    assert driver("debian12").var("nvidia_driver_fabricmanager") is False


def test_services_start_in_order_persistenced_fabric_manager_dcgm():
    """One systemd_units call (tasks/services.yml) after DCGM's install: each daemon only when its feature is on."""
    started = {"enabled": True, "state": "started"}
    # DCGM is on by default: validation runs its diagnostic (gpuforge_validate_dcgm defaults to true).
    assert driver("debian12").var("nvidia_driver_services") == [
        {"name": "nvidia-persistenced", **started},
        {"name": "nvidia-dcgm", **started},
    ]
    off = driver("debian12", gpuforge_validate_dcgm=False)
    assert off.var("nvidia_driver_services") == [{"name": "nvidia-persistenced", **started}]
    assert (
        driver("debian12", nvidia_driver_persistenced=False, gpuforge_validate_dcgm=False).var("nvidia_driver_services")
        == []
    )
    units = driver("debian12", gpuforge_gpu_nvswitch=True, nvidia_driver_dcgm_enabled=True).var(
        "nvidia_driver_services"
    )
    assert [unit["name"] for unit in units] == ["nvidia-persistenced", "nvidia-fabricmanager", "nvidia-dcgm"]
    assert all(unit["enabled"] is True and unit["state"] == "started" for unit in units)


def test_lab_overrides_point_at_the_mirror():
    from gpu_stack_render import ROOT, load_yaml

    lab = load_yaml(ROOT / "inventories" / "lab" / "group_vars" / "all" / "gpu_stack.yml")
    lab.update(
        gpuforge_lab_mirror_url="http://mirror",
        gpuforge_lab_mirror_key_fingerprint="ABC",
        gpuforge_lab_mirror_key_sha256="00",
        gpuforge_lab_node_profile="dgx1-v100-edr",  # the inventory's gpuforge_lab_profile (no env lookup here)
    )
    render = driver("debian12", **lab)
    assert render.var("nvidia_driver_cuda_repo_url") == "http://mirror/cuda/repos/debian12/x86_64"
    assert render.var("nvidia_driver_kernel_module_flavor_effective") == "proprietary"
    assert render.var("nvidia_driver_kernel_headers") is False
    assert render.var("gpuforge_cuda_repo_key_fingerprint") == "ABC"


REFUSE = "Refuse unsupported systems and inconsistent settings"


@pytest.mark.parametrize(
    ("extra", "refused"),
    [
        ({"nvidia_driver_dcgm_enabled": True}, False),  # the CUDA repository and the pinned version: fine
        ({"nvidia_driver_dcgm_enabled": True, "nvidia_driver_dcgm_version": ""}, True),
        ({"nvidia_driver_dcgm_enabled": True, "nvidia_driver_source": "ubuntu"}, True),
        ({"nvidia_driver_dcgm_enabled": False, "nvidia_driver_dcgm_version": ""}, False),
    ],
)
def test_dcgm_refused_without_the_cuda_repository_or_a_pin(extra, refused):
    # DCGM's checks are in the role's one refusal (main.yml), not a task of their own in dcgm.yml.
    os_name = "ubuntu2204" if extra.get("nvidia_driver_source") == "ubuntu" else "debian12"
    render = driver(os_name, gpuforge_gpu_architecture="Volta", **extra)
    # The same host and settings but for DCGM's: the refusal follows DCGM's settings alone.
    assert render.refused("main.yml", REFUSE) is refused
    message = " ".join(render.message("main.yml", REFUSE).split())
    assert ("DCGM (nvidia_driver_dcgm_enabled) needs nvidia_driver_source cuda" in message) is bool(
        extra["nvidia_driver_dcgm_enabled"]
    )
    if refused and "nvidia_driver_dcgm_version" in extra:
        assert "a pinned nvidia_driver_dcgm_version (got '')." in message
