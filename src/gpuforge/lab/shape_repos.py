"""The lab mirror's repositories for OS-shaped nodes (lab/image/shapes.yml, docs/lab.md "OS shapes").

packages.yml `publish_os_shapes` names them: NVIDIA's flat apt repositories for Ubuntu, a subset of the Ubuntu
archive in its own layout (release, -updates and -security pockets), and RPM repositories for RHEL (rpm_repo).
Every package comes from the vendor facts registry, as in the Debian repositories (mirror.py).
"""

from __future__ import annotations

import gzip
import hashlib
import shutil
from pathlib import Path

from gpuforge import vendor_facts
from gpuforge.lab import debian_subset, mirror, rpm_repo, selinux_devel, toolchain


def _registry_packages(key: str, definitions: dict) -> tuple[vendor_facts.Repository, list[dict]]:
    repo = vendor_facts.repository(key)
    return repo, [mirror._from_registry(package, repo, definitions) for package in repo.packages]


def rpm_lab_tools(definitions: dict, debs: dict[str, Path] | None = None, work_root: Path | None = None) -> list[dict]:
    """The lab's own tool stand-ins built as RPMs for RHEL-shaped nodes: those whose only dependency is the simulator
    library (nvbandwidth, p2pBandwidthLatencyTest), and those packages.yml gives an ``rpm`` form (the nccl-tests
    stand-in: its ``depends`` replace the Debian ones, and the Debian packages its ``payload_from_debian`` names go
    into the RPM; packages.yml lists them so that what the required RPMs carry stays out). debs and work_root: the
    lab's Debian subset and where to lay out those payloads; without them the packages are returned without their
    payloads (what the repository will hold)."""
    sim = definitions["sim_package"]["name"]
    tools = []
    for package in definitions["lab_packages"]:
        rpm = package.get("rpm")
        if rpm is None:
            if set(package.get("depends") or []) <= {sim} and not package.get("scripts"):
                tools.append(dict(package, architecture="noarch"))
            continue
        spec = rpm["payload_from_debian"]
        package = {key: value for key, value in package.items() if key != "rpm"}
        # Debian's NumPy has compiled extensions: the RPM is for the node's architecture.
        package.update(depends=list(rpm["depends"]), architecture="x86_64")
        if debs is not None and work_root is not None:
            carried = payload_packages(spec, debs)
            payload = debian_payload(
                package["name"], spec, debs, work_root / f"payload-lab-{package['name']}", packages=carried
            )
            package.update(
                payload=payload,
                ldconfig=has_shared_libraries(payload),
                payload_description=f"files of Debian 12 {', '.join(carried)}",
            )
        tools.append(package)
    return tools


# Debian 12 puts programs under /sbin, /bin and /lib in its packages and relies on the merged /usr of its installations;
# RHEL 9 packages name the /usr paths.
_MERGED_USR = (("sbin/", "usr/sbin/"), ("bin/", "usr/bin/"), ("lib/", "usr/lib/"), ("lib64/", "usr/lib64/"))
# Debian package contents a RHEL package of the same program does not carry, or that nothing on a lab node reads.
_NOT_CARRIED = ("usr/share/doc/", "usr/share/man/", "usr/share/lintian/", "usr/share/locale/", "usr/share/info/")


def _debs_by_name(debs: list[Path]) -> dict[str, Path]:
    return {debian_subset.package_name(deb): deb for deb in debs}


def _extract(deb: Path, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    mirror._run(["dpkg-deb", "-x", str(deb), str(target)])


def _depends(deb: Path) -> list[list[str]]:
    """A .deb's Pre-Depends and Depends as alternatives of package names (versions and architectures dropped)."""
    fields = mirror._run(["dpkg-deb", "-f", str(deb), "Pre-Depends", "Depends"]).stdout.decode()
    # "Field: value" lines, a long value continued on lines that start with a space.
    values: list[str] = []
    for line in fields.splitlines():
        if line.startswith(" ") and values:
            values[-1] += " " + line.strip()
        elif ":" in line:
            values.append(line.split(":", 1)[1])
    groups = [group for value in values for group in value.split(",") if group.strip()]
    return [[name for name, _, _ in vendor_facts.parse_relation(group)] for group in groups]


def closure(names: list[str], debs: dict[str, Path], exclude: frozenset[str] = frozenset()) -> list[str]:
    """names and every package of the subset they depend on, transitively. A dependency that is not in the subset is
    in the lab image already (the subset holds what the image lacks), so it is not carried; nor is one in exclude
    (another package carries it)."""
    wanted, queue = [], list(names)
    while queue:
        name = queue.pop(0)
        if name in wanted or name not in debs or (name in exclude and name not in names):
            continue
        wanted.append(name)
        for group in _depends(debs[name]):
            if not any(alternative in wanted for alternative in group):
                queue.extend(alternative for alternative in group[:1] if alternative in debs)
    return wanted


def payload_packages(spec: dict, debs: dict[str, Path], exclude: frozenset[str] = frozenset()) -> list[str]:
    """The Debian packages whose files a payload carries: spec['debian'], with spec['with_dependencies'] and the
    subset's packages they depend on, less exclude."""
    return closure(spec["debian"], debs, exclude) if spec.get("with_dependencies") else list(spec["debian"])


def debian_payload(
    name: str,
    spec: dict,
    debs: dict[str, Path],
    work: Path,
    exclude: frozenset[str] = frozenset(),
    packages: list[str] | None = None,
) -> Path:
    """The files of the Debian packages spec['debian'] names (with spec['with_dependencies'], and the subset's
    packages they depend on), laid out as RHEL's package places them: merged /usr, path prefixes renamed by
    spec['rename'], documentation left out, spec['links'] added. Returns the tree."""
    raw, tree = work / "raw", work / "tree"
    shutil.rmtree(work, ignore_errors=True)
    # A metapackage (Debian's libboost-program-options-dev) carries only documentation, left out below: an empty tree.
    tree.mkdir(parents=True)
    missing = [debian_name for debian_name in spec["debian"] if debian_name not in debs]
    if missing:
        raise mirror.MirrorError(
            f"{name}: Debian package {missing[0]} is not in the lab's Debian subset; add it to "
            "lab/packages/debian.txt (lab/packages/packages.yml names it as the package's payload)"
        )
    # closure() keeps to the subset, so every name here has its .deb. packages: payload_packages' answer, when the
    # caller already has it.
    for debian_name in packages if packages is not None else payload_packages(spec, debs, exclude):
        _extract(debs[debian_name], raw)
    renames = sorted((spec.get("rename") or {}).items(), key=lambda item: -len(item[0]))
    for path in sorted(raw.rglob("*")):
        if path.is_dir() and not path.is_symlink() and any(path.iterdir()):
            continue  # created with what it holds; an empty one is carried as such (a directory the package owns)
        relative = str(path.relative_to(raw))
        for debian_prefix, usr_prefix in _MERGED_USR:
            if relative.startswith(debian_prefix):
                relative = usr_prefix + relative[len(debian_prefix) :]
        if relative.startswith(_NOT_CARRIED):
            continue
        for old, new in renames:
            if ("/" + relative).startswith(old):
                relative = (new + ("/" + relative)[len(old) :]).lstrip("/")
        target = tree / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir() and not path.is_symlink():
            target.mkdir(exist_ok=True)
        elif path.is_symlink():
            target.symlink_to(path.readlink())
        else:
            shutil.copy2(path, target)
    for link, target in sorted((spec.get("links") or {}).items()):
        path = tree / link.lstrip("/")
        if path.exists() or path.is_symlink():
            raise mirror.MirrorError(f"{name}: links {link}: the payload has that path already")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(target)
    shutil.rmtree(raw, ignore_errors=True)
    return tree


def generated_payload(name: str, generator: str, debs: dict[str, Path], work: Path) -> Path:
    """A payload the mirror generates (packages.yml rpm_payload_generated)."""
    if generator != "rhel_like_selinux_devel":
        raise mirror.MirrorError(f"{name}: unknown payload generator {generator!r} in lab/packages/packages.yml")
    shutil.rmtree(work, ignore_errors=True)
    raw = work / "raw"
    deb = debs.get("selinux-policy-dev")
    if deb is None:
        raise mirror.MirrorError(f"{name}: Debian's selinux-policy-dev is not in the lab's Debian subset")
    _extract(deb, raw)
    tree = work / "tree"
    target = tree / "usr/share/selinux"
    target.mkdir(parents=True)
    selinux_devel.build_rhel_like_tree(raw / "usr/share/selinux/devel", target)
    shutil.rmtree(raw, ignore_errors=True)
    return tree


def has_shared_libraries(tree: Path) -> bool:
    """Whether a payload holds a shared library (lib*.so.<version>, a file, not a link). Debian's packages of such
    files ship no link from the library's SONAME (libnetplan0 has libnetplan.so.0.0, not libnetplan.so.0): their
    `triggers` file (activate-noawait ldconfig, dh_makeshlibs) has ldconfig make it. RHEL's glibc runs ldconfig for
    every package through its own file triggers, which Debian's rpm and glibc underneath the lab's RHEL shapes do not
    have. Without the link neither a program linked to the library nor ctypes.util.find_library finds it (netplan's
    Python CLI loaded its own executable instead: "undefined symbol: netplan_get_id_from_nm_filename")."""
    return any(
        path.is_file() and not path.is_symlink() and path.name.startswith("lib") for path in tree.rglob("*.so.*")
    )


def with_payloads(
    packages: list[dict], definitions: dict, debs: dict[str, Path], work_root: Path, package_format: str = "rpm"
) -> list[dict]:
    """The registry's packages of one repository, those packages.yml gives a Debian or generated payload carrying it
    (<package_format>_payload_from_debian, rpm_payload_generated)."""
    from_debian = definitions.get(f"{package_format}_payload_from_debian") or {}
    generated = definitions.get(f"{package_format}_payload_generated") or {}
    # What another package carries stays out of a dependency closure: two packages must not hold the same file (dpkg
    # refuses to overwrite another package's file). Claimed: the Debian packages any entry names, whichever repository
    # its package is in (a RHEL node enables BaseOS, AppStream and EPEL together); carried: what an earlier package of
    # this repository's closures took.
    claimed = frozenset(debian for spec in from_debian.values() for debian in spec["debian"])
    carried: set[str] = set()
    result = []
    for package in packages:
        name = package["name"]
        work = work_root / f"payload-{package_format}-{name}"
        if name in from_debian:
            spec = from_debian[name]
            # Resolved once: each dependency read is a dpkg-deb run.
            carried_here = payload_packages(spec, debs, (claimed | carried) - set(spec["debian"]))
            carried.update(carried_here)
            payload = debian_payload(name, spec, debs, work, packages=carried_here)
            debian_names = ", ".join(spec["debian"])
            package = dict(
                package,
                payload=payload,
                post=spec.get("post"),
                ldconfig=has_shared_libraries(payload),
                # A payload with its dependencies runs to hundreds of MB (the compilers): gzip -1, not -9.
                fast_compression=bool(spec.get("with_dependencies")),
                payload_description=f"files of Debian 12 {debian_names}",
                description=f"{name} - gpuforge lab repackaging of Debian 12 {debian_names}",
            )
        elif name in generated:
            payload = generated_payload(name, generated[name], debs, work)
            package = dict(
                package,
                payload=payload,
                payload_description="RHEL-like devel tree generated from Debian refpolicy and the registry",
                description=f"{name} - gpuforge lab build: RHEL-like devel tree from the vendor facts registry",
            )
        result.append(package)
    return result


def rpm_flavour(repo: vendor_facts.Repository, packages: list[dict]) -> list[dict]:
    """A registry file of .deb packages published as RPMs too (IBM's installer extracts both gpfs_debs/ and
    gpfs_rpms/): the RPM names and architectures its facts rpm_names and rpm_architectures record."""
    names = repo.facts.get("rpm_names", {}).get("value") or {}
    architectures = {
        name: architecture
        for architecture, members in (repo.facts.get("rpm_architectures", {}).get("value") or {}).items()
        for name in members
    }
    result = []
    for package in packages:
        name = names.get(package["name"], package["name"])
        if name not in architectures:
            raise mirror.MirrorError(f"vendor_facts/{repo.key}.yml: no RPM architecture for {name} (rpm_architectures)")
        result.append(dict(package, name=name, architecture=architectures[name]))
    return result


def pockets(repo: vendor_facts.Repository, suites: list[str], package: dict) -> list[str]:
    """The pockets a package version is published in: the registry's security build of a package in
    <suite>-updates and <suite>-security (Ubuntu copies security builds to -updates), any other in the release."""
    security = repo.facts.get("security_updates", {}).get("value") or {}
    release = suites[0]
    if security.get(package["name"]) == package["version"]:
        return [suite for suite in suites if suite != release] or [release]
    return [release]


def publish_archive(path: str, spec: dict, definitions: dict, staging_root: Path, next_root: Path,
                    key: mirror.SigningKey, debs: list[Path] | None = None) -> None:  # fmt: skip
    """An Ubuntu archive subset holding one or more releases, as archive.ubuntu.com does:
    pool/<pocket>/<component>/*.deb, dists/<pocket>/<component>/binary-amd64 for every pocket of every release."""
    root = next_root / path
    components = list(spec["components"])
    for release in spec["releases"]:
        suites = [str(suite) for suite in vendor_facts.repository(release["suites_from"]).fact("suites")]
        for registry_key in release["registry"]:
            repo, packages = _registry_packages(registry_key, definitions)
            packages = with_payloads(packages, definitions, _debs_by_name(debs or []), staging_root, "deb")
            for package in packages:
                component = next((p.component for p in repo.packages if p.name == package["name"]), "") or "main"
                if component not in components:
                    raise mirror.MirrorError(
                        f"vendor_facts/{registry_key}.yml: {package['name']} in unknown {component}"
                    )
                for pocket in pockets(repo, suites, package):
                    output = root / "pool" / pocket / component
                    output.mkdir(parents=True, exist_ok=True)
                    mirror.build_deb(package, staging_root / f"{package['name']}_{package['version']}", output)
        for pocket in suites:
            _index_pocket(root, pocket, suites[0], components, key)


def _index_pocket(root: Path, pocket: str, codename: str, components: list[str], key: mirror.SigningKey) -> None:
    suite_dir = root / "dists" / pocket
    for component in components:
        binary = suite_dir / component / "binary-amd64"
        binary.mkdir(parents=True, exist_ok=True)
        pool = root / "pool" / pocket / component
        packages = (
            mirror._run(["apt-ftparchive", "packages", f"pool/{pocket}/{component}"], cwd=root).stdout
            if pool.is_dir()
            else b""
        )
        (binary / "Packages").write_bytes(packages)
        (binary / "Packages.gz").write_bytes(gzip.compress(packages, mtime=0))
    options = {
        "Origin": "Ubuntu",
        "Label": "Ubuntu (gpuforge lab subset)",
        "Suite": pocket,
        "Codename": codename,
        "Architectures": "amd64",
        "Components": " ".join(components),
    }
    mirror._release(suite_dir, options, key)


def publish(definitions: dict, key: mirror.SigningKey, staging_root: Path, next_root: Path, debs: list[Path],
            log=print) -> None:  # fmt: skip
    """Build every OS-shape repository into next_root and swap each into the served mirror. debs: the lab's Debian
    subset, whose files some RHEL packages carry (packages.yml rpm_payload_from_debian)."""
    shapes = definitions.get("publish_os_shapes") or {}
    toolkit = toolchain.load()  # read once for the replaces() of every package below
    served: list[str] = []
    for registry_key, path in (shapes.get("deb") or {}).items():
        _, packages = _registry_packages(registry_key, definitions)
        output = next_root / path
        output.mkdir(parents=True, exist_ok=True)
        for package in packages:
            # NVIDIA's toolkit pieces and NCCL: the wheels' files (below), or not published at all, never empty.
            if mirror.missing_simulators(package) or toolchain.replaces(package["name"], package["version"], toolkit):
                continue
            mirror.build_deb(package, staging_root / f"{package['name']}_{package['version']}", output)
        toolchain.build_other_debs(registry_key, output, staging_root, log=log)
        mirror._index(output, f"gpuforge-lab-{registry_key.replace('/', '-')}", key)
        served.append(path)
    for path, spec in (shapes.get("archives") or {}).items():
        publish_archive(path, spec, definitions, staging_root, next_root, key, debs)
        served.append(path)
    if shapes.get("rpm"):
        missing = rpm_repo.tools_available()
        if missing:
            raise mirror.MirrorError(f"RPM tools missing on the control machine: {', '.join(missing)} (make setup)")
    for registry_key, path in (shapes.get("rpm") or {}).items():
        repo, packages = _registry_packages(registry_key, definitions)
        packages = [package for package in packages if not mirror.missing_simulators(package)]
        if repo.package_format == "deb":
            packages = rpm_flavour(repo, packages)
        packages = with_payloads(packages, definitions, _debs_by_name(debs), staging_root)
        # NVIDIA's CUDA toolkit pieces and NCCL, repackaged from its wheels (lab/packages/cuda-toolkit.yml `rpm`).
        packages = toolchain.rpm_payloads(registry_key, packages, staging_root)
        modules = rpm_repo.module_streams(repo, packages) if "module_streams" in repo.facts else ""
        rpm_repo.publish(path, packages, staging_root, next_root, key, modules)
        served.append(path)
    if shapes.get("rpm_lab_tools"):
        sim = dict(definitions["sim_package"], kind="sim", architecture="noarch")
        tools = rpm_lab_tools(definitions, _debs_by_name(debs), staging_root)
        rpm_repo.publish(shapes["rpm_lab_tools"], [sim, *tools], staging_root, next_root, key)
        served.append(shapes["rpm_lab_tools"])
    for path in served:
        _swap(next_root / path, mirror.MIRROR_ROOT / path)
    for path in shapes.get("key_copies") or []:
        target = mirror.MIRROR_ROOT / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(key.path.read_bytes())
    if served:
        log("lab: OS-shape repositories published: " + ", ".join(served))


def _swap(new: Path, target: Path) -> None:
    mirror._swap(new, target)
    shutil.rmtree(new, ignore_errors=True)


def code_hash() -> str:
    """What the OS shapes' repositories are built by (this module, rpm_repo, selinux_devel and toolchain): a change
    rebuilds the mirror."""
    digest = hashlib.sha256()
    for module in (__file__, rpm_repo.__file__, selinux_devel.__file__, toolchain.__file__):
        digest.update(Path(module).read_bytes())
    return digest.hexdigest()[:16]
