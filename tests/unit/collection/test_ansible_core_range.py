"""The ansible-core range meta/runtime.yml declares is the one make test runs on: its oldest and its newest release.

The newest is the project's pin (pyproject.toml, requirements/constraints.txt: .venv, make unit and make sanity);
the oldest is requirements/ansible-oldest.txt (.venv-ansible-oldest, make unit-oldest and make sanity-oldest). This
file runs in both, and each checks that the ansible-core running it is inside the declared range.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml
from ansible.release import __version__ as RUNNING
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[3]
RUNTIME = ROOT / "collection" / "ansible_collections" / "gpuforge" / "cluster" / "meta" / "runtime.yml"


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[name.lower().replace("_", "-")] = version
    return pins


REQUIRES = SpecifierSet(yaml.safe_load(RUNTIME.read_text(encoding="utf-8"))["requires_ansible"])
OLDEST = _pins(ROOT / "requirements" / "ansible-oldest.txt")
CONSTRAINTS = _pins(ROOT / "requirements" / "constraints.txt")
PYPROJECT = dict(
    re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", dependency).groups()
    for dependency in tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
)


def test_the_oldest_pin_is_the_declared_floor():
    floors = [spec.version for spec in REQUIRES if spec.operator == ">="]
    assert floors == [OLDEST["ansible-core"]], f"requires_ansible {REQUIRES} must start at the tested oldest"


def test_the_newest_pin_is_inside_the_range_and_newer_than_the_oldest():
    newest = PYPROJECT["ansible-core"]
    assert CONSTRAINTS["ansible-core"] == newest, "pyproject.toml and constraints.txt pin one ansible-core"
    assert newest in REQUIRES and OLDEST["ansible-core"] in REQUIRES
    assert Version(newest) > Version(OLDEST["ansible-core"])
    # No release line above the newest one is declared: the range ends with the newest line tested.
    ceilings = [Version(spec.version) for spec in REQUIRES if spec.operator == "<"]
    assert ceilings == [Version(f"{Version(newest).major}.{Version(newest).minor + 1}.0")], REQUIRES


def test_the_oldest_venv_differs_from_the_project_s_only_in_ansible_core():
    different = {
        name: (version, CONSTRAINTS.get(name)) for name, version in OLDEST.items() if CONSTRAINTS.get(name) != version
    }
    assert set(different) == {"ansible-core"}, different


def test_the_ansible_core_running_this_test_is_a_supported_one():
    assert RUNNING in REQUIRES, f"ansible-core {RUNNING} is outside requires_ansible {REQUIRES}"
    assert RUNNING in (OLDEST["ansible-core"], PYPROJECT["ansible-core"]), f"{RUNNING} is neither tested pin"


def test_make_test_runs_sanity_and_the_unit_suite_on_both():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    test_target = re.search(r"^test:.*?(?=^\S)", makefile, re.M | re.S).group(0)
    test_target = "\n".join(line for line in test_target.splitlines() if not line.lstrip().startswith("#"))
    for target in ("unit", "unit-oldest", "sanity", "sanity-oldest"):
        assert re.search(rf"\s{re.escape(target)}(\s|$)", test_target), f"make test does not run {target}"
    assert "OLDEST_VENV" in re.search(r"^unit-oldest:.*?(?=^\S)", makefile, re.M | re.S).group(0)
    assert "OLDEST_VENV" in re.search(r"^sanity-oldest:.*?(?=^\S)", makefile, re.M | re.S).group(0)


def test_the_floor_leaves_out_the_releases_that_hang_a_playbook():
    # 2.19.1-2.19.3: a worker SIGTERMed at the end of a play sends its result twice and the next play waits forever
    # (meta/runtime.yml); 2.19.4 is the first release with the fix.
    assert Version(OLDEST["ansible-core"]) >= Version("2.19.4")
    assert not any(f"2.19.{patch}" in REQUIRES for patch in range(4))
