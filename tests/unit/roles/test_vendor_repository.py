"""vendor_repository: the apt preferences it writes parse back into the same pins, the one
vendor_apt_repository call per repository gets the values the role was given, and the takeover regex
(module_utils/gpuforge_apt_sources.py, which that module applies) finds the other sources of exactly its URI
(cuda-keyring's .list, NVIDIA's nvidia-container-toolkit.list, deb822 .sources) and nothing that only shares a
prefix."""

from __future__ import annotations

import re

import pytest
import yaml
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_apt_sources
from gpu_stack_render import ROOT, RoleRender

from gpuforge.vendor_facts import Pin, parse_preferences

ROLE = ROOT / "roles" / "vendor_repository"
CUDA = "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64"
NCT = "https://nvidia.github.io/libnvidia-container/stable/deb/amd64"
KEY_URL = f"{CUDA}/3bf863cc.pub"
FINGERPRINT = "EB693B3035CD5710E231E123A4B469963BF863CC"
CUDA_VARS = {
    "vendor_repository_name": "cuda",
    "vendor_repository_url": CUDA,
    "vendor_repository_key_url": KEY_URL,
    "vendor_repository_key_fingerprint": FINGERPRINT,
}
PINS = [
    {"packages": ["cuda-drivers-550", "nvidia-driver*", "libnvidia-*"], "version": "550.90.07-*", "priority": 1001},
    {"packages": ["nvidia-fabricmanager-550"], "version": "550.90.07-1", "priority": 990},
]


def test_preferences_round_trip():
    pins = [
        {"packages": ["cuda-drivers-550", "nvidia-driver*", "libnvidia-*"], "version": "550.90.07-*", "priority": 1001},
        {"packages": ["nvidia-fabricmanager-550"], "version": "550.90.07-1", "priority": 990},
    ]
    text = RoleRender("vendor_repository", "debian12").template(
        "preferences.j2", vendor_repository_name="cuda", vendor_repository_apt_pins=pins
    )
    assert parse_preferences(text) == [
        Pin(("cuda-drivers-550", "nvidia-driver*", "libnvidia-*"), "550.90.07-*", 1001),
        Pin(("nvidia-fabricmanager-550",), "550.90.07-1", 990),
    ]


def test_preferences_priority_defaults_to_1001():
    text = RoleRender("vendor_repository", "ubuntu2204").template(
        "preferences.j2",
        vendor_repository_name="nvidia-container-toolkit",
        vendor_repository_apt_pins=[{"packages": ["nvidia-container-toolkit"], "version": "1.17.8-1"}],
    )
    assert parse_preferences(text) == [Pin(("nvidia-container-toolkit",), "1.17.8-1", 1001)]


def takeover_pattern(url: str, os_name: str = "debian12") -> str:
    """The takeover regex vendor_apt_repository applies with re.search to each whole .list/.sources file, for the
    URL tasks/setup-Debian.yml hands it."""
    render = RoleRender("vendor_repository", os_name, **{**CUDA_VARS, "vendor_repository_url": url})
    args = render.task_args("setup-Debian.yml", "Add the repository, trusting only its key")
    assert args["take_over"] is True
    return gpuforge_apt_sources.takeover_pattern(args["url"])


@pytest.mark.parametrize("url", [CUDA, CUDA + "/", CUDA + "//"])
@pytest.mark.parametrize(
    "other_source",
    [
        # cuda-keyring's /etc/apt/sources.list.d/cuda-debian12-x86_64.list
        f"deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] {CUDA}/ /\n",
        # the same line without the trailing slash on the URI, and as the file's last line without a newline
        f"deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] {CUDA} /",
        # a deb822 source of the same URI with another Signed-By
        f"Types: deb\nURIs: {CUDA}/\nSuites: /\nSigned-By: /usr/share/keyrings/cuda-archive-keyring.gpg\n",
        f"Types: deb\nURIs: {CUDA}/",
    ],
)
def test_takeover_finds_other_sources_of_the_same_uri(url, other_source):
    assert re.search(takeover_pattern(url), other_source)


@pytest.mark.parametrize(
    "unrelated",
    [
        f"deb [signed-by=/usr/share/keyrings/x.gpg] {CUDA}-extra/ /\n",
        f"Types: deb\nURIs: {CUDA}-extra/\nSuites: /\n",
        f"deb [signed-by=/usr/share/keyrings/x.gpg] {CUDA}/sub/ /\n",
        f"deb [signed-by=/usr/share/keyrings/x.gpg] {CUDA}_v2/ /\n",
        # the same path on another host or scheme is another URI for apt
        "deb https://mirror.example.com/compute/cuda/repos/debian12/x86_64/ /\n",
        f"deb http://{CUDA.removeprefix('https://')}/ /\n",
    ],
)
def test_takeover_leaves_repositories_that_only_share_a_prefix(unrelated):
    assert not re.search(takeover_pattern(CUDA), unrelated)


def test_takeover_finds_nvidia_container_toolkit_list_with_arch_variable():
    # NVIDIA's install guide writes stable/deb/nvidia-container-toolkit.list as published on
    # nvidia.github.io/libnvidia-container, with apt's $(ARCH) variable in place of amd64 and its own Signed-By:
    # apt expands it to the same URI as gpuforge's .sources, so it must be taken over too (M14).
    guide_list = (
        "deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] "
        "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /\n"
        "#deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] "
        "https://nvidia.github.io/libnvidia-container/experimental/deb/$(ARCH) /\n"
    )
    for os_name in ("debian12", "ubuntu2204", "ubuntu2404"):
        assert re.search(takeover_pattern(NCT, os_name), guide_list), os_name
    assert re.search(takeover_pattern(NCT), f"URIs: {NCT}/\n")
    experimental_only = "deb https://nvidia.github.io/libnvidia-container/experimental/deb/$(ARCH) /\n"
    assert not re.search(takeover_pattern(NCT), experimental_only)
    assert not re.search(takeover_pattern(NCT), "deb https://nvidia.github.io/libnvidia-container/stable/deb/arm64 /\n")


# ---------------------------------------------------------------------------------------------------------
# tasks/setup-Debian.yml: one vendor_apt_repository call per repository


def test_debian_path_makes_one_remote_call_per_repository():
    """The one module call (it reads the key's fingerprint itself: no gnupg install before it); no get_url/command/
    find/deb822_repository/template, and no set_fact or assert (the module checks the definition itself)."""
    tasks = yaml.safe_load((ROLE / "tasks" / "setup-Debian.yml").read_text(encoding="utf-8"))
    modules = [next(key for key in task if key.startswith(("ansible.builtin.", "gpuforge.cluster."))) for task in tasks]
    assert modules == ["gpuforge.cluster.vendor_apt_repository", "ansible.builtin.meta"]
    task = tasks[0]
    assert task["register"] == "vendor_repository_apt"
    assert task["notify"] == "Refresh the apt package index"
    handlers = yaml.safe_load((ROLE / "handlers" / "main.yml").read_text(encoding="utf-8"))
    assert [handler["name"] for handler in handlers] == [task["notify"]]


@pytest.mark.parametrize("os_name", ["debian12", "ubuntu2204", "ubuntu2404"])
def test_the_module_gets_the_repository_and_the_rendered_pins(os_name):
    render = RoleRender("vendor_repository", os_name, **CUDA_VARS, vendor_repository_apt_pins=PINS)
    args = render.task_args("setup-Debian.yml", "Add the repository, trusting only its key")
    preferences = args.pop("preferences")
    assert args == {
        "name": "cuda",
        "url": CUDA,
        "suites": ["/"],
        "components": [],
        "key_url": KEY_URL,
        "key_sha256": "",
        "key_fingerprint": FINGERPRINT,
        "take_over": True,
    }
    # the template module's rendering of preferences.j2, byte for byte: pin files on hosts stay as they are
    template = RoleRender("vendor_repository", os_name).template(
        "preferences.j2", vendor_repository_name="cuda", vendor_repository_apt_pins=PINS
    )
    assert preferences == template
    assert preferences.startswith("# Ansible managed\n# gpuforge vendor_repository 'cuda': ")
    assert preferences.endswith("Pin: version 550.90.07-1\nPin-Priority: 990\n")
    assert parse_preferences(preferences) == [
        Pin(("cuda-drivers-550", "nvidia-driver*", "libnvidia-*"), "550.90.07-*", 1001),
        Pin(("nvidia-fabricmanager-550",), "550.90.07-1", 990),
    ]


def test_without_pins_the_module_removes_the_pin_file():
    render = RoleRender("vendor_repository", "debian12", **CUDA_VARS)
    assert render.task_args("setup-Debian.yml", "Add the repository, trusting only its key")["preferences"] == ""


def test_the_module_gets_suites_components_checksum_and_takeover():
    render = RoleRender(
        "vendor_repository",
        "ubuntu2204",
        vendor_repository_name="gpuforge-gpfs",
        vendor_repository_url="https://repo.example.com/gpfs/5.1.9.3/ubuntu/",
        vendor_repository_suites=["jammy"],
        vendor_repository_components=["main", "contrib"],
        vendor_repository_key_url="https://repo.example.com/gpfs/site-repo-key.asc",
        vendor_repository_key_sha256="ab" * 32,
        vendor_repository_take_over="no",
    )
    args = render.task_args("setup-Debian.yml", "Add the repository, trusting only its key")
    assert (args["name"], args["url"], args["suites"], args["components"]) == (
        "gpuforge-gpfs",
        "https://repo.example.com/gpfs/5.1.9.3/ubuntu/",
        ["jammy"],
        ["main", "contrib"],
    )
    assert (args["key_sha256"], args["key_fingerprint"], args["take_over"]) == ("ab" * 32, "", False)


def test_only_the_versionlock_specs_no_entry_covers_are_added_again():
    """The lock task passes yum_versionlock only the specs `dnf versionlock list` does not cover yet (the module
    itself compares entries with bare names, so a covered spec would be added on every run). Entries as dnf prints
    them: name-epoch:version-release.arch, for a name-version spec (the driver's) and a name-version-release spec
    (DCGM's, whose next character is the arch's dot)."""
    tasks = yaml.safe_load((ROLE / "tasks" / "setup-RedHat.yml").read_text(encoding="utf-8"))
    task = next(t for t in tasks if t["name"].startswith("Lock the versions that must not move"))
    specs = [
        "nvidia-driver-535.183.01",
        "nvidia-kmod-common-535.183.01",
        "datacenter-gpu-manager-4-core-4.4.1-1",
        "datacenter-gpu-manager-4-cuda12-4.4.1-1",
    ]
    listed = [
        "nvidia-driver-3:535.183.01-1.el9.*",
        "datacenter-gpu-manager-4-core-1:4.4.1-1.*",
        "datacenter-gpu-manager-4-cuda12-1:4.5.2-1.*",  # another release of the name: not this spec
    ]
    render = RoleRender(
        "vendor_repository",
        "rhel9",
        vendor_repository_dnf_versionlock=specs,
        vendor_repository_locks={"stdout_lines": listed},
        **task["vars"],
    )
    assert render.var("vendor_repository_locks_missing") == [
        "nvidia-kmod-common-535.183.01",
        "datacenter-gpu-manager-4-cuda12-4.4.1-1",
    ]
    every = RoleRender(
        "vendor_repository",
        "rhel9",
        vendor_repository_dnf_versionlock=specs,
        vendor_repository_locks={
            "stdout_lines": [
                *listed,
                "nvidia-kmod-common-3:535.183.01-1.el9.*",
                "datacenter-gpu-manager-4-cuda12-1:4.4.1-1.*",
            ]
        },
        **task["vars"],
    )
    assert every.var("vendor_repository_locks_missing") == []
