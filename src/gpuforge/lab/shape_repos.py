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
from gpuforge.lab import mirror, rpm_repo


def _registry_packages(key: str, definitions: dict) -> tuple[vendor_facts.Repository, list[dict]]:
    repo = vendor_facts.repository(key)
    return repo, [mirror._from_registry(package, repo, definitions) for package in repo.packages]


def rpm_lab_tools(definitions: dict) -> list[dict]:
    """The lab's own tool stand-ins built as RPMs for RHEL-shaped nodes: those whose only dependency is the simulator
    library (nvbandwidth, p2pBandwidthLatencyTest). The nccl-tests stand-in runs on Debian's Open MPI and mpi4py,
    which no RHEL-shaped node has (docs/lab.md, "OS shapes"), so it is not among them."""
    sim = definitions["sim_package"]["name"]
    return [
        dict(package, architecture="noarch")
        for package in definitions["lab_packages"]
        if set(package.get("depends") or []) <= {sim} and not package.get("scripts")
    ]


def pockets(repo: vendor_facts.Repository, suites: list[str], package: dict) -> list[str]:
    """The pockets a package version is published in: the registry's security build of a package in
    <suite>-updates and <suite>-security (Ubuntu copies security builds to -updates), any other in the release."""
    security = repo.facts.get("security_updates", {}).get("value") or {}
    release = suites[0]
    if security.get(package["name"]) == package["version"]:
        return [suite for suite in suites if suite != release] or [release]
    return [release]


def publish_archive(path: str, spec: dict, definitions: dict, staging_root: Path, next_root: Path,
                    key: mirror.SigningKey) -> None:  # fmt: skip
    """An Ubuntu archive subset holding one or more releases, as archive.ubuntu.com does:
    pool/<pocket>/<component>/*.deb, dists/<pocket>/<component>/binary-amd64 for every pocket of every release."""
    root = next_root / path
    components = list(spec["components"])
    for release in spec["releases"]:
        suites = [str(suite) for suite in vendor_facts.repository(release["suites_from"]).fact("suites")]
        for registry_key in release["registry"]:
            repo, packages = _registry_packages(registry_key, definitions)
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


def publish(definitions: dict, key: mirror.SigningKey, staging_root: Path, next_root: Path, log=print) -> None:
    """Build every OS-shape repository into next_root and swap each into the served mirror."""
    shapes = definitions.get("publish_os_shapes") or {}
    served: list[str] = []
    for registry_key, path in (shapes.get("deb") or {}).items():
        _, packages = _registry_packages(registry_key, definitions)
        output = next_root / path
        output.mkdir(parents=True, exist_ok=True)
        for package in packages:
            if mirror.missing_simulators(package):
                continue
            mirror.build_deb(package, staging_root / f"{package['name']}_{package['version']}", output)
        mirror._index(output, f"gpuforge-lab-{registry_key.replace('/', '-')}", key)
        served.append(path)
    for path, spec in (shapes.get("archives") or {}).items():
        publish_archive(path, spec, definitions, staging_root, next_root, key)
        served.append(path)
    if shapes.get("rpm"):
        missing = rpm_repo.tools_available()
        if missing:
            raise mirror.MirrorError(f"RPM tools missing on the control machine: {', '.join(missing)} (make setup)")
    for registry_key, path in (shapes.get("rpm") or {}).items():
        repo, packages = _registry_packages(registry_key, definitions)
        packages = [package for package in packages if not mirror.missing_simulators(package)]
        modules = rpm_repo.module_streams(repo, packages) if "module_streams" in repo.facts else ""
        rpm_repo.publish(path, packages, staging_root, next_root, key, modules)
        served.append(path)
    if shapes.get("rpm_lab_tools"):
        sim = dict(definitions["sim_package"], kind="sim", architecture="noarch")
        rpm_repo.publish(shapes["rpm_lab_tools"], [sim, *rpm_lab_tools(definitions)], staging_root, next_root, key)
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
    """What the OS shapes' repositories are built by (this module and rpm_repo): a change rebuilds the mirror."""
    digest = hashlib.sha256()
    for module in (__file__, rpm_repo.__file__):
        digest.update(Path(module).read_bytes())
    return digest.hexdigest()[:16]
