# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

DOCUMENTATION = r"""
name: module_payload_cache
type: aggregate
author:
  - gpuforge maintainers (@gpuforge)
version_added: "0.1.0"
short_description: Keep the module payloads a run builds, and reuse each while every file in it is unchanged
description:
  - ansible-core sends a Python module to a host as a payload (AnsiballZ) that holds the module and every
    module_utils file it imports. A run builds each module's payload the first time a task uses the module and
    keeps it in the run's own local temporary directory, which is removed when the run ends, so every run builds
    them all again (about 0.09 s of a worker's CPU per module on the lab's controller; a re-run of site.yml uses
    about 20 modules).
  - When a playbook ends, this plugin stores each payload the run built, with the SHA-256 of every file in it, in
    the O(store) directory (one folder per ansible-core release and controller Python). When a playbook starts, it
    copies into the run's payload cache each stored payload whose files are all, byte for byte, the files
    ansible-core would put in it now, found the way ansible-core finds them (the configured and play-adjacent
    module_utils folders before ansible-core's own; a collection's files in the copy of it the collection loader
    finds first). A payload with a changed or missing file is left out, and the task that uses the module builds
    it as it would without this plugin.
  - A file ansible-core writes itself rather than reads (the two package stubs named after its release, and an
    empty C(__init__.py) for a package folder without one) is accepted while no such file has appeared with
    content. A payload that holds anything else that is not a file's copy (a redirect shim) is not stored.
  - The store holds Python pickles that ansible-core loads. It is created mode 0700, and a store that belongs to
    another user or that others can write is not used (a warning names it and the fix).
options:
  store:
    description: The folder of stored payloads.
    type: path
    default: ~/.ansible/gpuforge_module_payloads
    env:
      - name: GPUFORGE_MODULE_PAYLOAD_STORE
    ini:
      - section: gpuforge_module_payload_cache
        key: store
requirements:
  - enabled in C(callbacks_enabled) (ansible.cfg enables it)
"""

import base64
import hashlib
import io
import json
import os
import pickle
import stat
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import ansible
from ansible import constants as C
from ansible.executor import module_common
from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import module_utils_loader
from ansible.release import __version__ as ANSIBLE_CORE_VERSION
from ansible.utils.collection_loader._collection_finder import _get_collection_path

# ansible-core 2.19's payload cache: <local tmp>/ansiballz_cache/<module fqn>-<compression>-<extensions>, each a
# pickled module_common._CachedModule written as "<name>-part" and renamed, next to a "<name>.lock" file
# (ansible/executor/module_common.py, _find_module_utils).
RUN_CACHE_FOLDER = "ansiballz_cache"
# Written by ansible-core from its release, not read from a file (module_common.recursive_finder).
RELEASE_STUBS = frozenset({"ansible/__init__.py", "ansible/module_utils/__init__.py"})
MANIFEST_SUFFIX = ".json"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def payload_files(cached_module) -> dict[str, bytes]:
    """The files of one cached payload (a _CachedModule): archive path -> content."""
    with zipfile.ZipFile(io.BytesIO(base64.b64decode(cached_module.zip_data))) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _sha256(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


class SourceFinder:
    """Where ansible-core would read each archive path of a payload from now, and what that file holds.

    ansible/module_utils/<rest>: the module_utils folders in the order ansible-core's locator searches them (the
    module_utils loader's paths, then ansible-core's own); any other ansible/<rest>: ansible-core's package;
    ansible_collections/<namespace>/<name>/<rest>: the collection's folder as the collection loader finds it."""

    def __init__(self, module_utils_dirs: list[Path], ansible_dir: Path, collection_dir: Callable[[str], str | None]):
        self._module_utils_dirs = module_utils_dirs
        self._ansible_dir = ansible_dir
        self._collection_dir = collection_dir
        self._digests: dict[str, str | None] = {}

    def path(self, archive_path: str) -> Path | None:
        parts = archive_path.split("/")
        if parts[:2] == ["ansible", "module_utils"] and len(parts) > 2:
            candidates = (Path(folder, *parts[2:]) for folder in self._module_utils_dirs)
            return next((candidate for candidate in candidates if candidate.is_file()), None)
        if parts[0] == "ansible" and len(parts) > 1:
            return self._ansible_dir / "/".join(parts[1:])
        if parts[0] == "ansible_collections" and len(parts) > 3:
            folder = self._collection_dir(f"{parts[1]}.{parts[2]}")
            return Path(folder, *parts[3:]) if folder else None
        return None

    def digest(self, archive_path: str) -> str | None:
        """SHA-256 of the file ansible-core would read for archive_path; None when there is no such file."""
        if archive_path not in self._digests:
            path = self.path(archive_path)
            try:
                self._digests[archive_path] = _sha256(path.read_bytes()) if path else None
            except OSError:
                self._digests[archive_path] = None
        return self._digests[archive_path]


def manifest(files: dict[str, bytes], sources: SourceFinder) -> dict[str, str | None] | None:
    """archive path -> SHA-256 of each file of a payload just built, None for one ansible-core wrote itself; None
    (not storable) when a file is neither the copy of its source nor one ansible-core writes itself."""
    recorded: dict[str, str | None] = {}
    for archive_path, content in files.items():
        digest = _sha256(content)
        if sources.digest(archive_path) == digest:
            recorded[archive_path] = digest
        elif archive_path in RELEASE_STUBS or (archive_path.endswith("/__init__.py") and not content):
            recorded[archive_path] = None
        else:
            return None
    return recorded


def unchanged(recorded: dict[str, str | None], sources: SourceFinder) -> bool:
    """Whether every file of a stored payload is what ansible-core would put in it now."""
    for archive_path, digest in recorded.items():
        current = sources.digest(archive_path)
        if digest is not None:
            if current != digest:
                return False
        elif archive_path not in RELEASE_STUBS and current not in (None, EMPTY_SHA256):
            return False  # an __init__.py with content where ansible-core wrote an empty one
    return True


def store_problem(store: Path) -> str | None:
    """Why the store must not be used (it holds pickles ansible-core loads), or None."""
    try:
        info = store.stat()
    except OSError as exc:
        return f"cannot read it ({exc.strerror})"
    if info.st_uid != os.getuid():
        return f"it belongs to uid {info.st_uid}, not to this user; remove it or set GPUFORGE_MODULE_PAYLOAD_STORE"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"others can write it (mode {stat.S_IMODE(info.st_mode):04o}); run chmod 700 {store}"
    return None


def _write_atomically(path: Path, content: bytes) -> None:
    part = path.with_name(f"{path.name}.{os.getpid()}-part")
    part.write_bytes(content)
    part.replace(path)


def restore(store: Path, run_cache: Path, sources: SourceFinder) -> dict[str, str]:
    """Copy every stored payload that is still current into the run's cache -> {entry name: payload SHA-256}."""
    restored = {}
    run_cache.mkdir(parents=True, exist_ok=True)
    for manifest_path in sorted(store.glob(f"*{MANIFEST_SUFFIX}")):
        name = manifest_path.name[: -len(MANIFEST_SUFFIX)]
        if (run_cache / name).exists():
            continue
        try:
            record = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(record, dict) or not unchanged(record.get("files") or {}, sources):
            continue
        try:
            payload = (store / name).read_bytes()
        except OSError:
            continue
        if record.get("payload_sha256") != _sha256(payload):
            continue  # a payload replaced since its manifest was written, or a damaged one
        _write_atomically(run_cache / name, payload)
        restored[name] = record["payload_sha256"]
    return restored


def save(run_cache: Path, store: Path, sources: SourceFinder, known: dict[str, str]) -> list[str]:
    """Store each payload of the run's cache that is not stored yet and holds only its sources' copies -> names."""
    stored = []
    for path in sorted(run_cache.iterdir()) if run_cache.is_dir() else []:
        if path.name.endswith((".lock", "-part")) or not path.is_file():
            continue
        payload = path.read_bytes()
        digest = _sha256(payload)
        if known.get(path.name) == digest:
            continue
        try:
            recorded = manifest(payload_files(module_common._CachedModule.load(str(path))), sources)
        except (pickle.UnpicklingError, zipfile.BadZipFile, AttributeError, EOFError, ValueError):
            recorded = None  # not a payload of this ansible-core's format: left to be built again
        if recorded is None:
            continue
        _write_atomically(store / path.name, payload)
        record = {"payload_sha256": digest, "files": recorded}
        _write_atomically(store / f"{path.name}{MANIFEST_SUFFIX}", json.dumps(record, sort_keys=True).encode())
        known[path.name] = digest
        stored.append(path.name)
    return stored


def _collection_dir(collection: str) -> str | None:
    try:
        return _get_collection_path(collection)
    except ValueError:
        return None


def current_sources() -> SourceFinder:
    """The SourceFinder of this controller process (its loaders' paths, after the playbook's plays were loaded)."""
    configured = [Path(p) for p in module_utils_loader._get_paths(subdirs=False) if os.path.isdir(p)]
    own = Path(module_common._MODULE_UTILS_PATH)
    return SourceFinder([*configured, own], Path(ansible.__file__).parent, _collection_dir)


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpuforge.cluster.module_payload_cache"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._store: Path | None = None
        self._known: dict[str, str] = {}

    def _run_cache(self) -> Path:
        return Path(C.DEFAULT_LOCAL_TMP, RUN_CACHE_FOLDER)

    def v2_playbook_on_start(self, playbook):
        release = f"{ANSIBLE_CORE_VERSION}-py{sys.version_info[0]}.{sys.version_info[1]}"
        store = Path(os.path.expanduser(self.get_option("store"))) / release
        try:
            store.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            self._display.warning(f"module_payload_cache: not using {store}: {exc.strerror}; payloads are built")
            return
        problem = store_problem(store) or store_problem(store.parent)
        if problem:
            self._display.warning(f"module_payload_cache: not using {store}: {problem}")
            return
        try:
            restored = restore(store, self._run_cache(), current_sources())
        except OSError as exc:  # the run's payload cache cannot be written: ansible-core's own builds will say why
            self._display.warning(f"module_payload_cache: nothing reused from {store}: {exc}")
            return
        self._store = store
        self._known.update(restored)
        self._display.vvv(f"module_payload_cache: reused {len(restored)} payload(s) from {store}: {sorted(restored)}")

    def v2_playbook_on_stats(self, stats):
        if self._store is None:
            return
        try:
            stored = save(self._run_cache(), self._store, current_sources(), self._known)
        except OSError as exc:  # a full disk or a store removed meanwhile: the next run builds the payloads
            self._display.warning(f"module_payload_cache: payloads not stored in {self._store}: {exc}")
            return
        if stored:
            self._display.vvv(f"module_payload_cache: stored {len(stored)} payload(s) in {self._store}: {stored}")
