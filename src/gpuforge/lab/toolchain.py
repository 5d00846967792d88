"""The lab's real CUDA compiler, runtime and NCCL, and the benchmark tools' upstream source archives.

The benchmark_tools role builds nccl-tests, nvbandwidth and the CUDA samples' p2pBandwidthLatencyTest on each GPU
node from source archives, with the CUDA toolkit pieces and NCCL that NVIDIA's CUDA repository publishes. The lab
makes those builds real:

- **Packages**: NVIDIA publishes the same compiler, runtime, headers and NCCL as Python wheels on PyPI. The control
  machine downloads the wheels pinned with their sha256 in lab/packages/cuda-wheels.txt (pip --require-hashes) and
  the mirror repackages their files as .deb packages under the names and versions of NVIDIA's repository
  (vendor_facts/nvidia-cuda/debian12.yml), laid out as NVIDIA's packages install them (/usr/local/cuda-<x.y>/...,
  /usr/lib/x86_64-linux-gnu/libnccl.so.2). Each package's description says it is a lab repackaging. What the wheels
  lack, the driver stubs that let a build link -lcuda and -lnvidia-ml on a host without a driver (the toolkit's
  lib64/stubs), the lab generates from the wheels' own cuda.h and nvml.h: one function per declared entry point
  that only returns an error, built with the control machine's gcc. Nothing ever runs them (no GPU here).
- **Sources**: the upstream archives (git archive of the release tag, listed with their sha256 in the vendor
  sources' SOURCES.md) are served in GitHub's archive layout, <owner>/<repo>/archive/refs/tags/v<version>.tar.gz,
  with a SHA256SUMS of the lab's files: a site's base URL variable points at the mirror, and since the lab's
  archives are not byte for byte GitHub's, the lab inventory overrides the checksums with these.

lab/packages/cuda-toolkit.yml says which file of which wheel each package installs where, and which archives are
served.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import yaml

from gpuforge import vendor_facts
from gpuforge.lab import pinned_wheels
from gpuforge.paths import LAB_DIR, LAB_STATE_DIR, PROJECT_ROOT

WHEELS_REQUIREMENTS = LAB_DIR / "packages" / "cuda-wheels.txt"
DEFINITIONS_FILE = LAB_DIR / "packages" / "cuda-toolkit.yml"
WHEELS_DIR = LAB_STATE_DIR / "cuda-wheels"
# The upstream source archives: outside the project (never copied into it), found beside the checkout as the
# project's other test inputs are, or where GPUFORGE_VENDOR_SOURCES says.
VENDOR_SOURCES = Path(os.environ.get("GPUFORGE_VENDOR_SOURCES", PROJECT_ROOT.parent / "shared" / "vendor-sources"))
REVISION = "1"


class ToolchainError(RuntimeError):
    """A wheel could not be fetched or verified, a package could not be laid out, or an archive is missing."""


def _wheel_name(path: Path) -> str:
    """The distribution name of a wheel file, normalized (nvidia_cuda_nvcc-13.0.88-... -> nvidia-cuda-nvcc)."""
    return path.name.split("-", 1)[0].replace("_", "-").lower()


def ensure_wheels(log=print) -> dict[str, Path]:
    """Download the pinned wheels once (pip checks every file against its sha256); returns name -> wheel file."""
    pinned_wheels.download(WHEELS_REQUIREMENTS, WHEELS_DIR, "NVIDIA's CUDA wheels", log=log)
    return {_wheel_name(path): path for path in sorted(WHEELS_DIR.glob("*.whl"))}


def load() -> dict:
    return yaml.safe_load(DEFINITIONS_FILE.read_text(encoding="utf-8"))


def inputs() -> bytes:
    """What the repackaged packages and the served archives depend on, for the mirror's inputs hash."""
    digest = hashlib.sha256(REVISION.encode() + WHEELS_REQUIREMENTS.read_bytes() + DEFINITIONS_FILE.read_bytes())
    for path in sorted(VENDOR_SOURCES.glob("*.tar.gz")):
        digest.update(path.name.encode() + str(path.stat().st_size).encode())
    return digest.hexdigest().encode()


def replaces(name: str, version: str, definitions: dict | None = None) -> bool:
    """True for a registry package the lab builds from wheels, or leaves out: a toolkit or NCCL version the lab
    has no payload for is not published (a role asking for it fails with apt's own error), never an empty
    package."""
    wheel = definitions or load()
    names = {(p["name"], p["version"]) for p in wheel["packages"]}
    names |= {(p["rpm"]["name"], p["version"]) for p in wheel["packages"] if p.get("rpm")}
    if (name, version) in names:
        return True
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in wheel.get("unpublished") or [])


def _extract(wheel: Path, member_prefix: str, target: Path, only: list[str] | None = None) -> int:
    """Copy the wheel's files under member_prefix (those matching a pattern of `only`, when given) to target;
    returns how many. Files under a bin/ folder are made executable whatever mode the wheel recorded."""
    count = 0
    prefix = member_prefix.rstrip("/") + "/"
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            if info.is_dir() or not info.filename.startswith(prefix) or info.filename.endswith("__init__.py"):
                continue
            relative = info.filename[len(prefix) :]
            if only and not any(fnmatch.fnmatchcase(relative, pattern) for pattern in only):
                continue
            destination = target / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as source, destination.open("wb") as out:
                shutil.copyfileobj(source, out)
            mode = (info.external_attr >> 16) & 0o777
            executable = mode & 0o111 or "/bin/" in "/" + info.filename or relative.startswith("bin/")
            destination.chmod(0o755 if executable else 0o644)
            count += 1
    return count


def declared_functions(preprocessed: str, prefix: str) -> list[str]:
    """The functions a preprocessed header declares whose names start with prefix, whatever they return (nvml.h's
    nvmlErrorString returns a string): per declaration, the name before its first parenthesis; typedefs (function
    pointer types) and definitions are not declarations of an exported function."""
    names = set()
    for statement in re.split(r"[;{}]", preprocessed):
        statement = " ".join(statement.split())
        if not statement or statement.startswith("typedef") or "(" not in statement:
            continue
        match = re.search(r"\b(\w+)\s*\($", statement[: statement.index("(") + 1])
        if match and match.group(1).startswith(prefix):
            names.add(match.group(1))
    return sorted(names)


def generate_stub(header_dir: Path, header: str, prefix: str, soname: str, out: Path) -> int:
    """A link-time stub library, as the toolkit's lib64/stubs holds: every function the header declares (after the
    preprocessor, so versioned names such as cuCtxCreate_v4 are the exported ones), each only returning a nonzero
    status. Returns how many functions it exports."""
    preprocessed = subprocess.run(
        ["gcc", "-E", "-P", f"-I{header_dir}", "-x", "c", "-"],
        input=f"#include <{header}>\n",
        capture_output=True,
        text=True,
        check=False,
    )
    if preprocessed.returncode != 0:
        raise ToolchainError(f"gcc -E {header} failed: {preprocessed.stderr.strip()[-800:]}")
    names = declared_functions(preprocessed.stdout, prefix)
    if not names:
        raise ToolchainError(f"{header}: no function named {prefix}* declared, nothing to stub")
    source = out.with_suffix(".c")
    source.write_text(
        "/* gpuforge lab: link-time stub generated from "
        + header
        + " (never run) */\n"
        + "".join(f"int {name}(void) {{ return 999; }}\n" for name in names),
        encoding="utf-8",
    )
    built = subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O0", f"-Wl,-soname,{soname}", "-o", str(out), str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    source.unlink()
    if built.returncode != 0:
        raise ToolchainError(f"building the {soname} stub failed: {built.stderr.strip()[-800:]}")
    out.chmod(0o644)
    return len(names)


def _postinst() -> str:
    # The shared libraries these packages install are found through the dynamic linker's cache.
    return '#!/bin/sh\nset -e\nif [ "$1" = configure ]; then ldconfig; fi\n'


def _stage_tree(spec: dict, wheels: dict[str, Path], staging: Path) -> None:
    """Lay out one package's files under staging: the wheels' trees, the links and the generated stubs."""
    for tree in spec.get("trees") or []:
        source = wheels.get(tree["wheel"])
        if source is None:
            raise ToolchainError(f"{spec['name']}: wheel {tree['wheel']} is not pinned in {WHEELS_REQUIREMENTS}")
        if _extract(source, tree["from"], staging / tree["to"].lstrip("/"), tree.get("only")) == 0:
            raise ToolchainError(f"{spec['name']}: nothing under {tree['from']} in {source.name}")
    for path, target in (spec.get("links") or {}).items():
        link = staging / path.lstrip("/")
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target)
    for path, stub in (spec.get("stubs") or {}).items():
        out = staging / path.lstrip("/")
        out.parent.mkdir(parents=True, exist_ok=True)
        headers = WHEELS_DIR / ".headers"
        shutil.rmtree(headers, ignore_errors=True)
        for name in stub["wheels"]:
            _extract(wheels[name], stub["include"], headers)
        generate_stub(headers, stub["header"], stub["prefix"], stub["soname"], out)
        shutil.rmtree(headers, ignore_errors=True)


def _registered(repo_key: str, name: str, version: str) -> vendor_facts.Package:
    try:
        return vendor_facts.repository(repo_key).package(name, version)
    except KeyError:
        raise ToolchainError(
            f"lab/packages/cuda-toolkit.yml: {name} {version} is not in "
            f"vendor_facts/{repo_key}.yml (the lab publishes only what the vendor does)"
        ) from None


def _check_files(name: str, package: vendor_facts.Package, staging: Path) -> None:
    for path in package.files:
        if not (staging / path.lstrip("/")).exists() and not (staging / path.lstrip("/")).is_symlink():
            raise ToolchainError(f"{name}: the registry says it installs {path}; the lab's build has none")


def _renamed(staging: Path, renames: dict[str, str]) -> None:
    """Move the files under each old path prefix to the new one (RHEL's layout of the same package)."""
    for old, new in sorted(renames.items(), key=lambda item: -len(item[0])):
        source = staging / old.lstrip("/")
        if not source.exists():
            raise ToolchainError(f"rename {old} -> {new}: the package has nothing under {old}")
        target = staging / new.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
            shutil.rmtree(source)
        else:
            source.rename(target)


def _build_deb(spec: dict, repo_key: str, name: str, wheels: dict[str, Path], staging_root: Path, output: Path,
               owners: dict[str, str] | None = None) -> Path:  # fmt: skip
    """One .deb of spec's files under the registry package repo_key/name at spec's version, into output."""
    from gpuforge.lab import mirror  # the mirror imports this module; its deb helpers are shared

    repo = vendor_facts.repository(repo_key)
    package = _registered(repo_key, name, spec["version"])
    staging = staging_root / f"{repo_key.replace('/', '-')}-{name}_{spec['version']}"
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "DEBIAN").mkdir(parents=True)
    _stage_tree(spec, wheels, staging)
    if owners is not None:
        for path in sorted(
            p for p in staging.rglob("*") if (p.is_file() or p.is_symlink()) and "DEBIAN" not in p.parts
        ):
            relative = "/" + str(path.relative_to(staging))
            if relative in owners:
                raise ToolchainError(f"{relative} is in both {owners[relative]} and {name}")
            owners[relative] = name
    _check_files(name, package, staging)
    if spec.get("ldconfig"):
        (staging / "DEBIAN" / "postinst").write_text(_postinst(), encoding="utf-8")
        (staging / "DEBIAN" / "postinst").chmod(0o755)
    control = {
        "name": package.name,
        "version": package.version,
        "architecture": package.architecture,
        "depends": list(package.depends),
        "provides": list(package.provides),
        "conflicts": list(package.conflicts),
        "description": f"{package.name} ({repo.title}) - gpuforge lab repackaging of {spec['description']}",
    }
    (staging / "DEBIAN" / "control").write_text(mirror._control(control), encoding="utf-8")
    deb = output / f"{package.name}_{package.version.split(':', 1)[-1]}_{package.architecture}.deb"
    # -z1: the NCCL library alone is 200 MB; level 9 would add a minute to every mirror build for little.
    mirror._run(
        ["dpkg-deb", "--root-owner-group", "-Zgzip", "-z1", "--build", str(staging), str(deb)],
        extra_env={"SOURCE_DATE_EPOCH": str(mirror.REPRODUCIBLE_EPOCH)},
    )
    shutil.rmtree(staging, ignore_errors=True)
    return deb


def build_packages(repo_dirs: dict[str, Path], staging_root: Path, log=print) -> list[Path]:
    """Build every package of cuda-toolkit.yml into its registry repository's folder (repo_dirs: registry key ->
    folder being built); returns the .deb files."""
    wheel = load()
    if not wheel["packages"]:
        return []
    wheels = ensure_wheels(log=log)
    owners: dict[str, str] = {}
    built = [
        _build_deb(spec, spec["repo"], spec["name"], wheels, staging_root, repo_dirs[spec["repo"]], owners)
        for spec in wheel["packages"]
    ]
    log(f"lab: repackaged NVIDIA's CUDA wheels as {len(built)} packages of NVIDIA's repository names")
    return built


def build_other_debs(repo_key: str, output: Path, staging_root: Path, log=print) -> list[Path]:
    """The same .deb packages for another apt repository of NVIDIA's (a spec's `deb_also`: the Ubuntu ones, whose
    names and paths are Debian's), into output."""
    specs = [spec for spec in load()["packages"] if repo_key in (spec.get("deb_also") or [])]
    if not specs:
        return []
    wheels = ensure_wheels(log=log)
    return [_build_deb(spec, repo_key, spec["name"], wheels, staging_root, output) for spec in specs]


def rpm_payloads(repo_key: str, packages: list[dict], staging_root: Path, log=print) -> list[dict]:
    """The registry packages of one RPM repository (mirror package dicts) as the mirror publishes them: those
    cuda-toolkit.yml repackages for it (a spec's `rpm`) carry the wheels' files as their payload, laid out as on RHEL;
    the other toolkit and NCCL builds are left out (replaces()), never published empty."""
    wheel = load()
    specs = {
        (spec["rpm"]["name"], spec["version"]): spec
        for spec in wheel["packages"]
        if (spec.get("rpm") or {}).get("repo") == repo_key
    }
    if not specs:
        return packages
    wheels = ensure_wheels(log=log)
    result = []
    for package in packages:
        spec = specs.get((package["name"], package["version"]))
        if spec is None:
            if not replaces(package["name"], package["version"], wheel):
                result.append(package)
            continue
        registered = _registered(repo_key, package["name"], package["version"])
        staging = staging_root / f"rpm-payload-{package['name']}_{package['version']}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        _stage_tree(spec, wheels, staging)
        _renamed(staging, spec["rpm"].get("rename") or {})
        _check_files(package["name"], registered, staging)
        result.append(
            dict(
                package,
                payload=staging,
                ldconfig=bool(spec.get("ldconfig")),
                fast_compression=True,
                payload_description=f"gpuforge lab repackaging of {spec['description']}",
                description=f"{package['name']} - gpuforge lab repackaging of {spec['description']}",
            )
        )
    return result


def publish_sources(mirror_root: Path) -> Path:
    """Serve the upstream archives in GitHub's archive layout with a SHA256SUMS; returns the folder."""
    wheel = load()
    target = mirror_root / wheel.get("sources_path", "gpuforge-lab/sources")
    staging = target.with_name(target.name + ".next")
    shutil.rmtree(staging, ignore_errors=True)
    sums = []
    for source in wheel.get("sources") or []:
        archive = VENDOR_SOURCES / source["file"]
        if not archive.is_file():
            raise ToolchainError(
                f"upstream source archive {archive} not found: set GPUFORGE_VENDOR_SOURCES to the folder holding "
                f"{source['file']} (a git archive of {source['repository']} at v{source['version']})"
            )
        relative = f"{source['repository']}/archive/refs/tags/v{source['version']}.tar.gz"
        destination = staging / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(archive, destination)
        sums.append(f"{hashlib.sha256(destination.read_bytes()).hexdigest()}  {relative}\n")
    staging.mkdir(parents=True, exist_ok=True)
    (staging / "SHA256SUMS").write_text("".join(sums), encoding="utf-8")
    old = target.with_name(target.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    staging.rename(target)
    shutil.rmtree(old, ignore_errors=True)
    return target
