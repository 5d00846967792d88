"""gpuforge_files: the mode of a path, and the atomic replace the modules that own files share."""

from __future__ import annotations

import os

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_files as files


class RenamingModule:
    """AnsibleModule.atomic_move's part that matters here: rename over the destination, or fail."""

    def __init__(self, fail=False):
        self.fail = fail

    def atomic_move(self, src, dest):
        if self.fail:
            raise OSError("read-only file system")
        os.rename(src, dest)


def test_mode_of_a_file_and_of_none(tmp_path):
    path = tmp_path / "f"
    assert files.file_mode(str(path)) is None
    path.write_text("x")
    path.chmod(0o640)
    assert files.file_mode(str(path)) == 0o640


def test_write_replaces_and_sets_the_mode_asked_for(tmp_path):
    path = tmp_path / "cuda.sources"
    path.write_bytes(b"old\n")
    path.chmod(0o600)
    files.write_atomic(RenamingModule(), str(path), b"new\n", 0o644)
    assert path.read_bytes() == b"new\n"
    assert files.file_mode(str(path)) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["cuda.sources"]


def test_a_failed_move_leaves_the_file_and_no_temporary(tmp_path):
    path = tmp_path / "cuda.pref"
    path.write_bytes(b"old\n")
    with pytest.raises(OSError, match="read-only"):
        files.write_atomic(RenamingModule(fail=True), str(path), b"new\n", 0o644)
    assert path.read_bytes() == b"old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["cuda.pref"]
