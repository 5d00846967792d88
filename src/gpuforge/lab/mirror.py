"""The lab's vendor package mirror: .deb packages built with dpkg-deb, indexed with
apt-ftparchive and signed with a key generated for this lab, laid out as flat
repositories like the vendors' own (and, for a vendor that publishes release files instead of a
repository, as its release download directories with a SHA256SUMS: packages.yml `publish_releases`).

Names, versions, relations, files, units and kernel modules come from the vendor facts registry
(vendor_facts/, gpuforge.vendor_facts), never from role variables; lab/packages/packages.yml says only
which registry repositories to publish and which simulator answers for which vendor path.
"""

from __future__ import annotations

import fnmatch
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from gpuforge import vendor_facts
from gpuforge.lab import debian_subset, toolchain
from gpuforge.paths import LAB_DIR, LAB_STATE_DIR, PROJECT_ROOT

PACKAGES_FILE = LAB_DIR / "packages" / "packages.yml"
SIM_DIR = LAB_DIR / "sim" / "gpuforge_sim"
MIRROR_ROOT = LAB_STATE_DIR / "mirror"
GNUPG_HOME = LAB_STATE_DIR / "gnupg"
KEY_FILE_NAME = "gpuforge-lab-archive-keyring.asc"
KEY_UID = "gpuforge lab mirror signing key <lab-mirror@gpuforge.invalid>"
MIRROR_URL = "http://mirror"
LAB_TOOLS = "lab-tools"


class MirrorError(RuntimeError):
    """The mirror could not be built; the message says which package or step and why."""


@dataclass
class SigningKey:
    fingerprint: str
    sha256: str
    path: Path


@dataclass
class Repository:
    root: Path
    url: str


# Timestamp of every file the lab packages (2023-11-14T22:13:20Z): any fixed value makes builds reproducible.
REPRODUCIBLE_EPOCH = 1_700_000_000


def _run(command: list[str], extra_env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    env = dict(os.environ, GNUPGHOME=str(GNUPG_HOME), LC_ALL="C", **(extra_env or {}))
    proc = subprocess.run(command, capture_output=True, env=env, check=False, **kwargs)
    if proc.returncode != 0:
        raise MirrorError(f"{' '.join(command[:3])} failed: {proc.stderr.decode(errors='replace').strip()}")
    return proc


def signing_key() -> SigningKey:
    """The lab's archive key, generated once per control machine (it stands in for each vendor's key)."""
    GNUPG_HOME.mkdir(parents=True, exist_ok=True, mode=0o700)
    probe = subprocess.run(
        ["gpg", "--batch", "--with-colons", "--list-secret-keys"],
        capture_output=True,
        env=dict(os.environ, GNUPGHOME=str(GNUPG_HOME)),
        check=False,
    )
    if b"fpr:" not in probe.stdout:
        _run(["gpg", "--batch", "--passphrase", "", "--quick-gen-key", KEY_UID, "rsa3072", "sign", "never"])
        probe = _run(["gpg", "--batch", "--with-colons", "--list-secret-keys"])
    fingerprint = next(line.split(":")[9] for line in probe.stdout.decode().splitlines() if line.startswith("fpr:"))
    armored = _run(["gpg", "--batch", "--armor", "--export", fingerprint]).stdout
    path = MIRROR_ROOT / KEY_FILE_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_bytes() != armored:
        path.write_bytes(armored)
    return SigningKey(fingerprint, hashlib.sha256(armored).hexdigest(), path)


def load_definitions() -> dict:
    return yaml.safe_load(PACKAGES_FILE.read_text(encoding="utf-8"))


def registry_repositories(definitions: dict) -> list[vendor_facts.Repository]:
    """The registry repositories the lab publishes (packages.yml `publish`), each with a lab_path."""
    repos = []
    for key in definitions["publish"]:
        repo = vendor_facts.repository(key)
        if not repo.lab_path or repo.package_format != "deb":
            raise MirrorError(f"vendor_facts/{key}.yml: the lab publishes only deb repositories with a lab_path")
        repos.append(repo)
    return repos


def release_repositories(definitions: dict) -> list[vendor_facts.Repository]:
    """The registry repositories the lab publishes as release downloads (packages.yml `publish_releases`): no apt
    index, each version's files in <lab_path>/v<upstream>/ with a SHA256SUMS file, as a project's release page
    serves them (vendor_facts/apptainer/deb.yml)."""
    repos = []
    for key in definitions.get("publish_releases") or []:
        repo = vendor_facts.repository(key)
        if not repo.lab_path or repo.package_format not in ("deb", "rpm"):
            raise MirrorError(f"vendor_facts/{key}.yml: the lab publishes only deb or rpm releases with a lab_path")
        repos.append(repo)
    return repos


def _simulator(definitions: dict, path: str) -> str | None:
    for pattern, module in definitions["simulators"].items():
        if fnmatch.fnmatchcase(path, pattern):
            return module
    return None


def _branch_fact(repo: vendor_facts.Repository, name: str):
    """A fact of the driver branch, not of the OS (the CUDA version per branch, from NVIDIA's CUDA release notes): the
    repository's own, else the one its sibling registry files record (nvidia-cuda/debian12 for nvidia-cuda/rhel9)."""
    if name in repo.facts:
        return repo.fact(name)
    source = repo.key.split("/")[0]
    for key, sibling in sorted(vendor_facts.load_all().items()):
        if key.split("/")[0] == source and name in sibling.facts:
            return sibling.fact(name)
    return repo.fact(name)


def _data_text(template: str, package: vendor_facts.Package, repo: vendor_facts.Repository) -> str:
    def fact(match: re.Match) -> str:
        return str(repo.fact(match.group(1)))

    text = re.sub(r"\{fact:([a-z0-9_]+)\}", fact, template)
    # A tool never prints the package epoch (the RPM driver packages' "3:", DCGM's "1:").
    upstream = package.upstream.split(":")[-1]
    if "{cuda}" in text:
        branch = upstream.split(".")[0]
        text = text.replace("{cuda}", str(_branch_fact(repo, "cuda_version_by_branch")[branch]))
    return text.replace("{upstream}", upstream)


def _from_registry(package: vendor_facts.Package, repo: vendor_facts.Repository, definitions: dict) -> dict:
    """A registry package as the lab builds it: the vendor's name, version and relations, with the lab's
    simulators behind the vendor's file paths."""
    commands = {path: _simulator(definitions, path) for path in package.files}
    commands = {path: module for path, module in commands.items() if module}
    files = {}
    for path in package.files:
        for data_path, template in (definitions["data_files"].get(path) or {}).items():
            files[data_path] = _data_text(template, package, repo)
    depends = list(package.depends)
    if commands:
        depends.append(definitions["sim_package"]["name"])
    modules = {name: definitions["kernel_modules"][name] for name in package.kernel_modules}
    own_units = (definitions.get("units_by_repository") or {}).get(repo.key) or {}
    units = {name: own_units.get(name) or definitions["units"][name] for name in package.units}
    return {
        "name": package.name,
        "version": package.version,
        "repo": repo.key,
        "architecture": package.architecture,
        "depends": depends,
        "provides": list(package.provides),
        "conflicts": list(package.conflicts),
        "description": f"{package.name} ({repo.title}) - gpuforge lab build: simulated payload",
        "commands": commands,
        "files": files,
        "modules": modules,
        "units": units,
    }


def expand(definitions: dict) -> list[dict]:
    """Every package the mirror builds: each version of each registry package of the published repositories,
    the simulator library, and the lab's own stand-ins."""
    sim = definitions["sim_package"]
    packages = [dict(sim, repo=LAB_TOOLS, kind="sim")]
    for repo in registry_repositories(definitions) + release_repositories(definitions):
        packages.extend(_from_registry(package, repo, definitions) for package in repo.packages)
    packages.extend(dict(package, repo=LAB_TOOLS) for package in definitions["lab_packages"])
    return packages


def archive_packages(definitions: dict) -> list[dict]:
    """The registry packages of the distribution's own archive that the lab builds and publishes in its Debian archive
    in place of Debian's builds (packages.yml ``publish_in_debian_archive``: the in-box InfiniBand stack)."""
    packages = []
    for key, names in (definitions.get("publish_in_debian_archive") or {}).items():
        repo = vendor_facts.repository(key)
        found = [package for package in repo.packages if package.name in names]
        missing = sorted(set(names) - {package.name for package in found})
        if missing:
            raise MirrorError(
                f"lab/packages/packages.yml publish_in_debian_archive: vendor_facts/{key}.yml has no {missing}"
            )
        packages.extend(_from_registry(package, repo, definitions) for package in found)
    # A registry package skipped for a missing simulator (build()) is left out of its repository; one of the archive
    # cannot be: Debian's own build of the name would be served in its place, with the real tools a lab node cannot run.
    unsimulated = [
        f"{package['name']} needs {', '.join(missing)}"
        for package in packages
        if (missing := missing_simulators(package))
    ]
    if unsimulated:
        raise MirrorError(
            "lab/packages/packages.yml publish_in_debian_archive: no simulator under lab/sim for "
            + "; ".join(unsimulated)
            + ": add it, or take the package out of publish_in_debian_archive"
        )
    return packages


def repository_paths(definitions: dict) -> dict[str, str]:
    """Repository key -> path under the mirror root."""
    paths = {repo.key: repo.lab_path for repo in registry_repositories(definitions) + release_repositories(definitions)}
    paths[LAB_TOOLS] = definitions["lab_tools_path"]
    return paths


def missing_simulators(package: dict) -> list[str]:
    modules = set((package.get("commands") or {}).values())
    return sorted(m for m in modules if not (SIM_DIR / (m.split(".")[-1] + ".py")).is_file())


def inputs_hash(definitions: dict) -> str:
    # This builder's own code is an input: a change to how packages are made (a wrapper, a control field) rebuilds them.
    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update(PACKAGES_FILE.read_bytes())
    for path in sorted(vendor_facts.REGISTRY_DIR.glob("*/*.yml")):
        digest.update(path.name.encode() + path.read_bytes())
    for path in sorted(SIM_DIR.rglob("*.py")):
        digest.update(path.name.encode() + path.read_bytes())
    for package in definitions["lab_packages"]:
        for source in (package.get("scripts") or {}).values():
            digest.update((PROJECT_ROOT / source).read_bytes())
    digest.update(toolchain.inputs())  # the repackaged CUDA wheels and the served source archives
    return digest.hexdigest()


def _control(package: dict) -> str:
    fields = {
        "Package": package["name"],
        "Version": package["version"],
        "Architecture": package.get("architecture", "amd64"),
        "Maintainer": "gpuforge lab <lab-mirror@gpuforge.invalid>",
        "Section": "misc",
        "Priority": "optional",
    }
    for key, header in (("depends", "Depends"), ("provides", "Provides"), ("conflicts", "Conflicts")):
        if package.get(key):
            fields[header] = ", ".join(package[key])
    fields["Description"] = package["description"] + "\n Built by the gpuforge lab mirror (docs/lab.md)."
    return "".join(f"{key}: {value}\n" for key, value in fields.items())


# An init script needs its LSB header: `systemctl enable` of a unit beside a SysV script of the same name runs
# systemd-sysv-install, whose update-rc.d refuses a script without Default-Start runlevels. Runlevels as MLNX_OFED's
# Debian openibd script has them ("Default-Start: 2 3 4 5", "Default-Stop: 0 1 6",
# ofed_scripts/mlnx-ofed-kernel-utils.openibd.init of NVIDIA's mlnx-ofa_kernel sources).
_LSB_HEADER = """### BEGIN INIT INFO
# Provides:       {name}
# Required-Start: $local_fs
# Required-Stop:
# Default-Start:  2 3 4 5
# Default-Stop:   0 1 6
# Description:    gpuforge lab simulated init script
### END INIT INFO
"""


def _wrapper(path: str, module: str) -> str:
    # GPUFORGE_SIM_PROG names the command for simulators that serve several (the mm* commands).
    header = _LSB_HEADER.format(name=Path(path).name) if path.startswith("/etc/init.d/") else ""
    return (
        f"#!/bin/sh\n# gpuforge lab simulated tool (docs/lab.md)\n{header}"
        f"GPUFORGE_SIM_PROG={Path(path).name}\nexport GPUFORGE_SIM_PROG\n"
        f"exec /usr/bin/python3 -c 'import sys; from {module} import main; sys.exit(main(sys.argv[1:]))' \"$@\"\n"
    )


def _write(path: Path, text: str | bytes, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    path.chmod(mode)


def build_deb(package: dict, staging: Path, output: Path) -> Path:
    shutil.rmtree(staging, ignore_errors=True)
    if package.get("payload"):
        # A tree laid out beforehand (shape_repos: Debian 12's build of the same program for an Ubuntu-shaped node).
        shutil.copytree(package["payload"], staging, symlinks=True)
    (staging / "DEBIAN").mkdir(parents=True)
    if package.get("kind") == "sim":
        for source in sorted(SIM_DIR.rglob("*.py")):
            target = staging / "usr/lib/python3/dist-packages/gpuforge_sim" / source.relative_to(SIM_DIR)
            _write(target, source.read_bytes())
    for path, module in (package.get("commands") or {}).items():
        _write(staging / path.lstrip("/"), _wrapper(path, module), 0o755)
    for path, source in (package.get("scripts") or {}).items():
        _write(staging / path.lstrip("/"), (PROJECT_ROOT / source).read_bytes(), 0o755)
    for path, text in (package.get("files") or {}).items():
        _write(staging / path.lstrip("/"), text.rstrip("\n") + "\n")
    for name, meta in (package.get("modules") or {}).items():
        marker = {"size": meta["size"], "depends": meta.get("depends", []), "version": package["version"]}
        _write(staging / f"usr/lib/gpuforge-lab/modules/{name}.ko", json.dumps(marker, sort_keys=True) + "\n")
    for unit, text in (package.get("units") or {}).items():
        _write(staging / f"lib/systemd/system/{unit}", text)
    _write(staging / "DEBIAN/control", _control(package))
    if package.get("post"):
        # What dpkg runs once the files are in place, as the vendor's package's own postinst does on configure.
        _write(staging / "DEBIAN/postinst", "#!/bin/sh\nset -e\n" + package["post"].rstrip("\n") + "\n", 0o755)
    if package.get("ldconfig"):
        # As the Debian package of a shared library has it (shape_repos.has_shared_libraries): dpkg runs ldconfig.
        _write(staging / "DEBIAN/triggers", "activate-noawait ldconfig\n")
    # Debian's file naming leaves the epoch out (dpkg-name(1)): datacenter-gpu-manager_3.3.5_amd64.deb for 1:3.3.5.
    file_version = package["version"].split(":", 1)[-1]
    deb = output / f"{package['name']}_{file_version}_{package.get('architecture', 'amd64')}.deb"
    # Reproducible: the same inputs give the same bytes at every `lab prepare` (dpkg-deb(1): SOURCE_DATE_EPOCH is the
    # ar members' time and clamps the tar entries' mtimes). A package rebuilt with a new timestamp has a new
    # sha256, and a converged node's get_url then reports a change that is the lab's, not the role's.
    # gzip -1 for a payload with its dependencies (the compilers run to hundreds of MB; shape_repos.with_payloads).
    level = ["-z1"] if package.get("fast_compression") else []
    _run(
        ["dpkg-deb", "--root-owner-group", "-Zgzip", *level, "--build", str(staging), str(deb)],
        extra_env={"SOURCE_DATE_EPOCH": str(REPRODUCIBLE_EPOCH)},
    )
    return deb


def _index(repo_dir: Path, origin: str, key: SigningKey) -> None:
    """A flat repository (`deb URL /`), the layout NVIDIA's and Mellanox's repositories use."""
    packages = _run(["apt-ftparchive", "packages", "."], cwd=repo_dir).stdout
    (repo_dir / "Packages").write_bytes(packages)
    (repo_dir / "Packages.gz").write_bytes(gzip.compress(packages, mtime=0))
    _release(repo_dir, {"Origin": origin, "Label": "gpuforge lab mirror", "Suite": "stable"}, key)


def release_directory(package: dict) -> str:
    """Where a release-published package lies under its repository path: v<upstream>/ (GitHub's
    releases/download/v<tag>/<file>)."""
    return "v" + vendor_facts.Package(package["name"], package["version"], package["repo"]).upstream


def _index_release(repo_dir: Path) -> None:
    """One SHA256SUMS per release directory, in sha256sum(1) format (what ansible.builtin.get_url's
    checksum=sha256:<url> reads): the lab's packages are its own builds, so their checksums are the lab's."""
    for release in sorted(path for path in repo_dir.iterdir() if path.is_dir()):
        files = sorted([*release.glob("*.deb"), *release.glob("*.rpm")])
        lines = [f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}\n" for path in files]
        (release / "SHA256SUMS").write_text("".join(lines), encoding="utf-8")


def _component(deb: Path) -> str:
    """The archive component of a Debian package: its Section's prefix (contrib/misc -> contrib), else main."""
    section = _run(["dpkg-deb", "--field", str(deb), "Section"]).stdout.decode().strip()
    return section.split("/", 1)[0] if "/" in section else "main"


def publish_debian(debs: list[Path], built_names: set[str], repo_dir: Path, log=print) -> None:
    """Copy the Debian subset into its pool, one folder per archive component (main, contrib), minus packages
    the lab builds itself: a node must get the lab's simulated `rdma-core` or `infiniband-diags`, never the
    real tool that finds no hardware."""
    shadowed = sorted(deb.name for deb in debs if debian_subset.package_name(deb) in built_names)
    for deb in debs:
        if debian_subset.package_name(deb) not in built_names:
            pool = repo_dir / "pool" / _component(deb)
            pool.mkdir(parents=True, exist_ok=True)
            shutil.copy2(deb, pool / deb.name)
    if shadowed:
        log("lab: Debian packages left out, the lab builds its own: " + ", ".join(shadowed))


def _index_archive(repo_dir: Path, key: SigningKey) -> None:
    """A Debian archive layout (dists/<suite>/<component>/binary-amd64), as deb.debian.org serves it, so that
    nodes list components (main, contrib) in their sources exactly as on a real Debian host."""
    suite_dir = repo_dir / "dists" / debian_subset.SUITE
    components = sorted(path.name for path in (repo_dir / "pool").iterdir()) if (repo_dir / "pool").is_dir() else []
    for component in debian_subset.COMPONENTS:
        binary = suite_dir / component / "binary-amd64"
        binary.mkdir(parents=True, exist_ok=True)
        pool = f"pool/{component}"
        packages = _run(["apt-ftparchive", "packages", pool], cwd=repo_dir).stdout if component in components else b""
        (binary / "Packages").write_bytes(packages)
        (binary / "Packages.gz").write_bytes(gzip.compress(packages, mtime=0))
    options = {
        "Origin": "gpuforge-lab-debian",
        "Label": "gpuforge lab mirror (Debian subset)",
        "Suite": debian_subset.SUITE,
        "Codename": debian_subset.SUITE,
        "Architectures": "amd64",
        "Components": " ".join(debian_subset.COMPONENTS),
    }
    _release(suite_dir, options, key)


def _release(directory: Path, options: dict, key: SigningKey) -> None:
    command = ["apt-ftparchive"]
    for field, value in options.items():
        command += ["-o", f"APT::FTPArchive::Release::{field}={value}"]
    for name in ("Release", "InRelease", "Release.gpg"):
        (directory / name).unlink(missing_ok=True)
    release = _run([*command, "release", "."], cwd=directory).stdout
    (directory / "Release").write_bytes(release)
    sign = ["gpg", "--batch", "--yes", "--local-user", key.fingerprint, "--digest-algo", "SHA256"]
    _run([*sign, "--clearsign", "-o", "InRelease", "Release"], cwd=directory)
    _run([*sign, "--detach-sign", "--armor", "-o", "Release.gpg", "Release"], cwd=directory)


def _swap(new: Path, served: Path) -> None:
    served.parent.mkdir(parents=True, exist_ok=True)
    old = served.with_name(served.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if served.exists():
        served.rename(old)
    new.rename(served)
    shutil.rmtree(old, ignore_errors=True)


def build(image_tag: str, log=print) -> Repository:
    """Build (or reuse) the mirror for nodes of image `image_tag`; returns where it lives and its URL."""
    definitions = load_definitions()
    key = signing_key()
    debs, debian_inputs = debian_subset.download(image_tag, log=log)
    stamp = MIRROR_ROOT / ".inputs"
    from gpuforge.lab import prometheus_releases, shape_repos, vgpu_guest  # their builder code is an input too

    wanted = inputs_hash(definitions) + key.fingerprint + debian_inputs + shape_repos.code_hash()
    wanted += vgpu_guest.inputs_hash()
    wanted += prometheus_releases.inputs_hash()
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == wanted:
        return Repository(MIRROR_ROOT, MIRROR_URL)
    log("lab: building the signed package mirror")
    staging_root = LAB_STATE_DIR / "build" / "debs"
    repos = repository_paths(definitions)
    # Built beside the served tree and swapped in per repository, so nodes installing from the running
    # mirror never see a half-built repository.
    next_root = LAB_STATE_DIR / "mirror.next"
    shutil.rmtree(next_root, ignore_errors=True)
    for repo_path in dict.fromkeys([*repos.values(), debian_subset.REPO_PATH]):
        (next_root / repo_path).mkdir(parents=True)
    skipped = []
    releases = {repo.key: repo.package_format for repo in release_repositories(definitions)}
    packages = expand(definitions)
    toolkit = toolchain.load()  # read once: replaces() would read cuda-toolkit.yml again for every package
    for package in packages:
        if toolchain.replaces(package["name"], package["version"], toolkit):
            continue  # NVIDIA's files from its wheels (below), or no lab payload at all: never an empty package
        missing = missing_simulators(package)
        if missing:
            skipped.append(f"{package['name']} (needs {', '.join(missing)})")
            continue
        staging = staging_root / f"{package['name']}_{package['version']}"
        output = next_root / repos[package["repo"]]
        if package["repo"] in releases:
            output = output / release_directory(package)
            output.mkdir(parents=True, exist_ok=True)
        if releases.get(package["repo"]) == "rpm":
            from gpuforge.lab import rpm_repo

            rpm_repo.build_rpm(package, staging, output)
        else:
            build_deb(package, staging, output)
    toolchain.build_packages({name: next_root / path for name, path in repos.items()}, staging_root, log=log)
    toolchain.publish_sources(MIRROR_ROOT)
    # The distribution's in-box packages the lab builds, in its Debian archive's main pool (indexed below).
    in_archive = archive_packages(definitions)
    archive_pool = next_root / debian_subset.REPO_PATH / "pool" / "main"
    archive_pool.mkdir(parents=True, exist_ok=True)
    for package in in_archive:
        build_deb(package, staging_root / f"{package['name']}_{package['version']}", archive_pool)
    built = {package["name"] for package in [*packages, *in_archive]}
    built |= {name.split()[0] for package in packages for name in package.get("provides") or []}
    publish_debian(debs, built, next_root / debian_subset.REPO_PATH, log=log)
    # Once per path: a release's .deb and .rpm files share their download directories (apptainer/deb and apptainer/rpm).
    for repo_path in dict.fromkeys(repos.values()):
        names = [name for name, path in repos.items() if path == repo_path]
        if names[0] in releases:
            _index_release(next_root / repo_path)
        else:
            _index(next_root / repo_path, f"gpuforge-lab-{names[0].replace('/', '-')}", key)
        _swap(next_root / repo_path, MIRROR_ROOT / repo_path)
    _index_archive(next_root / debian_subset.REPO_PATH, key)
    _swap(next_root / debian_subset.REPO_PATH, MIRROR_ROOT / debian_subset.REPO_PATH)
    # The Ubuntu and RHEL shapes' repositories (packages.yml publish_os_shapes; gpuforge.lab.shape_repos).
    shape_repos.publish(definitions, key, staging_root, next_root, debs, log=log)
    # The lab stand-in of a site's vGPU guest driver files (plain downloads with their SHA256SUMS).
    vgpu_guest.publish(MIRROR_ROOT, staging_root, log=log)
    # The lab stand-ins of Prometheus' and node_exporter's release tarballs (Debian's binaries in upstream's layout).
    prometheus_releases.publish(MIRROR_ROOT, debs, staging_root, log=log)
    shutil.rmtree(staging_root, ignore_errors=True)
    shutil.rmtree(next_root, ignore_errors=True)
    if skipped:
        log("lab: mirror built WITHOUT these packages (simulator missing): " + "; ".join(skipped))
    stamp.write_text(wanted, encoding="utf-8")
    return Repository(MIRROR_ROOT, MIRROR_URL)
