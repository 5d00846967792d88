"""The vendor facts registry itself: every file loads, every fact and package cites a source, relations parse,
and nothing in it is read from a role (vendor_facts/README.md)."""

from __future__ import annotations

import re

import pytest
import yaml

from gpuforge import vendor_facts
from gpuforge.paths import PROJECT_ROOT


@pytest.fixture(scope="module")
def repos():
    return vendor_facts.load_all()


def test_every_registry_file_loads_with_sources(repos):
    files = sorted(vendor_facts.REGISTRY_DIR.glob("*/*.yml"))
    assert len(repos) == len(files) >= 15
    for repo in repos.values():
        for package in repo.packages:
            assert package.source and package.evidence in vendor_facts.EVIDENCE_LEVELS, (repo.key, package.name)
            for relation in (*package.depends, *package.provides, *package.conflicts):
                vendor_facts.parse_relation(relation)


def test_sources_are_cited_by_title_not_by_seed_number(repos):
    for path in vendor_facts.REGISTRY_DIR.glob("*/*.yml"):
        assert not re.search(r"\bseeds?[ /_]?\d{3}\b", path.read_text(encoding="utf-8"), re.IGNORECASE), path


def test_no_registry_value_is_a_template(repos):
    # A "{{ ... }}" would mean a value taken from a role or inventory variable.
    for path in vendor_facts.REGISTRY_DIR.glob("*/*.yml"):
        assert "{{" not in path.read_text(encoding="utf-8"), path


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        ({"schema": 1, "repository": {"title": "t", "vendor": "v", "os": "x", "package_format": "deb"}}, "source"),
        (
            {
                "schema": 1,
                "repository": {"title": "t", "vendor": "v", "os": "x", "package_format": "deb", "source": "s"},
                "packages": [{"name": "p", "versions": ["1-1"], "source": "s", "evidence": "inferred"}],
            },
            "note",
        ),
        (
            {
                "schema": 1,
                "repository": {"title": "t", "vendor": "v", "os": "x", "package_format": "deb", "source": "s"},
                "facts": {"f": {"value": 1, "source": "s", "evidence": "guessed"}},
            },
            "evidence must be one of",
        ),
        (
            {
                "schema": 1,
                "repository": {"title": "t", "vendor": "v", "os": "x", "package_format": "deb", "source": "s"},
                "packages": [{"name": "p", "versions": [1.0], "source": "s", "evidence": "quoted"}],
            },
            "quoted strings",
        ),
    ],
)
def test_a_fact_without_its_source_is_refused(tmp_path, broken, message):
    path = tmp_path / "vendor" / "os.yml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(broken), encoding="utf-8")
    with pytest.raises(vendor_facts.RegistryError, match=message):
        vendor_facts.load(path)


_REPOSITORY = {"title": "t", "vendor": "v", "os": "x", "package_format": "deb", "source": "s"}


@pytest.mark.parametrize(
    ("broken", "entry"),
    [
        (
            {
                "schema": 1,
                "repository": _REPOSITORY,
                "packages": [
                    {"name": "p", "versions": ["1-1"], "source": "s", "evidence": "inferred", "note": "from q's 1-1"}
                ],
            },
            "packages[0] p",
        ),
        (
            {
                "schema": 1,
                "repository": _REPOSITORY,
                "facts": {"f": {"value": 1, "source": "s", "evidence": "inferred", "note": "from g", "confirm": "  "}},
            },
            "fact f",
        ),
    ],
)
def test_an_inferred_entry_without_confirm_is_refused(tmp_path, broken, entry):
    # issue 47/46: an inferred fact says what it was inferred from (note) and what would confirm it (confirm).
    path = tmp_path / "vendor" / "os.yml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(broken), encoding="utf-8")
    with pytest.raises(vendor_facts.RegistryError) as refused:
        vendor_facts.load(path)
    assert str(refused.value) == f"vendor/os {entry}: an inferred fact needs 'confirm' naming what would confirm it"
    # With it, and only an inferred entry needs it, the file loads.
    for item in broken.get("packages", []) + list(broken.get("facts", {}).values()):
        item["confirm"] = "apt-cache show p=1-1 on a host with the repository"
    path.write_text(yaml.safe_dump(broken), encoding="utf-8")
    assert vendor_facts.load(path).key == "vendor/os"


def test_every_inferred_entry_of_the_registry_names_what_would_confirm_it(repos):
    inferred = confirmed = 0
    for repo in repos.values():
        entries = list(repo.facts.items())
        entries += [(f"{p.name} {p.version}", {"evidence": p.evidence, "confirm": p.confirm}) for p in repo.packages]
        for name, entry in entries:
            if entry["evidence"] != "inferred":
                continue
            inferred += 1
            confirm = entry.get("confirm") or ""
            assert confirm.strip() and confirm.strip() != (entry.get("note") or "").strip(), (repo.key, name)
            confirmed += 1
    assert inferred == confirmed > 0


def test_the_lab_mirror_definition_names_no_vendor_package_or_version():
    # The lab's table may say which registry repositories to publish and which simulator answers for a path;
    # names and versions of vendor packages come only from the registry.
    lab = yaml.safe_load((PROJECT_ROOT / "lab/packages/packages.yml").read_text(encoding="utf-8"))
    vendor_names = {p.name for repo in vendor_facts.load_all().values() for p in repo.packages}
    assert "packages" not in lab and "per_branch" not in lab
    assert {p["name"] for p in lab["lab_packages"]} & vendor_names == set()


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("535.183.01-1", "535.183.06-1", -1),
        ("535.230.02-0ubuntu1", "535.183.01-1", 1),
        ("535.183.01-1", "535.183.01-0ubuntu0.22.04.1", 1),
        ("1.0~rc1-1", "1.0-1", -1),
        ("1:1.0-1", "2.0-1", 1),
        ("0.5.14-6ubuntu0.1", "0.5.14-6", 1),
        ("2410mlnx54-1.2410068", "2410mlnx54-1.2410068", 0),
    ],
)
def test_dpkg_version_order(a, b, expected):
    # Debian Policy Manual 5.6.12; the expected orders are what `dpkg --compare-versions` answers.
    assert vendor_facts.compare_versions(a, b) == expected


def test_mirror_and_simulators_read_no_role_variable():
    # "The lab never encodes what a role assumes": neither the mirror builder nor any simulator may open a
    # role's files or name a role variable.
    sources = [PROJECT_ROOT / "src/gpuforge/lab/mirror.py", PROJECT_ROOT / "lab/packages/packages.yml"]
    sources += sorted((PROJECT_ROOT / "lab/sim/gpuforge_sim").glob("*.py"))
    role_variables = re.compile(r"\b(nvidia_driver|mlnx_ofed|gpuforge_nvidia|gpuforge_doca|gpuforge_mlnx)_\w+")
    for path in sources:
        text = path.read_text(encoding="utf-8")
        assert "roles/" not in text, path
        assert not role_variables.search(text), (path, role_variables.search(text))


def test_dpkg_order_agrees_with_dpkg_on_every_registry_version():
    # The resolver's version order checked against the real dpkg --compare-versions.
    import itertools
    import subprocess

    versions = sorted(
        {p.version for repo in vendor_facts.load_all().values() if repo.package_format == "deb" for p in repo.packages}
    )
    for a, b in itertools.pairwise(versions):
        ours = vendor_facts.compare_versions(a, b)
        dpkg_lt = subprocess.run(["dpkg", "--compare-versions", a, "lt", b], check=False).returncode == 0
        dpkg_eq = subprocess.run(["dpkg", "--compare-versions", a, "eq", b], check=False).returncode == 0
        assert (ours < 0) == dpkg_lt and (ours == 0) == dpkg_eq, (a, b)
