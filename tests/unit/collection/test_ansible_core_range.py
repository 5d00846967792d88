"""The ansible-core range meta/runtime.yml declares is the one make test runs on: its oldest and its newest release.

The oldest is requirements/ansible-oldest.txt (.venv-ansible-oldest, make unit-oldest and make sanity-oldest); the
newest is requirements/ansible-newest.txt (a venv in a Debian 13 userland, for its Python >= 3.12: make unit-newest
and make sanity-newest through scripts/in_newest.sh); the project's own pin (pyproject.toml,
requirements/constraints.txt: .venv, make unit, make sanity, Molecule) lies between them. This file runs in all
three, and each checks that the ansible-core running it is inside the declared range.
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
NEWEST = _pins(ROOT / "requirements" / "ansible-newest.txt")
CONSTRAINTS = _pins(ROOT / "requirements" / "constraints.txt")
PYPROJECT = dict(
    re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", dependency).groups()
    for dependency in tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
)


def test_the_oldest_pin_is_the_declared_floor():
    floors = [spec.version for spec in REQUIRES if spec.operator == ">="]
    assert floors == [OLDEST["ansible-core"]], f"requires_ansible {REQUIRES} must start at the tested oldest"


def test_the_pins_are_inside_the_range_in_order():
    project, oldest, newest = PYPROJECT["ansible-core"], OLDEST["ansible-core"], NEWEST["ansible-core"]
    assert CONSTRAINTS["ansible-core"] == project, "pyproject.toml and constraints.txt pin one ansible-core"
    assert project in REQUIRES and oldest in REQUIRES and newest in REQUIRES
    assert Version(oldest) < Version(project) <= Version(newest)


def test_the_range_ends_with_the_newest_line_tested():
    # No release line above the newest tested one is declared.
    newest = Version(NEWEST["ansible-core"])
    ceilings = [Version(spec.version) for spec in REQUIRES if spec.operator == "<"]
    assert ceilings == [Version(f"{newest.major}.{newest.minor + 1}.0")], REQUIRES


def test_the_oldest_venv_differs_from_the_project_s_only_in_ansible_core():
    different = {
        name: (version, CONSTRAINTS.get(name)) for name, version in OLDEST.items() if CONSTRAINTS.get(name) != version
    }
    assert set(different) == {"ansible-core"}, different


def test_the_newest_venv_differs_from_the_oldest_only_in_ansible_core():
    assert set(NEWEST) == set(OLDEST)
    different = {name: (version, OLDEST[name]) for name, version in NEWEST.items() if OLDEST[name] != version}
    assert set(different) == {"ansible-core"}, different


def test_the_ansible_core_running_this_test_is_a_supported_one():
    assert RUNNING in REQUIRES, f"ansible-core {RUNNING} is outside requires_ansible {REQUIRES}"
    tested = (OLDEST["ansible-core"], PYPROJECT["ansible-core"], NEWEST["ansible-core"])
    assert RUNNING in tested, f"{RUNNING} is none of the tested pins {tested}"


def test_make_test_runs_sanity_and_the_unit_suite_on_each():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    test_target = re.search(r"^test:.*?(?=^\S)", makefile, re.M | re.S).group(0)
    test_target = "\n".join(line for line in test_target.splitlines() if not line.lstrip().startswith("#"))
    # Sanity on the project's pin too would be a third run between the two ends (make sanity, for developers).
    for target in ("unit-oldest", "unit-newest", "unit-torch", "sanity-oldest", "sanity-newest"):
        assert re.search(rf"\s{re.escape(target)}(\s|$)", test_target), f"make test does not run {target}"

    def recipe(target: str) -> str:
        return re.search(rf"^{target}:.*?(?=^\S)", makefile, re.M | re.S).group(0)

    assert "OLDEST_VENV" in recipe("unit-oldest")
    assert "OLDEST_VENV" in recipe("sanity-oldest")
    # The newest runs in its Debian 13 userland, with the venv made from requirements/ansible-newest.txt.
    assert "scripts/in_newest.sh" in recipe("unit-newest")
    assert "scripts/in_newest.sh" in recipe("sanity-newest") and "NEWEST_VENV" in recipe("sanity-newest")
    setup = (ROOT / "scripts" / "setup_newest_ansible.sh").read_text(encoding="utf-8")
    assert "requirements/ansible-newest.txt" in setup
    assert "scripts/setup_newest_ansible.sh" in (ROOT / "scripts" / "setup.sh").read_text(encoding="utf-8")


def test_unit_newest_runs_the_selection_of_unit_oldest():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")

    def pytest_arguments(target: str) -> str:
        recipe = re.search(rf"^{target}:.*?(?=^\S)", makefile, re.M | re.S).group(0).replace("\\\n", " ")
        return " ".join(re.search(r"\bpytest (.*)", recipe).group(1).split())

    assert pytest_arguments("unit-newest") == pytest_arguments("unit-oldest")
    # Between them they leave out exactly the file make test's unit-torch runs: every test runs somewhere in make test.
    left_out = re.findall(r"--ignore=(\S+)", pytest_arguments("unit-oldest"))
    assert left_out and pytest_arguments("unit-torch").split()[-len(left_out) :] == left_out


def test_the_floor_leaves_out_the_releases_that_hang_a_playbook():
    # 2.19.1-2.19.3: a worker SIGTERMed at the end of a play sends its result twice and the next play waits forever
    # (meta/runtime.yml); 2.19.4 is the first release with the fix.
    assert Version(OLDEST["ansible-core"]) >= Version("2.19.4")
    assert not any(f"2.19.{patch}" in REQUIRES for patch in range(4))
