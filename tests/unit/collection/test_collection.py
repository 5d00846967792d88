"""The checkout as the gpuforge.cluster collection: the tree, the FQCNs, the built tarball and the pins around it.

docs/development.md ("The collection") describes the layout these tests hold it to.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest
import yaml
from hang_guard import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[3]
TREE = ROOT / "collection" / "ansible_collections" / "gpuforge" / "cluster"
BIN = Path(sys.executable).parent
GALAXY_IN = yaml.safe_load((ROOT / "collection" / "galaxy.yml.in").read_text(encoding="utf-8"))
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
GALAXY = {**GALAXY_IN, "version": VERSION}
FQCN = f"{GALAXY['namespace']}.{GALAXY['name']}"
MODULES = sorted(path.stem for path in (ROOT / "library").glob("*.py"))
# Where tasks, templates and docs call modules and filters.
CALLERS = ("roles", "playbooks", "molecule", "lab/playbooks", "inventories/sample", "src/gpuforge")


def _filters() -> dict[str, str]:
    """{filter name: plugin file stem} from each filter plugin's FilterModule.filters() literal."""
    names = {}
    for path in sorted((ROOT / "filter_plugins").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == "filters":
                returned = next(n for n in ast.walk(node) if isinstance(n, ast.Return))
                assert isinstance(returned.value, ast.Dict), f"{path.name}: filters() must return a dict literal"
                for key in returned.value.keys:
                    names[key.value] = path.stem
    return names


FILTERS = _filters()


def _env(**extra) -> dict:
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **extra}


# ---------------------------------------------------------------------------------------------------
# The tree in the checkout.


@pytest.mark.parametrize(
    ("link", "target"),
    [
        ("plugins/modules", "library"),
        ("plugins/module_utils", "module_utils"),
        ("plugins/filter", "filter_plugins"),
        ("plugins/action", "action_plugins"),
        ("plugins/lookup", "lookup_plugins"),
        ("plugins/callback", "callback_plugins"),
        ("plugins/doc_fragments", "doc_fragments"),
        ("roles", "roles"),
        ("playbooks", "playbooks"),
        ("benchmarks/resnet50", "benchmarks/resnet50"),
        ("vendor_facts", "vendor_facts"),
        ("LICENSES", "LICENSES"),
    ],
)
def test_the_collection_tree_links_to_the_top_level_folders(link, target):
    path = TREE / link
    assert path.is_symlink(), f"{path} must be a link (one copy of each file, in the design's layout)"
    assert path.resolve() == (ROOT / target).resolve()


# The top-level plugin folders that Ansible must reach only through the collection.
PLUGIN_FOLDERS = "library|module_utils|filter_plugins|action_plugins|lookup_plugins|callback_plugins"


def test_ansible_finds_the_modules_and_filters_only_through_the_collection():
    config = (ROOT / "ansible.cfg").read_text(encoding="utf-8")
    assert not re.search(rf"^({PLUGIN_FOLDERS})\s*=", config, re.M), (
        "ansible.cfg must not put library/, module_utils/ or the *_plugins/ folders on Ansible's path: short names "
        "would keep working and hide a missing FQCN"
    )
    assert re.search(r"^collections_path\s*=\s*collection(:|$)", config, re.M)
    molecule = (ROOT / ".config" / "molecule" / "config.yml").read_text(encoding="utf-8")
    assert "collections_path: ${MOLECULE_PROJECT_DIRECTORY}/collection" in molecule
    assert not re.search(rf"^\s+({PLUGIN_FOLDERS}):", molecule, re.M)


def _task_files():
    for base in CALLERS:
        for path in sorted((ROOT / base).rglob("*")):
            if path.is_file() and path.suffix in (".yml", ".yaml", ".j2", ".py") and "__pycache__" not in path.parts:
                yield path


def test_every_call_of_a_gpuforge_module_uses_its_fqcn():
    short = re.compile(r"^\s*-?\s*(" + "|".join(MODULES) + r"):\s*(&\w+)?\s*$", re.M)
    offenders = [
        f"{path.relative_to(ROOT)}: {match.group(1)}"
        for path in _task_files()
        # a role's vars and defaults call no module: a key there named like one (benchmark_tools' nccl_tests) is data
        if not {"vars", "defaults"} & set(path.relative_to(ROOT).parts[2:3])
        for match in short.finditer(path.read_text(encoding="utf-8"))
    ]
    assert offenders == [], f"use {FQCN}.<module>: {offenders}"


def test_every_use_of_a_gpuforge_filter_uses_its_fqcn():
    short = re.compile(r"\|\s*(" + "|".join(FILTERS) + r")\b")
    offenders = [
        f"{path.relative_to(ROOT)}: {match.group(1)}"
        for path in _task_files()
        for match in short.finditer(path.read_text(encoding="utf-8"))
    ]
    assert offenders == [], f"use {FQCN}.<filter>: {offenders}"


def test_templates_are_rendered_to_text_with_render_template():
    """ansible.builtin.template's lookup deep-copies every variable of the host on each call;
    gpuforge.cluster.render_template gives the same text without the copy. The template module (a file written by its
    own task) is not a lookup."""
    builtin = re.compile(r"""(lookup|query)\(\s*['"](ansible\.builtin\.)?template['"]""")
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in _task_files()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if builtin.search(line)
    ]
    assert offenders == [], f"use lookup('{FQCN}.render_template', ...): {offenders}"
    assert any(f"{FQCN}.render_template" in path.read_text(encoding="utf-8") for path in _task_files())


def test_every_filter_has_its_documentation_file():
    documented = sorted(path.stem for path in (ROOT / "filter_plugins").glob("*.yml"))
    assert documented == sorted(FILTERS), "one filter_plugins/<filter>.yml (DOCUMENTATION/EXAMPLES/RETURN) per filter"
    for name in FILTERS:
        doc = yaml.safe_load((ROOT / "filter_plugins" / f"{name}.yml").read_text(encoding="utf-8"))
        assert doc["DOCUMENTATION"]["name"] == name
        assert f"{FQCN}.{name}" in doc["EXAMPLES"], f"{name}: the example must call the filter by its FQCN"


def test_every_module_documents_its_check_and_diff_mode_first():
    for name in MODULES:
        text = (ROOT / "library" / f"{name}.py").read_text(encoding="utf-8")
        tree = ast.parse(text)
        # An action plugin's module file (action_plugins/<name>.py) holds documentation only: no import to follow.
        first_import = next(
            (
                node.lineno
                for node in tree.body
                if isinstance(node, (ast.Import, ast.ImportFrom)) and getattr(node, "module", "") != "__future__"
            ),
            len(text.splitlines()) + 1,
        )
        documentation_line = next(
            node.lineno for node in tree.body if isinstance(node, ast.Assign) and node.targets[0].id == "DOCUMENTATION"
        )
        assert documentation_line < first_import, f"{name}: DOCUMENTATION must come before the imports"
        doc = yaml.safe_load(
            next(
                node.value.value
                for node in tree.body
                if isinstance(node, ast.Assign) and node.targets[0].id == "DOCUMENTATION"
            )
        )
        # The shared attributes, author and notes come from the collection's doc fragments (merged by ansible-doc,
        # checked in test_ansible_doc_documents_every_plugin).
        assert f"{FQCN}.common" in doc["extends_documentation_fragment"], name
        assert "author" not in doc, f"{name}: the author comes from {FQCN}.common"
        examples = yaml.safe_load(
            next(
                node.value.value
                for node in tree.body
                if isinstance(node, ast.Assign) and node.targets[0].id == "EXAMPLES"
            )
        )
        called = {key for task in examples for key in task if key.endswith(tuple(MODULES))}
        assert called and all(key.startswith(f"{FQCN}.") for key in called), f"{name}: EXAMPLES must use FQCNs"
        assert "GNU General Public License v3.0+" in "\n".join(text.splitlines()[:5]), name


# ---------------------------------------------------------------------------------------------------
# ansible-doc reads every plugin through the collection.


@pytest.mark.parametrize("plugin_type", ["module", "filter"])
def test_ansible_doc_documents_every_plugin(plugin_type):
    expected = MODULES if plugin_type == "module" else sorted(FILTERS)
    listing = subprocess.run(
        ["ansible-doc", "-t", plugin_type, "--list", "--json", FQCN],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=_env(ANSIBLE_CONFIG=str(ROOT / "ansible.cfg")),
        timeout=HANG_GUARD_S,
    )
    assert listing.returncode == 0, listing.stderr
    listed = json.loads(listing.stdout)
    assert sorted(name.removeprefix(f"{FQCN}.") for name in listed) == expected
    undocumented = [name for name, text in listed.items() if not text or text == "UNDOCUMENTED"]
    assert undocumented == []
    shown = subprocess.run(
        ["ansible-doc", "-t", plugin_type, "--json", *(f"{FQCN}.{name}" for name in expected)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=_env(ANSIBLE_CONFIG=str(ROOT / "ansible.cfg")),
        timeout=HANG_GUARD_S,
    )
    assert shown.returncode == 0, shown.stderr
    docs = json.loads(shown.stdout)
    assert sorted(docs) == [f"{FQCN}.{name}" for name in expected]
    for name, entry in docs.items():
        assert entry["doc"].get("short_description"), name
        assert entry.get("examples"), name
        if plugin_type == "module":  # the doc fragments resolved: attributes, author and platform merged in
            attributes = entry["doc"]["attributes"]
            assert attributes["check_mode"]["support"] in ("full", "partial", "none"), name
            assert attributes["diff_mode"]["support"] in ("full", "partial", "none"), name
            assert attributes["platform"]["platforms"], name
            assert entry["doc"]["author"] == ["gpuforge maintainers (@gpuforge)"], name


# ---------------------------------------------------------------------------------------------------
# The built collection stands alone.


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    work = tmp_path_factory.mktemp("collection")
    run = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build_collection.sh")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        env=_env(GPUFORGE_BUILD_DIR=str(work / "build"), GPUFORGE_DIST_DIR=str(work / "dist")),
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return work


def test_the_tarball_holds_every_plugin_role_and_playbook(built):
    tarball = built / "dist" / f"gpuforge-cluster-{GALAXY['version']}.tar.gz"
    with tarfile.open(tarball) as archive:
        names = set(archive.getnames())
        assert not [member.name for member in archive.getmembers() if member.issym()], "links must be resolved"
    for module in MODULES:
        assert f"plugins/modules/{module}.py" in names
    for path in (ROOT / "module_utils").glob("*.py"):
        assert f"plugins/module_utils/{path.name}" in names
    for name, stem in FILTERS.items():
        assert f"plugins/filter/{stem}.py" in names and f"plugins/filter/{name}.yml" in names
    for role in (ROOT / "roles").iterdir():
        # A role has tasks, or (the gpuforge pin table) only defaults, in a file or a folder of files.
        assert f"roles/{role.name}/tasks/main.yml" in names or any(
            name.startswith(f"roles/{role.name}/defaults/main") for name in names
        )
    for playbook in (ROOT / "playbooks").glob("*.yml"):
        assert f"playbooks/{playbook.name}" in names
    assert "benchmarks/resnet50/resnet50_bench.py" in names
    with tarfile.open(tarball) as archive:
        manifest = json.load(archive.extractfile("MANIFEST.json"))
    assert manifest["collection_info"]["version"] == VERSION
    assert not any("__pycache__" in name for name in names)


def test_the_installed_collection_runs_its_playbooks_by_fqcn_without_the_checkout(built, tmp_path):
    # No ansible.cfg of the project (no roles_path, no collection/ link tree): only the installed tarball.
    config = tmp_path / "ansible.cfg"
    config.write_text("[defaults]\n", encoding="utf-8")
    env = _env(ANSIBLE_CONFIG=str(config), ANSIBLE_COLLECTIONS_PATH=str(built / "build" / "installed"))
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    gpu01:\n  children:\n    gpu_nodes:\n      hosts:\n        gpu01:\n")
    for playbook in ("site", "validate", "benchmark"):
        run = subprocess.run(
            ["ansible-playbook", "--syntax-check", "-i", str(inventory), f"{FQCN}.{playbook}"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=env,
            timeout=HANG_GUARD_S,
        )
        assert run.returncode == 0, f"{playbook}: {run.stdout[-2000:]}{run.stderr[-2000:]}"
    doc = subprocess.run(
        ["ansible-doc", f"{FQCN}.gpu_node_check"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=HANG_GUARD_S,
    )
    assert doc.returncode == 0 and "gpu_node_check" in doc.stdout, doc.stderr


# ---------------------------------------------------------------------------------------------------
# One set of pins: pyproject, galaxy.yml, requirements.yml, execution-environment.yml.


def _pyproject_pins() -> dict[str, str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    pins = {}
    for requirement in data["project"]["dependencies"]:
        name, _sep, version = requirement.partition("==")
        pins[name.split("[")[0].strip().lower()] = version.strip()
    return pins


def test_galaxy_dependencies_match_the_project_pins():
    requirements = yaml.safe_load((ROOT / "requirements.yml").read_text(encoding="utf-8"))
    assert GALAXY["dependencies"] == {item["name"]: item["version"] for item in requirements["collections"]}


def test_the_execution_environment_pins_what_the_project_pins():
    ee = yaml.safe_load((ROOT / "execution-environment.yml").read_text(encoding="utf-8"))
    pins = _pyproject_pins()
    deps = ee["dependencies"]
    assert deps["ansible_core"]["package_pip"] == f"ansible-core=={pins['ansible-core']}"
    assert deps["ansible_runner"]["package_pip"] == f"ansible-runner=={pins['ansible-runner']}"
    assert deps["galaxy"] == "requirements.yml"
    for requirement in deps["python"]:
        name, _sep, version = requirement.partition("==")
        assert version, f"{requirement}: unpinned"
        assert pins.get(name.lower()) == version, (
            f"{requirement} differs from pyproject.toml ({pins.get(name.lower())})"
        )
    tarball = f"gpuforge-cluster-{GALAXY['version']}.tar.gz"
    assert [item["src"] for item in ee["additional_build_files"]] == [f"dist/{tarball}"]
    assert any(tarball in step for step in ee["additional_build_steps"]["append_galaxy"])


def test_the_collection_readme_lists_every_module():
    """Galaxy shows the README: a module missing from its list is a module a user does not find."""
    readme = (TREE / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"`([a-z0-9_]+)`", readme.split("- Modules", 1)[1].split("- Filters", 1)[0]))
    assert listed == set(MODULES), f"missing: {sorted(set(MODULES) - listed)}, stale: {sorted(listed - set(MODULES))}"


# ---------------------------------------------------------------------------------------------------
# vendor_facts/ ships in the collection: the rolling upgrade reads it at run time.


def test_the_tarball_ships_the_vendor_facts_registry(built):
    tarball = built / "dist" / f"gpuforge-cluster-{GALAXY['version']}.tar.gz"
    with tarfile.open(tarball) as archive:
        names = set(archive.getnames())
    expected = {
        f"vendor_facts/{path.relative_to(ROOT / 'vendor_facts')}" for path in (ROOT / "vendor_facts").rglob("*.yml")
    }
    assert expected and expected <= names, sorted(expected - names)


def test_the_rolling_upgrade_finds_a_branch_s_releases_in_the_installed_collection(built, tmp_path):
    # The expression playbooks/runbooks/rolling_upgrade.yml evaluates, read from the installed copy and evaluated by
    # ansible with that playbook's folder as playbook_dir, no checkout on any path: what a site that installed the
    # tarball gets. (errors='ignore' in the look-up: a missing registry would be an empty list, not an error.)
    runbooks = built / "build" / "installed" / "ansible_collections" / "gpuforge" / "cluster" / "playbooks" / "runbooks"
    play = yaml.safe_load((runbooks / "rolling_upgrade.yml").read_text(encoding="utf-8"))
    expression = next(
        p["vars"]["gpuforge_upgrade_driver_published"]
        for p in play
        if "gpuforge_upgrade_driver_published" in p.get("vars", {})
    )
    config = tmp_path / "ansible.cfg"
    config.write_text("[defaults]\n", encoding="utf-8")
    extra = {"published": expression, "gpuforge_nvidia_driver_source": "nvidia", "gpuforge_os_key": "debian12"}
    run = subprocess.run(
        [
            "ansible",
            "localhost",
            "--playbook-dir",
            str(runbooks),
            "-e",
            json.dumps(extra),
            "-m",
            "ansible.builtin.debug",
            "-a",
            "var=published",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=_env(
            ANSIBLE_CONFIG=str(config),
            ANSIBLE_COLLECTIONS_PATH=str(built / "build" / "installed"),
            ANSIBLE_STDOUT_CALLBACK="json",
            ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
        ),
        timeout=HANG_GUARD_S,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    published = json.loads(run.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]["published"]
    registry = yaml.safe_load((ROOT / "vendor_facts" / "nvidia-cuda" / "debian12.yml").read_text(encoding="utf-8"))
    versions = next(p["versions"] for p in registry["packages"] if p["name"] == "cuda-drivers-570")
    releases = {v.split(":")[-1].split("-")[0] for v in versions}
    assert releases and releases <= set(published), published
