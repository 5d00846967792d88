"""Helpers of the tests that write or read ``bench/<run>/summary.json``: what summary.yml writes (the role's
``gpuforge_bench_summary`` filter: the blocks with their records) and the JSON Schema validators of schemas/, whose
files name each other by their ``$id`` (bench-summary.schema.json's records are benchmark-run and attribution
records).

Imports are lazy: tests/unit/module_utils also runs under an older Python without Ansible.
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "schemas"


def schema_validator(name: str):
    """A Draft 2020-12 validator of schemas/<name> that resolves the other schemas/ files it names."""
    import jsonschema
    from referencing import Registry, Resource

    schemas = [json.loads(path.read_text(encoding="utf-8")) for path in sorted(SCHEMAS.glob("*.schema.json"))]
    registry = Registry().with_resources((schema["$id"], Resource.from_contents(schema)) for schema in schemas)
    schema = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema, registry=registry, format_checker=jsonschema.FormatChecker())


def written(summary: dict, bench_dir=None) -> dict:
    """``summary`` (its blocks; any ``records`` it holds are dropped) as summary.yml writes it: with the records the
    role's filter builds from the blocks and, with ``bench_dir``, the parsed result files there."""
    from ansible_collections.gpuforge.cluster.plugins.filter import gpuforge_bench

    return json.loads(json.dumps(gpuforge_bench.bench_summary(summary, str(bench_dir) if bench_dir else None)))
