"""nvidia_container_toolkit per OS: repository, key, pinned packages, nvidia-ctk command line, OCI hook."""

from __future__ import annotations

import json

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_apt_sources import repository_uri
from gpu_stack_render import RoleRender

BASE = "https://nvidia.github.io/libnvidia-container"
PINNED = [
    "nvidia-container-toolkit",
    "nvidia-container-toolkit-base",
    "libnvidia-container-tools",
    "libnvidia-container1",
]


FINGERPRINT = "C95B321B61E88C1809C4F759DDCAE044F796ECB0"


def repository(render: RoleRender, os_name: str, tasks_file: str) -> tuple[dict, RoleRender]:
    """The vars the role hands to vendor_repository, and vendor_repository rendered with them."""
    role, included = render.included_role(tasks_file, "Trust the libnvidia-container repository")
    assert role == "vendor_repository"
    return included, RoleRender("vendor_repository", os_name, **included)


@pytest.mark.parametrize("os_name", ["debian12", "ubuntu2204", "ubuntu2404"])
def test_apt_repository_key_and_packages(os_name):
    render = RoleRender("nvidia_container_toolkit", os_name)
    assert render.var("nvidia_container_toolkit_repo_url") == f"{BASE}/stable/deb/amd64"
    included, vendor = repository(render, os_name, "setup-Debian.yml")
    # Same file names as before vendor_repository, so existing hosts converge on the same source and key.
    assert included["vendor_repository_name"] == "nvidia-container-toolkit"
    assert (included["vendor_repository_key_url"], included["vendor_repository_key_fingerprint"]) == (
        f"{BASE}/gpgkey",
        FINGERPRINT,
    )
    # One vendor_apt_repository call: key /etc/apt/keyrings/nvidia-container-toolkit.asc (its keyring_dir default),
    # source nvidia-container-toolkit.sources trusting only that key.
    repo = vendor.task_args("setup-Debian.yml", "Add the repository, trusting only its key")
    assert repo["name"] == "nvidia-container-toolkit"
    assert (repo["key_url"], repo["key_fingerprint"]) == (f"{BASE}/gpgkey", FINGERPRINT)  # the fingerprint is checked
    assert (repository_uri(repo["url"]), repo["suites"], repo["components"]) == (f"{BASE}/stable/deb/amd64/", ["/"], [])
    packages = render.task("setup-Debian.yml", "Install the NVIDIA Container Toolkit")["name"]
    assert packages == [f"{name}=1.17.8-1" for name in PINNED]


@pytest.mark.parametrize("os_name", ["rhel8", "rhel9"])
def test_rpm_repository_key_and_packages(os_name):
    render = RoleRender("nvidia_container_toolkit", os_name)
    included, vendor = repository(render, os_name, "setup-RedHat.yml")
    assert included["vendor_repository_name"] == "nvidia-container-toolkit"
    repo = vendor.task_args("setup-RedHat.yml", "Add the repository with signature checking")
    assert repo["name"] == "nvidia-container-toolkit"
    assert repo["baseurl"] == f"{BASE}/stable/rpm/$basearch"
    # Stricter than NVIDIA's own .repo (repo_gpgcheck=1, gpgcheck=0): the packages' signatures are checked too.
    assert (repo["gpgcheck"], repo["repo_gpgcheck"], repo["gpgkey"]) == (True, True, f"{BASE}/gpgkey")
    key = vendor.task_args("setup-RedHat.yml", "Import the signing key")
    assert (key["key"], key["fingerprint"]) == (f"{BASE}/gpgkey", FINGERPRINT)
    assert vendor.conditions("setup-RedHat.yml", "Import the signing key") == [True]
    packages = render.task("setup-RedHat.yml", "Install the NVIDIA Container Toolkit")["name"]
    assert packages == [f"{name}-1.17.8-1" for name in PINNED]


def test_ctk_command_line_per_runtime():
    render = RoleRender("nvidia_container_toolkit", "debian12", nvidia_container_toolkit_runtime="containerd")
    assert render.var("nvidia_container_toolkit_ctk_argv") == [
        "nvidia-ctk",
        "runtime",
        "configure",
        "--runtime=containerd",
        "--config=/etc/containerd/config.toml",
    ]
    docker = RoleRender(
        "nvidia_container_toolkit",
        "rhel9",
        nvidia_container_toolkit_runtime="docker",
        nvidia_container_toolkit_set_as_default=True,
    )
    assert docker.var("nvidia_container_toolkit_ctk_argv")[-2:] == [
        "--config=/etc/docker/daemon.json",
        "--set-as-default",
    ]


def test_runtimes_split_between_hook_and_ctk():
    render = RoleRender("nvidia_container_toolkit", "debian12", nvidia_container_toolkit_runtimes=["crio", "docker"])
    assert render.var("nvidia_container_toolkit_hook_runtimes") == ["crio"]
    assert render.var("nvidia_container_toolkit_ctk_runtimes") == ["docker"]


def test_oci_hook_json():
    hook = json.loads(RoleRender("nvidia_container_toolkit", "rhel9").template("oci-nvidia-hook.json.j2"))
    assert hook["version"] == "1.0.0"
    assert hook["hook"]["path"] == "/usr/bin/nvidia-container-runtime-hook"
    assert hook["hook"]["args"] == ["nvidia-container-runtime-hook", "prestart"]
    assert hook["stages"] == ["prestart"]
    assert hook["when"] == {"always": True, "commands": [".*"]}
