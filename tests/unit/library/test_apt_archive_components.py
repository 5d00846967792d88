"""apt_archive_components: the host's own source files decide (one-line and deb822), check mode writes nothing,
a second run changes nothing, modes are kept, and a host without an archive entry is warned about."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ansible.module_utils.common.warnings import get_warning_messages
from ansible_collections.gpuforge.cluster.plugins.modules import apt_archive_components

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "apt"


def host(tmp_path, sources_list=None, sources=()):
    """An /etc/apt of the given files under tmp_path; returns the module arguments that point at it."""
    folder = tmp_path / "sources.list.d"
    folder.mkdir()
    if sources_list:
        shutil.copy(FIXTURES / sources_list, tmp_path / "sources.list")
    for name in sources:
        shutil.copy(FIXTURES / name, folder / "debian.sources")
    vendor = "X-Repolib-Name: cuda\nSuites: /\nTypes: deb\nURIs: http://mirror/cuda/repos/debian12/x86_64/\n"
    (folder / "cuda.sources").write_text(vendor)
    return {
        "release": "bookworm",
        "components": ["contrib"],
        "sources_list": str(tmp_path / "sources.list"),
        "sources_dir": str(folder),
    }


def test_an_installer_host_gets_contrib_in_sources_list(tmp_path, ansible_module):
    args = host(tmp_path, sources_list="debian12-installer-sources.list")
    os.chmod(args["sources_list"], 0o640)
    result = ansible_module(apt_archive_components, args, diff=True)
    assert result["changed"] and result["files_changed"] == [args["sources_list"]]
    assert result["archive_entries"] == 6
    text = Path(args["sources_list"]).read_text()
    assert "deb http://deb.debian.org/debian/ bookworm main non-free-firmware contrib\n" in text
    assert result["diff"][0]["before_header"] == args["sources_list"] and "contrib" in result["diff"][0]["after"]
    # The file keeps its mode; the vendor's .sources is not touched.
    assert os.stat(args["sources_list"]).st_mode & 0o7777 == 0o640
    assert "Components" not in (tmp_path / "sources.list.d" / "cuda.sources").read_text()
    again = ansible_module(apt_archive_components, args)
    assert not again["changed"] and again["archive_entries"] == 6


def test_an_image_host_gets_contrib_in_debian_sources(tmp_path, ansible_module):
    args = host(tmp_path, sources=["debian12-image-debian.sources"])
    result = ansible_module(apt_archive_components, args)
    path = str(tmp_path / "sources.list.d" / "debian.sources")
    assert result["changed"] and result["files_changed"] == [path] and result["archive_entries"] == 2
    assert Path(path).read_text().count("Components: main contrib\n") == 2


def test_check_mode_reports_and_writes_nothing(tmp_path, ansible_module):
    args = host(tmp_path, sources=["debian12-image-debian.sources"])
    before = (tmp_path / "sources.list.d" / "debian.sources").read_text()
    result = ansible_module(apt_archive_components, args, check_mode=True)
    assert result["changed"] and result["archive_entries"] == 2
    assert (tmp_path / "sources.list.d" / "debian.sources").read_text() == before


def test_no_archive_entry_is_a_warning_and_no_change(tmp_path, ansible_module, capsys):
    args = host(tmp_path)
    result = ansible_module(apt_archive_components, args)
    assert not result["changed"] and result["archive_entries"] == 0
    # ansible-core collects module warnings, or prints them at once when a controller display is already set up in
    # this test process (test order decides): either way the warning is there.
    said = [*get_warning_messages(), capsys.readouterr().err]
    assert any("no entry of the bookworm archive" in text for text in said)


def test_an_unreadable_file_fails_naming_it(tmp_path, ansible_module):
    args = host(tmp_path)
    (tmp_path / "sources.list.d" / "broken.list").write_bytes(b"deb http://x bookworm main \xff\n")
    result = ansible_module(apt_archive_components, args, expect_failure=True)
    assert "broken.list" in result["msg"]
