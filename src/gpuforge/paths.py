"""Locations inside a gpuforge checkout (the CLI drives the playbooks of the checkout it lives in)."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(os.environ.get("GPUFORGE_ROOT", Path(__file__).resolve().parents[2]))
STATE_DIR = PROJECT_ROOT / ".gpuforge"
LAB_STATE_DIR = STATE_DIR / "lab"
ARTIFACTS_DIR = PROJECT_ROOT / "artifacts"
LAB_DIR = PROJECT_ROOT / "lab"
PROFILES_DIR = LAB_DIR / "profiles"
LAB_INVENTORY_DIR = PROJECT_ROOT / "inventories" / "lab"
MODULE_UTILS_DIR = PROJECT_ROOT / "module_utils"
# The checkout as the gpuforge.cluster collection (links to module_utils/, library/, ...; docs/development.md).
COLLECTION_PATH = PROJECT_ROOT / "collection"
COLLECTION_PACKAGE = "ansible_collections.gpuforge.cluster"
PLAYBOOKS_DIR = PROJECT_ROOT / "playbooks"
CONTAINERS_CONF = STATE_DIR / "containers.conf"
# ansible.cfg's fact_caching_connection (ansible.builtin.jsonfile's files): what the
# controller remembers of each host between runs.
FACT_CACHE_DIR = STATE_DIR / "facts"


def collection_import(name: str):
    """Import `plugins.<kind>.<file>` of the gpuforge.cluster collection from this checkout.

    module_utils/ and filter_plugins/ import each other by their collection path (that is what Ansible packs into a
    module), so the CLI imports them the same way: the checkout's collection/ folder goes on sys.path once.
    """
    import importlib
    import sys

    path = str(COLLECTION_PATH)
    if path not in sys.path:
        sys.path.insert(0, path)
    return importlib.import_module(f"{COLLECTION_PACKAGE}.{name}")
