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
PLAYBOOKS_DIR = PROJECT_ROOT / "playbooks"
CONTAINERS_CONF = STATE_DIR / "containers.conf"
