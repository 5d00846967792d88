"""Role YAML as Ansible loads it: strings holding templates are marked trusted (ansible-core 2.19 only
renders trusted templates), so tests can render role variables the way a play would."""

from __future__ import annotations

from pathlib import Path

import yaml
from ansible.template import trust_as_template


def trusted(value):
    if isinstance(value, str) and "{{" in value:
        return trust_as_template(value)
    if isinstance(value, dict):
        return {key: trusted(item) for key, item in value.items()}
    if isinstance(value, list):
        return [trusted(item) for item in value]
    return value


def load_yaml(path: Path):
    """A YAML file's data with its templates trusted ({} for an empty file)."""
    return trusted(yaml.safe_load(path.read_text(encoding="utf-8")) or {})
