"""Every OS a role claims in meta/main.yml is proven by a Molecule platform of that OS shape in a CI scenario.

A claim no CI scenario proves must be listed in molecule/os-claims-unproven.txt (one "<role> <shape>" per line);
the list may only shrink: a listed pair that a scenario now proves, or that no role claims, fails too. The
guide's rule is that a role runs in Molecule on every OS it lists, or refuses it naming the supported ones; this
test keeps the distance to that rule written down and stops it from growing.
"""

import re

import yaml

from gpuforge.paths import PROJECT_ROOT

MOLECULE = PROJECT_ROOT / "molecule"
ROLES = PROJECT_ROOT / "roles"
UNPROVEN = MOLECULE / "os-claims-unproven.txt"
# Galaxy platform names and versions (meta/main.yml) -> lab OS shape (lab/image/shapes.yml).
GALAXY_SHAPES = {
    ("Debian", "bookworm"): "debian12",
    ("Ubuntu", "jammy"): "ubuntu2204",
    ("Ubuntu", "noble"): "ubuntu2404",
    ("EL", "8"): "rhel8",
    ("EL", "9"): "rhel9",
}
# "GenericLinux: all" claims every Linux gpuforge supports, so every shape but rhel8: that shape exists to show why
# RHEL 8 is refused (ansible-core 2.17+ cannot run its dnf bindings' Python 3.6; tests/lab/test_rhel8_shape.py).
GENERIC_LINUX = ("GenericLinux", "all")
REFUSED_SHAPES = {"rhel8"}
_IMAGE_SHAPE = re.compile(r"^\$\{GPUFORGE_LAB_IMAGE(?:_([A-Z0-9]+))?\}$")
_ROLE_REFERENCE = re.compile(r"^\s*(?:-\s*)?(?:role|name):\s*['\"]?([a-z0-9_]+)['\"]?\s*$", re.MULTILINE)


def claims() -> set[tuple[str, str]]:
    found = set()
    for meta in sorted(ROLES.glob("*/meta/main.yml")):
        platforms = (yaml.safe_load(meta.read_text(encoding="utf-8")).get("galaxy_info") or {}).get("platforms") or []
        for platform in platforms:
            for version in platform.get("versions") or []:
                key = (platform["name"], str(version))
                every = sorted(set(GALAXY_SHAPES.values()) - REFUSED_SHAPES)
                shapes = every if key == GENERIC_LINUX else [GALAXY_SHAPES[key]]
                found |= {(meta.parent.parent.name, shape) for shape in shapes}
    return found


def _roles_named(text: str) -> set[str]:
    return {name for name in _ROLE_REFERENCE.findall(text) if (ROLES / name).is_dir()}


def roles_run_by(role: str, seen: set[str] | None = None) -> set[str]:
    """The role, its meta dependencies and the roles its tasks include or import, transitively."""
    seen = seen if seen is not None else set()
    if role in seen:
        return seen
    seen.add(role)
    texts = [path.read_text(encoding="utf-8") for path in (ROLES / role).glob("tasks/*.yml")]
    meta = ROLES / role / "meta/main.yml"
    dependencies = (yaml.safe_load(meta.read_text(encoding="utf-8")) or {}).get("dependencies") or []
    named = {d["role"] if isinstance(d, dict) else d for d in dependencies}
    for text in texts:
        named |= {m for m in re.findall(r"name:\s*['\"]?([a-z0-9_]+)", text) if (ROLES / m).is_dir()}
    for other in named:
        roles_run_by(other, seen)
    return seen


def scenario_platforms(scenario: str) -> list[dict]:
    """The scenario's platforms, each with its OS shape (from its lab image variable) and the names a play's hosts
    pattern can match (its name, its groups, all)."""
    config = yaml.safe_load((MOLECULE / scenario / "molecule.yml").read_text(encoding="utf-8"))
    platforms = config.get("platforms")
    if platforms is None:  # the shared platform (.config/molecule/config.yml): the lab image itself
        shared = yaml.safe_load((PROJECT_ROOT / ".config/molecule/config.yml").read_text(encoding="utf-8"))
        platforms = shared["platforms"]
    found = []
    for platform in platforms:
        match = _IMAGE_SHAPE.match(str(platform["image"]))
        assert match, f"molecule/{scenario}: platform {platform['name']} has no lab image variable"
        names = {"all", platform["name"], *(platform.get("groups") or [])}
        found.append({"shape": (match.group(1) or "DEBIAN12").lower(), "names": names})
    return found


def scenario_shapes(scenario: str) -> set[str]:
    return {platform["shape"] for platform in scenario_platforms(scenario)}


def matches(pattern: str, names: set[str]) -> bool:
    """Whether a host with these names (its own, its groups, all) is in an Ansible hosts pattern: terms joined by
    ':' or ',', '!' excluding and '&' intersecting. A templated pattern counts as every host."""
    if "{{" in pattern:
        return True
    terms = [term.strip() for term in re.split(r"[:,]", pattern) if term.strip()]
    included = any(term in names for term in terms if term[0] not in "!&")
    excluded = any(term[1:] in names for term in terms if term.startswith("!"))
    intersected = all(term[1:] in names for term in terms if term.startswith("&"))
    return included and not excluded and intersected


def plays(path, seen: set | None = None) -> list[dict]:
    """The plays of a playbook and of the playbooks it imports (import_playbook), transitively."""
    seen = seen if seen is not None else set()
    path = path.resolve()
    if path in seen or not path.is_file():
        return []
    seen.add(path)
    found = []
    for play in yaml.safe_load(path.read_text(encoding="utf-8")) or []:
        target = play.get("ansible.builtin.import_playbook") or play.get("import_playbook")
        if target:
            found += plays(path.parent / target, seen)
        else:
            found.append(play)
    return found


def ci_scenarios() -> list[str]:
    lines = (MOLECULE / "ci-scenarios.txt").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def proven() -> set[tuple[str, str]]:
    """(role, shape) for every role a CI scenario's converge, prepare or side effect runs on a platform of that shape:
    each play's roles on the platforms its hosts pattern matches (a role whose every run is a change, such as
    slurm_job's job submissions, runs in the side effect: converge is held to changed=0 on its second run)."""
    pairs = set()
    for scenario in ci_scenarios():
        pairs |= scenario_pairs(scenario)
    return pairs


def scenario_pairs(scenario: str) -> set[tuple[str, str]]:
    """(role, shape) for one scenario: each play's roles on the shapes of the platforms its hosts pattern matches."""
    pairs = set()
    platforms = scenario_platforms(scenario)
    for name in ("converge.yml", "prepare.yml", "side_effect.yml"):
        for play in plays(MOLECULE / scenario / name):
            shapes = {p["shape"] for p in platforms if matches(str(play.get("hosts", "all")), p["names"])}
            roles = set()
            for role in _roles_named(yaml.safe_dump(play)):
                roles |= roles_run_by(role)
            pairs |= {(role, shape) for role in roles for shape in shapes}
    return pairs


def playbook_targets() -> dict[str, set[str]]:
    """{role: kinds} over every play of playbooks/*.yml (imports followed): "controller" for a play on localhost,
    "hosts" for a play on managed hosts; a role counts for the plays that name it and for those of the roles that
    name it."""
    targets: dict[str, set[str]] = {}
    for playbook in sorted((PROJECT_ROOT / "playbooks").glob("*.yml")):
        for play in plays(playbook):
            kind = "controller" if str(play.get("hosts")) == "localhost" else "hosts"
            for named in _roles_named(yaml.safe_dump(play)):
                for role in roles_run_by(named):
                    targets.setdefault(role, set()).add(kind)
    return targets


def unproven_list() -> set[tuple[str, str]]:
    lines = UNPROVEN.read_text(encoding="utf-8").splitlines()
    return {tuple(line.split()[:2]) for line in lines if line.strip() and not line.startswith("#")}


def test_every_claimed_os_is_proven_in_molecule_or_listed_as_unproven():
    missing = sorted(claims() - proven() - unproven_list())
    assert not missing, (
        "roles claim these OSes in meta/main.yml without a CI Molecule scenario on that OS shape; add a platform, "
        f"or narrow meta/main.yml and refuse the OS naming the supported ones: {missing}"
    )


def test_the_unproven_list_only_shrinks():
    listed = unproven_list()
    now_proven = sorted(listed & proven())
    assert not now_proven, f"proven now, remove from {UNPROVEN.name}: {now_proven}"
    unclaimed = sorted(listed - claims())
    assert not unclaimed, f"no role claims these any more, remove from {UNPROVEN.name}: {unclaimed}"


def test_a_shaped_scenario_counts_for_its_shape_only():
    assert scenario_shapes("nvidia_driver") == {"debian12"}
    assert scenario_shapes("os_shapes") == {"rhel9", "ubuntu2204", "ubuntu2404"}
    assert ("nvidia_driver", "debian12") in proven()


def test_a_role_counts_for_the_shapes_of_the_hosts_its_play_runs_on():
    # molecule/slurm: the side effect's job play on slurm_controller runs on its Ubuntu 24.04 head node only, the
    # compute play on the Debian 12 and RHEL 9 nodes; the driver (prepare, gpu_nodes) skips the head node.
    pairs = scenario_pairs("slurm")
    assert {("slurm_job", "ubuntu2404"), ("slurm_job", "rhel9"), ("slurm_job", "debian12")} <= pairs
    assert ("nvidia_driver", "rhel9") in pairs
    assert ("nvidia_driver", "ubuntu2404") not in pairs
    assert ("nfs_server", "ubuntu2204") in proven()
    assert matches("all:!os_debian12", {"all", "n", "os_rhel9"})
    assert not matches("all:!os_debian12", {"all", "n", "os_debian12"})
    assert matches("slurm_controller:slurm_compute", {"all", "h", "slurm_compute"})
    assert not matches("gpu_nodes:&os_rhel9", {"all", "h", "gpu_nodes", "os_debian12"})


def test_roles_run_by_follows_dependencies_and_includes():
    assert {"nvidia_driver", "gpuforge", "vendor_repository"} <= roles_run_by("nvidia_driver")


def test_every_shape_in_the_mapping_exists_in_the_lab():
    shapes = set(yaml.safe_load((PROJECT_ROOT / "lab/image/shapes.yml").read_text(encoding="utf-8")))
    assert set(GALAXY_SHAPES.values()) <= shapes


def test_unproven_file_is_sorted_and_unique():
    lines = [line for line in UNPROVEN.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]
    assert lines == sorted(set(lines))


def test_no_role_claims_a_refused_shape():
    """RHEL 8 is refused by every host role (roles/gpuforge/defaults/main/rhcos.yml) and by the inventory check."""
    assert sorted(claim for claim in claims() if claim[1] in REFUSED_SHAPES) == []


def test_controller_roles_claim_no_host_os_and_only_they_claim_none():
    """A role that only controller plays run (the Kubernetes add-ons: playbooks/k8s_addons.yml, hosts: localhost)
    changes the Kubernetes API and the controller's artifacts, not a managed host: it lists no platforms, and its
    runs are the unit suite's renders on the controller (tests/unit/k8s). Every other role claims at least one OS, so
    that a host role cannot leave the Molecule rule above by dropping its platforms."""
    targets = playbook_targets()
    controller_only = {role for role, kinds in targets.items() if kinds == {"controller"}}
    claiming = {role for role, _shape in claims()}
    assert sorted(controller_only & claiming) == []
    every_role = {meta.parent.parent.name for meta in ROLES.glob("*/meta/main.yml")}
    assert sorted(every_role - claiming - controller_only) == []
    # The classification itself: the add-on roles are the controller's, the host stack's roles are not.
    assert {"k8s_addons_common", "mpi_operator", "node_health_k8s", "spectrum_scale_csi"} <= controller_only
    assert not {"nvidia_driver", "gpuforge", "slurm", "gpuforge_bench"} & controller_only
