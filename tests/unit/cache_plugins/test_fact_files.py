"""fact_files: jsonfile's files, decoded once per run.

Checked against ansible.builtin.jsonfile as ansible-core's plugin loader hands it out (wrapped in the proxy that
schema-qualifies the keys and encodes the values): the same bytes on disk for the same facts, each plugin reading
what the other wrote, and a whole ansible-playbook run that caches facts with one plugin and reads them with the
other."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from ansible.errors import AnsibleError
from ansible.plugins.loader import cache_loader
from local_playbook import run_local_playbook

FACT_FILES = "gpuforge.cluster.fact_files"
JSONFILE = "ansible.builtin.jsonfile"
FACTS = {
    "ansible_hostname": "gpu01",
    "ansible_distribution": "Debian",
    "ansible_mounts": [{"mount": "/", "size_total": 1 << 40}],
    "nvidia_smi": {"gpus": [{"index": 0, "product_name": "Tesla V100-SXM2-16GB", "ecc": None, "ok": True}]},
    "discovered_interpreter_python": "/usr/bin/python3",
    "note": 'ünïcode \\ "quoted"',
}


def _cache(plugin: str, folder: Path, timeout: int = 0):
    # An empty prefix: jsonfile cannot list its keys with none set (ansible-core 2.19.5's BaseFileCacheModule.keys
    # takes the len() of None); fact_files can (below).
    return cache_loader.get(plugin, _uri=str(folder), _timeout=timeout, _prefix="")


def test_the_files_are_jsonfile_s_byte_for_byte(tmp_path):
    _cache(FACT_FILES, tmp_path / "ours").set("gpu01", FACTS)
    _cache(JSONFILE, tmp_path / "builtin").set("gpu01", FACTS)
    (ours,) = (tmp_path / "ours").iterdir()
    (builtin,) = (tmp_path / "builtin").iterdir()
    assert ours.name == builtin.name and ours.name.endswith("_gpu01")
    assert ours.read_bytes() == builtin.read_bytes()


@pytest.mark.parametrize(("writer", "reader"), [(FACT_FILES, JSONFILE), (JSONFILE, FACT_FILES)])
def test_each_plugin_reads_what_the_other_wrote(tmp_path, writer, reader):
    _cache(writer, tmp_path).set("gpu01", FACTS)
    cache = _cache(reader, tmp_path)
    assert cache.keys() == ["gpu01"]
    assert cache.contains("gpu01") and not cache.contains("gpu02")
    assert cache.get("gpu01") == FACTS


def test_a_host_s_file_is_decoded_once_then_answered_from_memory(tmp_path):
    _cache(JSONFILE, tmp_path).set("gpu01", FACTS)
    builtin, ours = _cache(JSONFILE, tmp_path), _cache(FACT_FILES, tmp_path)
    # The builtin plugin's proxy decodes again on every read: a new object each time.
    assert builtin.get("gpu01") is not builtin.get("gpu01")
    first = ours.get("gpu01")
    (path,) = tmp_path.iterdir()
    path.write_text(json.dumps({"__payload__": json.dumps({"changed": "on disk"})}), encoding="utf-8")
    assert ours.get("gpu01") is first
    # A new run (a new plugin instance) reads the file again.
    assert _cache(FACT_FILES, tmp_path).get("gpu01") == {"changed": "on disk"}


def test_an_update_is_written_through(tmp_path):
    ours = _cache(FACT_FILES, tmp_path)
    ours.set("gpu01", FACTS)
    facts = ours.get("gpu01")
    facts |= {"gpuforge_stamp": 1}
    ours.set("gpu01", facts)
    assert _cache(JSONFILE, tmp_path).get("gpu01") == {**FACTS, "gpuforge_stamp": 1}


def test_keys_with_no_prefix_set_and_with_one(tmp_path):
    (tmp_path / "none").mkdir()
    unset = cache_loader.get(FACT_FILES, _uri=str(tmp_path / "none"), _timeout=0)
    unset.set("gpu01", FACTS)
    (tmp_path / "none" / ".hidden").write_text("{}", encoding="utf-8")
    (tmp_path / "none" / "not-a-cache-file").write_text("{}", encoding="utf-8")
    assert unset.keys() == ["gpu01"]
    prefixed = cache_loader.get(FACT_FILES, _uri=str(tmp_path / "site"), _timeout=0, _prefix="site-")
    prefixed.set("gpu02", FACTS)
    (name,) = (path.name for path in (tmp_path / "site").iterdir())
    assert name.startswith("site-s") and name.endswith("_gpu02")
    assert prefixed.keys() == ["gpu02"]


def test_delete_and_flush(tmp_path):
    ours = _cache(FACT_FILES, tmp_path)
    ours.set("gpu01", FACTS)
    ours.set("gpu02", FACTS)
    ours.delete("gpu01")
    assert ours.keys() == ["gpu02"]
    with pytest.raises(KeyError):
        ours.get("gpu01")
    ours.flush()
    assert ours.keys() == [] and list(tmp_path.iterdir()) == []


def test_expired_facts_are_not_read(tmp_path):
    _cache(FACT_FILES, tmp_path).set("gpu01", FACTS)
    (path,) = tmp_path.iterdir()
    stale = path.stat().st_mtime - 3600
    os.utime(path, (stale, stale))
    cache = _cache(FACT_FILES, tmp_path, timeout=60)
    assert cache.keys() == [] and not cache.contains("gpu01")
    with pytest.raises(KeyError):
        cache.get("gpu01")


@pytest.mark.parametrize("content", ['{"ansible_hostname": "gpu01"}', "{not json", '["a list"]'])
def test_a_file_it_cannot_read_is_erased_naming_it(tmp_path, content):
    _cache(FACT_FILES, tmp_path).set("gpu01", FACTS)
    (path,) = tmp_path.iterdir()
    path.write_text(content, encoding="utf-8")
    with pytest.raises(AnsibleError, match=rf"cache file {re.escape(str(path))} was corrupt.*re-run"):
        _cache(FACT_FILES, tmp_path).get("gpu01")
    assert not path.exists()


PLAYBOOK = """\
- name: Cache a fact
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Set a cacheable fact
      ansible.builtin.set_fact:
        gpuforge_cached_note: "{{ note }}"
        cacheable: true
"""

READ_PLAYBOOK = """\
- name: Read the cached fact
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Write what the cache holds
      ansible.builtin.copy:
        content: "{{ ansible_facts['gpuforge_cached_note'] }}"
        dest: "{{ out }}"
        mode: "0644"
"""


@pytest.mark.parametrize(("writer", "reader"), [(FACT_FILES, JSONFILE), (JSONFILE, FACT_FILES)])
def test_a_run_caches_facts_that_the_next_run_reads(tmp_path, writer, reader):
    # Two ansible-playbook runs, the plugin chosen the way ansible.cfg chooses it (fact_caching).
    cache = tmp_path / "facts"
    (tmp_path / "write.yml").write_text(PLAYBOOK, encoding="utf-8")
    (tmp_path / "read.yml").write_text(READ_PLAYBOOK, encoding="utf-8")
    out = tmp_path / "out.txt"
    note = "written by " + writer
    common = {"ANSIBLE_CACHE_PLUGIN_CONNECTION": str(cache), "ANSIBLE_CACHE_PLUGIN_TIMEOUT": "600"}
    run_local_playbook(tmp_path / "write.yml", "-e", f"note='{note}'", ANSIBLE_CACHE_PLUGIN=writer, **common)
    run_local_playbook(tmp_path / "read.yml", "-e", f"out={out}", ANSIBLE_CACHE_PLUGIN=reader, **common)
    assert out.read_text(encoding="utf-8") == note
