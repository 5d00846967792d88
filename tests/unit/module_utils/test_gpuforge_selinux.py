"""gpuforge_selinux: `semodule -l` captured on Debian 12 (tests/fixtures/semodule/SOURCES.md), restorecon -v lines
in libselinux's format, nvidia-container-cli list."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError as BaseParseError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_selinux import (
    ParseError,
    parse_container_cli_list,
    parse_restorecon_verbose,
    parse_semodule_list,
    valid_module_name,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "semodule"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_debian12_store_one_name_per_line():
    parsed = parse_semodule_list(fixture("debian12_selinux-policy-default_l.txt"))
    assert len(parsed["names"]) == 331
    assert parsed["names"][:3] == ["accountsd", "acct", "acpi"]
    assert parsed["names"][-1] == "zosremote"
    assert "xserver" in parsed["names"] and "container" not in parsed["names"]
    assert "nvidia_container" not in parsed["names"]
    assert set(parsed["versions"].values()) == {None}


def test_debian12_store_with_gpuforge_modules():
    names = parse_semodule_list(fixture("debian12_selinux-policy-default_gpuforge_l.txt"))["names"]
    assert len(names) == 333
    assert names.index("infiniband") < names.index("nvidia_container")


def test_empty_store_prints_no_modules():
    assert fixture("debian12_empty_store_l.txt") == "No modules.\n"
    assert parse_semodule_list(fixture("debian12_empty_store_l.txt")) == {"names": [], "versions": {}}


def test_old_two_column_form():
    # policycoreutils before 2.4: printf("%s\t%s\n", name, version)
    parsed = parse_semodule_list("abrt\t1.4.1\ncontainer\t2.201.0\ninfiniband\t1.0\n")
    assert parsed["names"] == ["abrt", "container", "infiniband"]
    assert parsed["versions"] == {"abrt": "1.4.1", "container": "2.201.0", "infiniband": "1.0"}


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "printed nothing"),
        ("\n  \n", "printed nothing"),
        ("100 accountsd pp\n", "line 1"),  # -lfull's columns: priority first
        ("accountsd\nsemodule: SELinux policy is not managed\n", "line 2"),
        ("acct\n../etc/passwd\n", "line 2"),
        ("acct 1.0 extra\n", "line 1"),
        ("acct version-one\n", "line 1"),
    ],
    ids=["empty", "blank", "lfull", "error-text", "path", "three-columns", "word-version"],
)
def test_semodule_list_refuses_what_it_cannot_read(text, fragment):
    with pytest.raises(ParseError) as info:
        parse_semodule_list(text)
    assert fragment in str(info.value)
    assert str(info.value).startswith("semodule -l")
    assert isinstance(info.value, BaseParseError)


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        ("nvidia_container", True),
        ("infiniband", True),
        ("a.b-c_1", True),
        ("x", True),
        ("1abc", False),
        ("_abc", False),
        ("a..b", False),
        ("a.", False),
        ("a b", False),
        ("", False),
        (None, False),
        (5, False),
    ],
)
def test_module_names_as_libsemanage_accepts_them(name, valid):
    assert valid_module_name(name) is valid


def test_restorecon_lines():
    # libselinux selinux_restorecon.c: "%s %s from %s to %s\n", "Relabeled"/"Would relabel", path, old or
    # "<no context>", new.
    text = (
        "Relabeled /dev/nvidia0 from system_u:object_r:device_t:s0 to system_u:object_r:xserver_misc_device_t:s0\n"
        "Relabeled /var/lib/kubelet/a file from <no context> to system_u:object_r:container_var_lib_t:s0\n"
        "/home/x not reset as customized by admin to unconfined_u:object_r:user_home_t:s0\n"
        "Would relabel /dev/nvidiactl from system_u:object_r:device_t:s0 to "
        "system_u:object_r:xserver_misc_device_t:s0\n"
    )
    parsed = parse_restorecon_verbose(text)
    assert parsed["changes"] == [
        {
            "path": "/dev/nvidia0",
            "from": "system_u:object_r:device_t:s0",
            "to": "system_u:object_r:xserver_misc_device_t:s0",
            "applied": True,
        },
        {
            "path": "/var/lib/kubelet/a file",
            "from": None,
            "to": "system_u:object_r:container_var_lib_t:s0",
            "applied": True,
        },
        {
            "path": "/dev/nvidiactl",
            "from": "system_u:object_r:device_t:s0",
            "to": "system_u:object_r:xserver_misc_device_t:s0",
            "applied": False,
        },
    ]
    assert parsed["other"] == ["/home/x not reset as customized by admin to unconfined_u:object_r:user_home_t:s0"]


def test_restorecon_silent_where_selinux_is_disabled():
    assert parse_restorecon_verbose("") == {"changes": [], "other": []}


def test_container_cli_list():
    text = "/dev/nvidiactl\n/dev/nvidia0\n\n/usr/bin/nvidia-smi\n/dev/nvidia0\n/run/nvidia-persistenced/socket\n"
    assert parse_container_cli_list(text) == [
        "/dev/nvidiactl",
        "/dev/nvidia0",
        "/usr/bin/nvidia-smi",
        "/run/nvidia-persistenced/socket",
    ]
    assert parse_container_cli_list("") == []


@pytest.mark.parametrize("text", ["/dev/nvidia0\nnvidia-container-cli: initialization error\n", "/a\0b\n"])
def test_container_cli_list_refuses_other_text(text):
    with pytest.raises(ParseError, match="nvidia-container-cli list: line"):
        parse_container_cli_list(text)
