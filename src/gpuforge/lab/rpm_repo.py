"""RPM repositories of the lab mirror, for its RHEL-shaped nodes (docs/lab.md, "OS shapes").

The same registry packages as the apt repositories (names, epochs, versions, relations, files, units, kernel
modules from vendor_facts/), built with Debian's `rpmbuild`, signed with `rpmsign` by the lab key, indexed with
`createrepo_c`, the CUDA repository's `nvidia-driver` module streams added with `modifyrepo_c`, and
`repomd.xml` signed beside it (`repomd.xml.asc`), as dnf's repo_gpgcheck reads it. Nodes check every package's
signature (gpgcheck=1) against the lab key imported into their rpmdb.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import yaml

from gpuforge import vendor_facts
from gpuforge.lab import mirror
from gpuforge.paths import PROJECT_ROOT

# rpmbuild's own post-install steps (strip, byte-compile, build-id links) need Fedora tools and change nothing a
# stand-in carries; the payload is gzip so Debian's and RHEL's rpm read it alike; the build time and host are fixed.
RPMBUILD_DEFINES = {
    "__os_install_post": "%{nil}",
    "_build_id_links": "none",
    "_binary_payload": "w9.gzdio",
    "use_source_date_epoch_as_buildtime": "1",
    "clamp_mtime_to_source_date_epoch": "1",
    "_buildhost": "gpuforge-lab",
    "debug_package": "%{nil}",
}
_DEB_TO_RPM_OPERATOR = {"<<": "<", "<=": "<=", "=": "=", ">=": ">=", ">>": ">"}
_SAFE_SPEC_TEXT = re.compile(r"[^A-Za-z0-9 .,:;()/+_=<>-]")


def split_version(version: str) -> tuple[str, str, str]:
    """'3:535.183.01-1.el9' -> ('3', '535.183.01', '1.el9'); no release -> '1' (rpm needs one)."""
    epoch, _, rest = version.rpartition(":")
    upstream, _, release = rest.rpartition("-") if "-" in rest else (rest, "", "1")
    return epoch, upstream, release


def rpm_relation(relation: str) -> str:
    """A registry relation (Debian syntax, vendor_facts/README.md) as an RPM dependency: 'a (= 1) | b' ->
    '(a = 1 or b)', rpm's rich-dependency form for alternatives."""
    alternatives = [
        f"{name} {_DEB_TO_RPM_OPERATOR[op]} {version}" if op else name
        for name, op, version in _parse_keeping_epoch(relation)
    ]
    return alternatives[0] if len(alternatives) == 1 else "(" + " or ".join(alternatives) + ")"


def _parse_keeping_epoch(relation: str) -> list[tuple[str, str, str]]:
    parsed = vendor_facts.parse_relation(relation)
    # parse_relation drops an ':arch' qualifier from names; versions keep their epoch.
    return [(name, op, version) for name, op, version in parsed]


def rpm_arch(package: dict) -> str:
    arch = package.get("architecture", "x86_64")
    return {"amd64": "x86_64", "all": "noarch"}.get(arch, arch)


def _files_section(staging: Path) -> list[str]:
    """Every file and symlink of the staging tree, and its empty directories as %dir: a directory the package
    installs empty (NetworkManager's /etc/NetworkManager/system-connections). Other directories are left unowned:
    they belong to the base OS."""
    entries = []
    for path in sorted(staging.rglob("*")):
        if path.is_symlink() or path.is_file():
            entries.append(f'"/{path.relative_to(staging)}"')
        elif path.is_dir() and not any(path.iterdir()):
            entries.append(f'%dir "/{path.relative_to(staging)}"')
    return entries


def spec_text(package: dict, staging: Path) -> str:
    epoch, version, release = split_version(package["version"])
    lines = [
        f"Name: {package['name']}",
        *([f"Epoch: {epoch}"] if epoch else []),
        f"Version: {version}",
        f"Release: {release}",
        f"Summary: {_SAFE_SPEC_TEXT.sub('', package['description'])[:200]}",
        "License: LicenseRef-gpuforge-lab",
        f"BuildArch: {rpm_arch(package)}",
        # Relations are the registry's alone: no automatic ones from the stand-in's files.
        "AutoReqProv: no",
    ]
    lines += [f"Requires: {rpm_relation(item)}" for item in package.get("depends") or []]
    lines += [f"Provides: {rpm_relation(item)}" for item in package.get("provides") or []]
    lines += [f"Conflicts: {rpm_relation(item)}" for item in package.get("conflicts") or []]
    lines += [
        "",
        "%description",
        "Built by the gpuforge lab mirror (docs/lab.md): "
        + _SAFE_SPEC_TEXT.sub("", package.get("payload_description") or "simulated payload")
        + ".",
        "",
        "%install",
        f"cp -a {staging}/. %{{buildroot}}/",
        "",
    ]
    # What rpm runs once the files are in place (/bin/sh), as the vendor's package's own %post does; and ldconfig for
    # a payload with shared libraries, which RHEL's glibc file triggers would run (shape_repos.has_shared_libraries).
    post = [package["post"].rstrip("\n")] if package.get("post") else []
    post += ["/sbin/ldconfig"] if package.get("ldconfig") else []
    if post:
        lines += ["%post", *post, ""]
    lines += [
        "%files",
        *_files_section(staging),
        "",
    ]
    return "\n".join(lines)


def _stage(package: dict, staging: Path) -> None:
    """The package's files, as the .deb build lays them out (mirror.build_deb), units under /usr/lib/systemd."""
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    if package.get("payload"):
        # A tree laid out beforehand (shape_repos: Debian's build of the same program, or a generated tree).
        shutil.copytree(package["payload"], staging, symlinks=True, dirs_exist_ok=True)
    if package.get("kind") == "sim":
        for source in sorted(mirror.SIM_DIR.rglob("*.py")):
            target = staging / "usr/lib/python3/dist-packages/gpuforge_sim" / source.relative_to(mirror.SIM_DIR)
            mirror._write(target, source.read_bytes())
    for path, module in (package.get("commands") or {}).items():
        mirror._write(staging / path.lstrip("/"), mirror._wrapper(path, module), 0o755)
    for path, source in (package.get("scripts") or {}).items():
        mirror._write(staging / path.lstrip("/"), (PROJECT_ROOT / source).read_bytes(), 0o755)
    for path, text in (package.get("files") or {}).items():
        mirror._write(staging / path.lstrip("/"), text.rstrip("\n") + "\n")
    for name, meta in (package.get("modules") or {}).items():
        marker = {"size": meta["size"], "depends": meta.get("depends", []), "version": package["version"]}
        mirror._write(staging / f"usr/lib/gpuforge-lab/modules/{name}.ko", _json(marker))
    for unit, text in (package.get("units") or {}).items():
        mirror._write(staging / f"usr/lib/systemd/system/{unit}", text)


def _json(value: dict) -> str:
    import json

    return json.dumps(value, sort_keys=True) + "\n"


def build_rpm(package: dict, work: Path, output: Path) -> Path:
    """One signed RPM from a mirror package dict (mirror._from_registry's shape); returns its path."""
    staging = work / "root"
    _stage(package, staging)
    topdir = work / "top"
    shutil.rmtree(topdir, ignore_errors=True)
    for sub in ("BUILD", "RPMS", "SOURCES", "SPECS", "SRPMS"):
        (topdir / sub).mkdir(parents=True)
    spec = topdir / "SPECS" / f"{package['name']}.spec"
    spec.write_text(spec_text(package, staging), encoding="utf-8")
    command = ["rpmbuild", "-bb", "--quiet", "--define", f"_topdir {topdir}"]
    defines = dict(RPMBUILD_DEFINES)
    if package.get("fast_compression"):
        # The repackaged NCCL library alone is 200 MB: level 9 would add a minute to every mirror build for little.
        defines["_binary_payload"] = "w1.gzdio"
    for name, value in defines.items():
        command += ["--define", f"{name} {value}"]
    mirror._run([*command, str(spec)], extra_env={"SOURCE_DATE_EPOCH": str(mirror.REPRODUCIBLE_EPOCH)})
    built = sorted((topdir / "RPMS").rglob("*.rpm"))
    if len(built) != 1:
        raise mirror.MirrorError(f"rpmbuild of {package['name']} {package['version']} gave {len(built)} files")
    output.mkdir(parents=True, exist_ok=True)
    target = output / built[0].name
    shutil.move(str(built[0]), target)
    return target


def sign(rpms: list[Path], key: mirror.SigningKey) -> None:
    """rpmsign --addsign with the lab key (no passphrase), the way a vendor signs its packages."""
    if not rpms:
        return
    mirror._run(
        [
            "rpmsign",
            "--addsign",
            "--define",
            f"_gpg_name {key.fingerprint}",
            "--define",
            f"_gpg_path {mirror.GNUPG_HOME}",
            "--define",
            "_gpg_digest_algo sha256",
            # Debian's rpm names gpg2, which Debian ships as gpg.
            "--define",
            f"__gpg {shutil.which('gpg') or '/usr/bin/gpg'}",
            *map(str, rpms),
        ]
    )


def module_streams(repo: vendor_facts.Repository, packages: list[dict]) -> str:
    """modules.yaml for NVIDIA's `nvidia-driver` module: one modulemd document per stream of the registry's
    `module_streams` fact, and its defaults.

    Which packages a stream holds follows NVIDIA/yum-packaging-dkms-nvidia and yum-packaging-precompiled-kmod
    (the registry's source of the streams): the module's packages carry epoch 3 (registry note); <branch>,
    <branch>-dkms and <branch>-open hold that branch's userland with, respectively, the precompiled kmod, the
    kmod-nvidia-latest-dkms and the kmod-nvidia-open-dkms package; latest, latest-dkms and open-dkms the same for
    the newest branch the repository has.
    """
    streams = [str(stream) for stream in repo.fact("module_streams")]
    modular = [p for p in packages if split_version(p["version"])[0] == "3"]
    branches = sorted({int(split_version(p["version"])[1].split(".")[0]) for p in modular})
    if not branches:
        return ""
    newest = str(branches[-1])

    def flavour(name: str) -> str:
        if not name.startswith("kmod-nvidia"):
            return "any"
        if name.endswith("open-dkms"):
            return "open"
        return "dkms" if name.endswith("-dkms") else "precompiled"

    documents = []
    for stream in streams:
        branch, _, kind = stream.partition("-")
        if branch == "latest":
            branch, kind = newest, (kind or "precompiled")
        elif branch == "open":  # open-dkms
            branch, kind = newest, "open"
        else:
            kind = kind or "precompiled"
        members = [
            p
            for p in modular
            if split_version(p["version"])[1].split(".")[0] == branch and flavour(p["name"]) in ("any", kind)
        ]
        if not members:
            continue
        artifacts = sorted(
            f"{p['name']}-{p['version'] if ':' in p['version'] else '0:' + p['version']}.{rpm_arch(p)}" for p in members
        )
        documents.append(
            {
                "document": "modulemd",
                "version": 2,
                "data": {
                    "name": "nvidia-driver",
                    "stream": stream,
                    "version": 1,
                    "context": "00000000",
                    "arch": "x86_64",
                    "summary": "Nvidia driver",
                    "description": f"NVIDIA driver, stream {stream} (gpuforge lab build from the registry)",
                    "license": {"module": ["MIT"]},
                    "profiles": {"default": {"rpms": sorted({p["name"] for p in members})}},
                    "artifacts": {"rpms": artifacts},
                },
            }
        )
    defaults_data = {"module": "nvidia-driver"}
    default_stream = repo.facts.get("module_default_stream", {}).get("value")
    if default_stream and any(doc["data"]["stream"] == default_stream for doc in documents):
        defaults_data["stream"] = str(default_stream)
    defaults_data["profiles"] = {doc["data"]["stream"]: ["default"] for doc in documents}
    defaults = {"document": "modulemd-defaults", "version": 1, "data": defaults_data}
    return yaml.safe_dump_all([*documents, defaults], explicit_start=True, explicit_end=True, sort_keys=False)


def index(repo_dir: Path, key: mirror.SigningKey, modules_yaml: str = "") -> None:
    """createrepo_c, the module metadata with modifyrepo_c, and a detached signature of repomd.xml."""
    mirror._run(["createrepo_c", "--quiet", "--no-database", "--revision", "1", "--set-timestamp-to-revision", "."],
                cwd=repo_dir)  # fmt: skip
    if modules_yaml:
        modules = repo_dir / "modules.yaml"
        modules.write_text(modules_yaml, encoding="utf-8")
        mirror._run(["modifyrepo_c", "--mdtype=modules", str(modules), "repodata"], cwd=repo_dir)
        modules.unlink()
    repomd = repo_dir / "repodata" / "repomd.xml"
    signature = repomd.with_name("repomd.xml.asc")
    signature.unlink(missing_ok=True)
    sign = ["gpg", "--batch", "--yes", "--local-user", key.fingerprint, "--digest-algo", "SHA256"]
    mirror._run([*sign, "--detach-sign", "--armor", "-o", str(signature), str(repomd)])


def publish(repo_path: str, packages: list[dict], staging_root: Path, next_root: Path, key: mirror.SigningKey,
            modules_yaml: str = "") -> Path:  # fmt: skip
    """Build, sign and index one RPM repository under next_root/repo_path; returns its directory."""
    repo_dir = next_root / repo_path
    shutil.rmtree(repo_dir, ignore_errors=True)
    repo_dir.mkdir(parents=True)
    rpms = []
    for package in packages:
        work = staging_root / f"{package['name']}_{package['version'].replace(':', '_')}"
        rpms.append(build_rpm(package, work, repo_dir / "Packages"))
        shutil.rmtree(work, ignore_errors=True)
    sign(rpms, key)
    index(repo_dir, key, modules_yaml)
    return repo_dir


def tools_available() -> list[str]:
    """The controller commands this module needs that are missing (scripts/setup.sh installs them)."""
    return [tool for tool in ("rpmbuild", "rpmsign", "createrepo_c", "modifyrepo_c") if shutil.which(tool) is None]


def rpm_query(path: Path, query: str) -> str:
    """`rpm -qp --qf <query>` of a package file (for tests and the shape images)."""
    proc = subprocess.run(
        ["rpm", "-qp", "--nosignature", "--qf", query, str(path)],
        capture_output=True,
        text=True,
        check=False,
        env=dict(os.environ, LC_ALL="C"),
    )
    if proc.returncode != 0:
        raise mirror.MirrorError(f"rpm -qp {path.name}: {proc.stderr.strip()}")
    return proc.stdout
