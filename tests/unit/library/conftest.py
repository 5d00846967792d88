"""Make library/ modules importable in tests: alias module_utils files under ansible.module_utils."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import ansible.module_utils

MODULE_UTILS = Path(__file__).resolve().parents[3] / "module_utils"

for path in sorted(MODULE_UTILS.glob("gpuforge_*.py")):
    name = path.stem
    module = importlib.import_module(name)
    sys.modules[f"ansible.module_utils.{name}"] = module
    setattr(ansible.module_utils, name, module)
