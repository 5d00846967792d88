"""The lab's vendor package mirror: .deb packages built with dpkg-deb, indexed with
apt-ftparchive and signed with a key generated for this lab, laid out as flat
repositories like the vendors' own (lab/packages/packages.yml).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from gpuforge.lab import debian_subset
from gpuforge.paths import LAB_DIR, LAB_STATE_DIR, PROJECT_ROOT

PACKAGES_FILE = LAB_DIR / "packages" / "packages.yml"
SIM_DIR = LAB_DIR / "sim" / "gpuforge_sim"
MIRROR_ROOT = LAB_STATE_DIR / "mirror"
GNUPG_HOME = LAB_STATE_DIR / "gnupg"
KEY_FILE_NAME = "gpuforge-lab-archive-keyring.asc"
KEY_UID = "gpuforge lab mirror signing key <lab-mirror@gpuforge.invalid>"
MIRROR_URL = "http://mirror"
BUILDER_REVISION = "2"


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


def _run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    env = dict(os.environ, GNUPGHOME=str(GNUPG_HOME), LC_ALL="C")
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


def expand(definitions: dict) -> list[dict]:
    """All concrete packages: per-branch templates expanded, plus the simulator library package."""
    packages = [dict(definitions["sim_package"], kind="sim")]
    for branch, versions in definitions["driver_branches"].items():
        values = {"branch": branch, "driver": versions["driver"], "cuda": versions["cuda"]}
        for template in definitions["per_branch"]:
            packages.append(_format(template, values))
    packages.extend(definitions["packages"])
    return packages


def _format(value, values: dict):
    if isinstance(value, str):
        return value.format(**values)
    if isinstance(value, list):
        return [_format(item, values) for item in value]
    if isinstance(value, dict):
        return {_format(key, values): _format(item, values) for key, item in value.items()}
    return value


def missing_simulators(package: dict) -> list[str]:
    modules = set((package.get("commands") or {}).values())
    return sorted(m for m in modules if not (SIM_DIR / (m.split(".")[-1] + ".py")).is_file())


def inputs_hash(definitions: dict) -> str:
    digest = hashlib.sha256(BUILDER_REVISION.encode())
    digest.update(PACKAGES_FILE.read_bytes())
    for path in sorted(SIM_DIR.rglob("*.py")):
        digest.update(path.name.encode() + path.read_bytes())
    for package in definitions["packages"]:
        for source in (package.get("scripts") or {}).values():
            digest.update((PROJECT_ROOT / source).read_bytes())
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


def _wrapper(path: str, module: str) -> str:
    # GPUFORGE_SIM_PROG names the command for simulators that serve several (the mm* commands).
    return (
        "#!/bin/sh\n# gpuforge lab simulated tool (docs/lab.md)\n"
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
    deb = output / f"{package['name']}_{package['version']}_{package.get('architecture', 'amd64')}.deb"
    _run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(staging), str(deb)])
    return deb


def _index(repo_dir: Path, origin: str, key: SigningKey) -> None:
    packages = _run(["apt-ftparchive", "packages", "."], cwd=repo_dir).stdout
    (repo_dir / "Packages").write_bytes(packages)
    (repo_dir / "Packages.gz").write_bytes(gzip.compress(packages, mtime=0))
    options = {"Origin": origin, "Label": "gpuforge lab mirror", "Suite": "stable"}
    command = ["apt-ftparchive"]
    for field, value in options.items():
        command += ["-o", f"APT::FTPArchive::Release::{field}={value}"]
    release = _run([*command, "release", "."], cwd=repo_dir).stdout
    (repo_dir / "Release").write_bytes(release)
    for name in ("InRelease", "Release.gpg"):
        (repo_dir / name).unlink(missing_ok=True)
    sign = ["gpg", "--batch", "--yes", "--local-user", key.fingerprint, "--digest-algo", "SHA256"]
    _run([*sign, "--clearsign", "-o", "InRelease", "Release"], cwd=repo_dir)
    _run([*sign, "--detach-sign", "--armor", "-o", "Release.gpg", "Release"], cwd=repo_dir)


def publish_debian(debs: list[Path], built_names: set[str], repo_dir: Path, log=print) -> None:
    """Copy the Debian subset into its repo, minus packages the lab builds itself: a node must get the lab's
    simulated `rdma-core` or `infiniband-diags`, never the real tool that finds no hardware."""
    shadowed = sorted(deb.name for deb in debs if debian_subset.package_name(deb) in built_names)
    for deb in debs:
        if debian_subset.package_name(deb) not in built_names:
            shutil.copy2(deb, repo_dir / deb.name)
    if shadowed:
        log("lab: Debian packages left out, the lab builds its own: " + ", ".join(shadowed))


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
    wanted = inputs_hash(definitions) + key.fingerprint + debian_inputs
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == wanted:
        return Repository(MIRROR_ROOT, MIRROR_URL)
    log("lab: building the signed package mirror")
    staging_root = LAB_STATE_DIR / "build" / "debs"
    repos = dict(definitions["repos"], debian=debian_subset.REPO_PATH)
    # Built beside the served tree and swapped in per repository, so nodes installing from the running
    # mirror never see a half-built repository.
    next_root = LAB_STATE_DIR / "mirror.next"
    shutil.rmtree(next_root, ignore_errors=True)
    for repo_path in repos.values():
        (next_root / repo_path).mkdir(parents=True)
    skipped = []
    for package in expand(definitions):
        missing = missing_simulators(package)
        if missing:
            skipped.append(f"{package['name']} (needs {', '.join(missing)})")
            continue
        build_deb(package, staging_root / package["name"], next_root / repos[package["repo"]])
    built = {package["name"] for package in expand(definitions)}
    built |= {name.split()[0] for package in expand(definitions) for name in package.get("provides") or []}
    publish_debian(debs, built, next_root / repos["debian"], log=log)
    for name, repo_path in repos.items():
        _index(next_root / repo_path, f"gpuforge-lab-{name}", key)
        _swap(next_root / repo_path, MIRROR_ROOT / repo_path)
    shutil.rmtree(staging_root, ignore_errors=True)
    shutil.rmtree(next_root, ignore_errors=True)
    if skipped:
        log("lab: mirror built WITHOUT these packages (simulator missing): " + "; ".join(skipped))
    stamp.write_text(wanted, encoding="utf-8")
    return Repository(MIRROR_ROOT, MIRROR_URL)
