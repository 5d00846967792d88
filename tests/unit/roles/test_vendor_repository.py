"""vendor_repository: the apt preferences it writes parse back into the same pins, and the takeover regex finds
the other sources of exactly its URI (cuda-keyring's .list, NVIDIA's nvidia-container-toolkit.list, deb822
.sources) and nothing that only shares a prefix."""

from __future__ import annotations

import re

import pytest
from gpu_stack_render import RoleRender

from gpuforge.vendor_facts import Pin, parse_preferences

CUDA = "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64"
NCT = "https://nvidia.github.io/libnvidia-container/stable/deb/amd64"


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
    """The `contains` regex tasks/setup-Debian.yml hands to ansible.builtin.find (which applies
    re.compile(...).search to the whole file) for a repository URL."""
    render = RoleRender("vendor_repository", os_name, vendor_repository_name="repo", vendor_repository_url=url)
    return render.task_args("setup-Debian.yml", "Find other sources of the same repository")["contains"]


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
