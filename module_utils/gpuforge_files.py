"""Files on the managed node, for modules that write what they own: the mode of a path, and an atomic replace
that leaves the mode asked for (AnsibleModule.atomic_move keeps the replaced file's mode).

Python 3.8+ (runs on the managed node); OSError propagates, for the module to fail naming the host and the path.
"""

from __future__ import annotations

import os
import tempfile

__all__ = ["file_mode", "write_atomic"]


def file_mode(path: str):
    """The permission bits of path (e.g. 0o644), or None where there is no file."""
    try:
        return os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        return None


def write_atomic(module, path: str, data: bytes, mode: int, check=None) -> None:
    """Replace path with data: a temporary file in the same folder, renamed over it with module.atomic_move,
    then chmod to mode. check, when given, is called with the temporary file's path before the rename (it
    validates the new content and fails the module, or raises, to keep path as it was). The temporary file is
    removed when a step fails; the OSError is raised again."""
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".gpuforge-", suffix=".tmp", dir=os.path.dirname(path) or ".")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        if check is not None:
            check(tmp)
        module.atomic_move(tmp, path)
        tmp = None
        os.chmod(path, mode)
    finally:
        if tmp and os.path.exists(tmp):
            os.remove(tmp)
