"""module_payload_cache: the module payloads a run builds, stored and reused while every file in them is unchanged.

Checked on its pure parts (what a payload's manifest records, when a stored payload counts as unchanged, which
stores are refused, what restore copies) and in whole ansible-playbook runs with the checkout's ansible.cfg: a
module of a throwaway collection whose module_utils file holds the value the module returns. The second run uses
the stored payload (ansible-core builds none), and after the module_utils file changes the next run returns the new
value: a stale payload would return the old one."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from ansible.plugins.loader import callback_loader
from ansible.release import __version__ as ANSIBLE_CORE_VERSION
from local_playbook import ROOT, run_local_playbook

NAME = "gpuforge.cluster.module_payload_cache"
cache = sys.modules[type(callback_loader.get(NAME)).__module__]
RELEASE = f"{ANSIBLE_CORE_VERSION}-py{sys.version_info[0]}.{sys.version_info[1]}"
ENTRY = "ansible_collections.payloadtest.demo.plugins.modules.answer-ZIP_DEFLATED-none"


def _finder(root: Path) -> cache.SourceFinder:
    """A SourceFinder (no digest remembered yet) over sources under root: module_utils/ (as ansible-core's
    module_utils), ansible/ (its package) and collections/<namespace>/<name>/."""

    def collection_dir(name: str) -> str | None:
        folder = root.joinpath("collections", *name.split("."))
        return str(folder) if folder.is_dir() else None

    return cache.SourceFinder([root / "module_utils"], root / "ansible", collection_dir)


@pytest.fixture
def root(tmp_path):
    """Sources for _finder: module_utils/basic.py and one collection module."""
    (tmp_path / "module_utils").mkdir()
    (tmp_path / "module_utils" / "basic.py").write_text("BASIC = 1\n")
    (tmp_path / "ansible").mkdir()
    module = tmp_path / "collections" / "ns" / "coll" / "plugins" / "modules" / "thing.py"
    module.parent.mkdir(parents=True)
    module.write_text("print('thing')\n")
    return tmp_path


PAYLOAD_FILES = {
    "ansible/__init__.py": b"__version__ = 'x'\n",  # a release stub
    "ansible/module_utils/basic.py": b"BASIC = 1\n",
    "ansible/module_utils/pkg/__init__.py": b"",  # no such file: ansible-core writes an empty one
    "ansible_collections/ns/coll/plugins/modules/thing.py": b"print('thing')\n",
}


def test_a_manifest_records_each_file_s_digest_and_the_files_ansible_core_writes_itself(root):
    recorded = cache.manifest(PAYLOAD_FILES, _finder(root))
    assert recorded["ansible/__init__.py"] is None
    assert recorded["ansible/module_utils/pkg/__init__.py"] is None
    assert recorded["ansible/module_utils/basic.py"] == cache._sha256(b"BASIC = 1\n")
    assert cache.unchanged(recorded, _finder(root))


def test_a_payload_with_a_generated_shim_is_not_storable(root):
    assert cache.manifest({"ansible/module_utils/six/moves.py": b"from x import *\n"}, _finder(root)) is None
    assert cache.manifest({"ansible/module_utils/basic.py": b"BASIC = 2\n"}, _finder(root)) is None


@pytest.mark.parametrize(
    "change",
    [
        lambda root: (root / "module_utils" / "basic.py").write_text("BASIC = 2\n"),
        lambda root: (root / "module_utils" / "basic.py").unlink(),
        lambda root: (
            (root / "module_utils" / "pkg").mkdir()
            or (root / "module_utils" / "pkg" / "__init__.py").write_text("X = 1\n")
        ),
        lambda root: (root / "collections" / "ns" / "coll" / "plugins" / "modules" / "thing.py").unlink(),
    ],
    ids=["a file changed", "a file removed", "a package init ansible-core wrote empty has content", "module gone"],
)
def test_a_stored_payload_is_not_unchanged_after(root, change):
    recorded = cache.manifest(PAYLOAD_FILES, _finder(root))
    change(root)
    assert not cache.unchanged(recorded, _finder(root))


def test_a_store_others_can_write_or_another_user_owns_is_refused(tmp_path, monkeypatch):
    store = tmp_path / "store"
    store.mkdir(mode=0o700)
    assert cache.store_problem(store) is None
    store.chmod(0o777)
    assert "chmod 700" in cache.store_problem(store)
    store.chmod(0o700)
    monkeypatch.setattr(cache.os, "getuid", lambda: 12345)
    assert "belongs to uid" in cache.store_problem(store)


def test_restore_copies_only_payloads_that_match_their_manifest(root):
    sources = _finder(root)
    store, run_cache = root / "store", root / "run"
    store.mkdir()
    files = {"ansible/module_utils/basic.py": cache._sha256(b"BASIC = 1\n")}
    for name, payload, recorded_payload in (("good", b"P1", b"P1"), ("damaged", b"P2", b"other")):
        (store / name).write_bytes(payload)
        record = {"payload_sha256": cache._sha256(recorded_payload), "files": files}
        (store / f"{name}.json").write_text(json.dumps(record))
    (store / "stale").write_bytes(b"P3")
    record = {"payload_sha256": cache._sha256(b"P3"), "files": {"ansible/module_utils/basic.py": "0" * 64}}
    (store / "stale.json").write_text(json.dumps(record))
    restored = cache.restore(store, run_cache, sources)
    assert restored == {"good": cache._sha256(b"P1")}
    assert sorted(path.name for path in run_cache.iterdir()) == ["good"]
    assert (run_cache / "good").read_bytes() == b"P1"


MODULE = '''#!/usr/bin/python
from __future__ import annotations

DOCUMENTATION = r"""
module: answer
short_description: Write the value of its module_utils file to dest
description: [Test module.]
author: [gpuforge maintainers (@gpuforge)]
options:
  dest: {type: path, required: true, description: [The file written.]}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.payloadtest.demo.plugins.module_utils.answer_value import VALUE


def main():
    module = AnsibleModule(argument_spec={"dest": {"type": "path", "required": True}})
    with open(module.params["dest"], "w") as handle:
        handle.write(VALUE)
    module.exit_json(changed=True)


if __name__ == "__main__":
    main()
'''

PLAYBOOK = """
- name: Read the module's value
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Write the module's value (the playbook's only module, so ansible-core builds no other payload)
      payloadtest.demo.answer:
        dest: "{{ value_file }}"
"""


@pytest.fixture
def collection_run(tmp_path):
    """-> (run(**environment) -> (value the module returned, ansible-playbook's output), module_utils file, store)."""
    collection = tmp_path / "collections" / "ansible_collections" / "payloadtest" / "demo"
    (collection / "plugins" / "modules").mkdir(parents=True)
    (collection / "plugins" / "module_utils").mkdir()
    (collection / "galaxy.yml").write_text("namespace: payloadtest\nname: demo\nversion: 1.0.0\n")
    (collection / "plugins" / "modules" / "answer.py").write_text(MODULE)
    value_utils = collection / "plugins" / "module_utils" / "answer_value.py"
    value_utils.write_text('VALUE = "one"\n')
    playbook = tmp_path / "playbook.yml"
    playbook.write_text(PLAYBOOK)
    value_file = tmp_path / "value.txt"
    store = tmp_path / "store"

    def run(**environment: str) -> tuple[str, str]:
        completed = run_local_playbook(
            playbook,
            "-vvv",
            "-e",
            f"value_file={value_file}",
            ANSIBLE_COLLECTIONS_PATH=f"{tmp_path / 'collections'}:{ROOT / 'collection'}",
            GPUFORGE_MODULE_PAYLOAD_STORE=str(store),
            **environment,
        )
        return value_file.read_text(), completed.stdout + completed.stderr

    return run, value_utils, store


def test_a_second_run_reuses_the_stored_payload_and_a_changed_file_is_built_again(collection_run):
    run, value_utils, store = collection_run
    value, output = run()
    assert value == "one"
    assert (store / RELEASE / ENTRY).is_file()
    recorded = json.loads((store / RELEASE / f"{ENTRY}.json").read_text())["files"]
    assert "ansible_collections/payloadtest/demo/plugins/module_utils/answer_value.py" in recorded
    assert (store / RELEASE).stat().st_mode & 0o777 == 0o700

    # ANSIBLE_DEBUG: ansible-core says when it creates a payload; with the stored one in its cache it creates none.
    value, output = run(ANSIBLE_DEBUG="1")
    assert value == "one"
    assert ENTRY in output.split("module_payload_cache: reused", 1)[1].splitlines()[0]
    assert "ANSIBALLZ: Creating module" not in output

    value_utils.write_text('VALUE = "two"\n')
    value, output = run(ANSIBLE_DEBUG="1")
    assert value == "two"
    assert ENTRY not in output.split("module_payload_cache: reused", 1)[1].splitlines()[0]
    assert "ANSIBALLZ: Creating module" in output


def test_a_store_others_can_write_is_not_used(collection_run):
    run, _value_utils, store = collection_run
    run()
    (store / RELEASE).chmod(0o777)
    value, output = run(ANSIBLE_DEBUG="1")
    assert value == "one"
    assert "module_payload_cache: not using" in output and "chmod 700" in output
    assert "ANSIBALLZ: Creating module" in output
