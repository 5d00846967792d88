"""Cross-checks of the roles against the vendor facts registry share the roles' render helpers."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "roles"))
