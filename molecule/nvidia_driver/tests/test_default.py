"""nvidia_driver on a DGX-1 lab node: packages from the mirror, nouveau replaced, modules, daemons, nvidia-smi.

Package names and the published versions come from the vendor facts registry (vendor_facts/nvidia-cuda/
debian12.yml), the release from the pin table: the mirror also publishes newer competing builds, and the
closure must still be on the pinned release. side_effect.yml removes the pin and upgrades (what an unpinned
install does), checks that the role's verify step catches the floated driver, and converges back."""

import json

import yaml

from gpuforge import vendor_facts
from gpuforge.paths import PROJECT_ROOT

CUDA = vendor_facts.repository("nvidia-cuda/debian12")
PINS = yaml.safe_load((PROJECT_ROOT / "roles/gpuforge/defaults/main/gpu_stack.yml").read_text(encoding="utf-8"))
RELEASE = PINS["gpuforge_nvidia_driver_versions"]["cuda"]["debian12"]
BRANCH = RELEASE.split(".")[0]


def _lsmod_names(host) -> list[str]:
    return [line.split()[0] for line in host.check_output("lsmod").splitlines()[1:]]


def test_driver_closure_on_the_pinned_release_although_newer_builds_are_published(host):
    # V100 (Volta) needs the proprietary kernel modules: the open flavour must not be installed.
    newest = CUDA.versions("nvidia-driver")[-1]
    assert newest != f"{RELEASE}-1", "the registry publishes no newer build: the pin would prove nothing"
    for name in (f"cuda-drivers-{BRANCH}", "nvidia-driver", "nvidia-kernel-dkms", "nvidia-smi", "nvidia-modprobe"):
        package = host.package(name)
        assert package.is_installed, name
        assert package.version == f"{RELEASE}-1", name
        assert package.version in CUDA.versions(name), name
    assert not host.package("nvidia-kernel-open-dkms").is_installed
    assert not host.package(f"nvidia-fabricmanager-{BRANCH}").is_installed
    policy = host.check_output("apt-cache policy nvidia-driver")
    assert f"http://mirror/{CUDA.lab_path}" in policy
    assert newest in policy


def test_cuda_repository_is_signed_and_pinned(host):
    source = host.file("/etc/apt/sources.list.d/cuda.sources")
    assert source.contains(f"URIs: http://mirror/{CUDA.lab_path}/")
    assert source.contains("Signed-By: /etc/apt/keyrings/cuda.asc")
    pins = vendor_facts.parse_preferences(host.file("/etc/apt/preferences.d/cuda.pref").content_string)
    # The driver's closure on its release; DCGM (enabled in the lab inventory) on its version, every DCGM package.
    defaults = yaml.safe_load((PROJECT_ROOT / "roles/nvidia_driver/defaults/main.yml").read_text(encoding="utf-8"))
    assert [(pin.version, pin.priority) for pin in pins] == [
        (f"{RELEASE}-*", 1001),
        (defaults["nvidia_driver_dcgm_version"], 1001),
    ]
    assert "datacenter-gpu-manager-4-*" in pins[1].packages
    assert "libgl1-nvidia-*" in pins[0].packages  # the GL closure (second vendor review, F3)


def test_cuda_keyrings_own_source_was_taken_over(host):
    # prepare.yml wrote cuda-keyring's list for the same URI with another Signed-By; apt would refuse both.
    assert not host.file("/etc/apt/sources.list.d/cuda-debian12-x86_64.list").exists
    assert host.run("apt-get update").rc == 0


def test_debian_contrib_enabled_for_the_driver(host):
    # NVIDIA's Debian instructions enable contrib: the kernel module package needs nvidia-installer-cleanup.
    assert host.file("/etc/apt/sources.list.d/debian.sources").contains("^Components: main contrib$")
    assert host.package("nvidia-installer-cleanup").is_installed


def test_side_effect_caught_the_floated_driver(host):
    record = json.loads(host.file("/root/gpuforge-side-effect.json").content_string)
    assert record["floated_to"] == CUDA.versions("nvidia-smi")[-1].rsplit("-", 1)[0]
    assert record["failed_task"] == "The driver answers with the pinned release and the expected GPUs"
    assert f"wanted {RELEASE}" in record["message"]


def test_nouveau_blacklisted_and_initramfs_rebuilt(host):
    blacklist = host.file("/etc/modprobe.d/blacklist-nouveau.conf")
    assert blacklist.contains("^blacklist nouveau$")
    assert blacklist.contains("^options nouveau modeset=0$")
    records = [
        json.loads(line) for line in host.file("/var/lib/gpuforge-lab/initramfs.log").content_string.splitlines()
    ]
    # Rebuilt by the first converge and by side_effect.yml's converge that downgraded the floated packages;
    # the idempotence step between them must not have rebuilt it (it reports changed=0).
    assert len(records) == 2
    assert [record["argv"] for record in records] == [["-u"], ["-u"]]
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


def test_the_closure_guard_refused_the_unlocked_transaction_naming_the_package_and_both_versions(host):
    # side_effect.yml: the lock lost its GL patterns and the GL library was removed; the mirror publishes newer builds
    # (570.x), so apt resolves the driver's GL closure off the release and the guard stopped the role before installing.
    record = json.loads(host.file("/root/gpuforge-closure-guard.json").content_string)
    assert record["failed_task"] == "Refuse a driver transaction that apt would resolve off the pinned release"
    newest = CUDA.versions("libgl1-nvidia-glvnd-glx")[-1]
    assert "libgl1-nvidia-glvnd-glx" in record["message"]
    assert f"= {RELEASE}-1" in record["message"] and newest in record["message"]
    assert record["installed_after"] == "not installed"


def test_dcgm_pinned_from_the_cuda_repository_and_its_diagnostic_runs(host):
    # The lab inventory enables DCGM (nvidia_driver_dcgm_enabled); names and versions from the registry.
    defaults = yaml.safe_load((PROJECT_ROOT / "roles/nvidia_driver/defaults/main.yml").read_text(encoding="utf-8"))
    name, version = defaults["nvidia_driver_dcgm_package"], defaults["nvidia_driver_dcgm_version"]
    assert version in CUDA.versions(name)
    package = host.package(name)
    assert package.is_installed
    assert package.version == version
    service = host.service("nvidia-dcgm")
    assert service.is_enabled
    assert service.is_running
    # dcgmi talks to the running host engine; level 1 passes on a healthy node, every GPU judged.
    diag = json.loads(host.check_output("dcgmi diag -r 1 -j"))
    text = json.dumps(diag)
    assert '"Fail"' not in text
    assert "software" in text.lower()
