"""OS-shaped lab node images: the shared lab image plus one thin layer per shape (lab/image/shapes.yml).

A shape's layer gives a node the release files of the OS it stands for (from the vendor facts registry) and that
OS's package manager configuration, pointed at the lab mirror: apt against the mirror's Ubuntu archive subset, or
dnf (Debian's dnf 4.14 with python3-dnf, from the shared image) against the mirror's signed RPM repositories, with
the release package installed in the rpmdb. The userland beneath stays Debian's (docs/lab.md, "OS shapes").
Layers are built with `podman build` on top of the shared image, so all shapes share its layers.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import yaml

from gpuforge import vendor_facts
from gpuforge.lab import mirror, rpm_repo
from gpuforge.lab.image import IMAGE_DIR, LAB_KEYRING
from gpuforge.lab.podman import PodmanError, exists, podman
from gpuforge.paths import LAB_STATE_DIR

SHAPES_FILE = IMAGE_DIR / "shapes.yml"
BASE_SHAPE = "debian12"
LAYER_REVISION = "1"  # bump when the layer steps below change
ENV_FILE = LAB_STATE_DIR / "os-shape-images.env"
RPM_KEY_PATH = "/etc/pki/rpm-gpg/RPM-GPG-KEY-redhat-release"
# RHEL keeps the rpmdb in /var/lib/rpm; Debian's rpm defaults to ~/.rpmdb (Debian's rpm package, macros).
RPM_DBPATH_MACRO = "%_dbpath /var/lib/rpm\n"
# RHEL rebuilds the initramfs with dracut (installed by default); like update-initramfs on the other shapes, the lab's
# stand-in records each rebuild in /var/lib/gpuforge-lab/initramfs.log (docs/lab.md, "The simulated kernel").
DRACUT_STANDIN = """#!/usr/bin/python3
\"\"\"Lab stand-in for dracut on RHEL-shaped nodes: records the rebuild as the lab's update-initramfs does.\"\"\"
import sys

sys.path.insert(0, "/usr/local/lib/gpuforge-lab")
from simkernel import update_initramfs_main  # noqa: E402

sys.exit(update_initramfs_main(["dracut", *sys.argv[1:]]))
"""
EXECUTABLE_PREFIXES = ("/usr/local/sbin/",)
# RHEL 8 (shape option dnf_bindings_private): dnf's Python packages, importable by the dnf command alone, from here.
DNF_PRIVATE_SITE = "/usr/lib/gpuforge-lab/dnf-site"
# The Python packages of Debian's python3-dnf, -libdnf, -hawkey, -rpm, -libcomps, -gpg and -dnf-plugins-core: what
# RHEL 8 builds for platform-python 3.6 only.
DNF_BINDINGS = ("dnf", "libdnf", "hawkey", "rpm", "libcomps", "gpg", "dnfpluginscore")


def load() -> dict[str, dict]:
    return yaml.safe_load(SHAPES_FILE.read_text(encoding="utf-8"))


def names() -> list[str]:
    return list(load())


def env_name(shape: str) -> str:
    """The variable Molecule platforms read the shape's image from: GPUFORGE_LAB_IMAGE_RHEL9, ..."""
    return "GPUFORGE_LAB_IMAGE" + ("" if shape == BASE_SHAPE else "_" + shape.upper())


def _fact(key: str, name: str) -> str:
    return str(vendor_facts.repository(key).fact(name))


def _repo_block(repo_id: str, title: str, url: str) -> str:
    return (
        f"[{repo_id}]\nname = {title}\nbaseurl = {url}\nenabled = 1\ngpgcheck = 1\ngpgkey = file://{RPM_KEY_PATH}\n\n"
    )


def layer_files(shape: str, spec: dict, key: bytes) -> dict[str, str | bytes]:
    """The files of a shape's layer, by absolute path."""
    family = spec["family"]
    files: dict[str, str | bytes] = {}
    if family == "ubuntu":
        facts = spec["release_facts"]
        os_release = _fact(facts, "os_release")
        files["/etc/os-release"] = os_release
        files["/usr/lib/os-release"] = os_release
        files["/etc/lsb-release"] = _fact(facts, "lsb_release")
        suites = vendor_facts.repository(facts).fact("suites")
        components = " ".join(spec["components"])
        files["/etc/apt/sources.list"] = "".join(
            f"deb [signed-by={LAB_KEYRING}] {mirror.MIRROR_URL}/{spec['archive']}/ {suite} {components}\n"
            for suite in suites
        )
    elif family == "rhel":
        facts = spec["release_facts"]
        files["/usr/lib/os-release"] = _fact(facts, "os_release")
        files["/etc/rpm/macros.dbpath"] = RPM_DBPATH_MACRO
        files["/usr/local/sbin/dracut"] = DRACUT_STANDIN
        # Debian's dnf-plugins-core enables the "local" plugin, whose repository _dnf_local fails every strict dnf run
        # with no local packages in it; RHEL does not install that plugin (python3-dnf-plugin-local is separate).
        files["/etc/dnf/plugins/local.conf"] = "[main]\nenabled = 0\n"
        # RHEL's dynamic linker searches /usr/lib64 by default (its libdir: NCCL's libnccl.so.2 from NVIDIA's RPM is
        # there); Debian's, beneath the shape, searches /usr/lib/x86_64-linux-gnu and needs to be told.
        files["/etc/ld.so.conf.d/gpuforge-lab-rhel-lib64.conf"] = (
            "# RHEL's default library directory (gpuforge lab, OS shape)\n/usr/lib64\n"
        )
        files[RPM_KEY_PATH] = key
        definitions = mirror.load_definitions()
        rpm_paths = definitions["publish_os_shapes"]["rpm"]
        repos = "".join(
            _repo_block(repo_id, vendor_facts.repository(registry).title, f"{mirror.MIRROR_URL}/{rpm_paths[registry]}/")
            for repo_id, registry in spec["repositories"].items()
        )
        files["/etc/yum.repos.d/redhat.repo"] = repos
        tools = definitions["publish_os_shapes"]["rpm_lab_tools"]
        files["/etc/yum.repos.d/gpuforge-lab-tools.repo"] = _repo_block(
            "gpuforge-lab-tools", "gpuforge lab tools (simulator library)", f"{mirror.MIRROR_URL}/{tools}/"
        )
    return files


def _served_rpm(spec: dict, name: str) -> Path:
    """The package file of `name` in the served mirror: the newest build in the shape's first repository that has it."""
    rpm_paths = mirror.load_definitions()["publish_os_shapes"]["rpm"]
    for registry_key in spec["repositories"].values():
        path = rpm_paths[registry_key]
        found = sorted(
            candidate
            for candidate in (mirror.MIRROR_ROOT / path / "Packages").glob(f"{name}-[0-9]*.rpm")
            if rpm_repo.rpm_query(candidate, "%{NAME}") == name
        )
        if found:
            return found[-1]
    repositories = ", ".join(spec["repositories"])
    raise PodmanError(f"lab: {name} is not in the mirror's {repositories}: run 'gpuforge lab prepare'")


def release_package(spec: dict) -> Path | None:
    """The shape's release package file in the served mirror (redhat-release for RHEL)."""
    name = spec.get("release_package")
    return _served_rpm(spec, name) if name else None


def base_packages(spec: dict) -> list[Path]:
    """The package files of what the OS's every installation has (shapes.yml base_packages), in the served mirror."""
    return [_served_rpm(spec, name) for name in spec.get("base_packages") or []]


def containerfile(base_tag: str, spec: dict, has_release_package: bool, base_rpms: tuple[str, ...] = ()) -> str:
    lines = [f"FROM {base_tag}", "COPY root/ /"]
    if spec["family"] == "ubuntu":
        # Ubuntu 22.04 lists its archive in sources.list; the shared image's Debian source goes.
        lines.append("RUN rm -f /etc/apt/sources.list.d/debian.sources")
    elif spec["family"] == "rhel":
        base_files = " ".join(f"/tmp/base/{name}" for name in base_rpms)
        builds_store = any(name.startswith("selinux-policy-targeted-") for name in base_rpms)
        steps = [
            f"rpm --import {RPM_KEY_PATH}",
            # RHEL 9 installs yum (yum-4.14: /usr/bin/yum -> dnf-3, vendor_facts/rhel-baseos/rhel9.yml); Debian's dnf
            # package has no yum name, and tools such as community.general.yum_versionlock call it.
            "ln -sf dnf-3 /usr/bin/yum",
            *(["rpm -i /tmp/release.rpm", "rm -f /tmp/release.rpm"] if has_release_package else []),
            # One transaction, so rpm orders them by their relations and runs their scriptlets (the policy store).
            *([f"rpm -i {base_files}", "rm -rf /tmp/base"] if base_rpms else []),
            # rpm reports a failed %post as a warning and exits 0: the store it builds must be there.
            *(["semodule -l | grep -qx base"] if builds_store else []),
            # A RHEL host has no apt sources: its packages come from dnf alone.
            "rm -f /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list.d/gpuforge-lab-tools.sources",
        ]
        if spec.get("dnf_bindings_private"):
            steps += _dnf_bindings_private_steps()
        if has_release_package:
            lines.insert(2, "COPY release.rpm /tmp/release.rpm")
        if base_rpms:
            lines.insert(2, "COPY base/ /tmp/base/")
        lines.append("RUN " + " && ".join(steps))
    return "\n".join(lines) + "\n"


def _dnf_bindings_private_steps() -> list[str]:
    """Move dnf's Python packages out of python3's path; /usr/bin/dnf-3 (the dnf and yum commands) finds them through
    PYTHONPATH, as RHEL 8's dnf finds them in platform-python's site-packages. ansible.builtin.dnf then fails on the
    node's python3 ("Could not import the dnf python module"), and finds no /usr/libexec/platform-python to respawn
    on: on RHEL 8 that interpreter is Python 3.6, which ansible-core 2.17 and later refuse."""
    site = "/usr/lib/python3/dist-packages"
    moves = " ".join(f"{site}/{name}" for name in DNF_BINDINGS)
    return [
        f"mkdir -p {DNF_PRIVATE_SITE}",
        f"for package in {moves}; do if [ -e $package ]; then mv $package {DNF_PRIVATE_SITE}/; fi; done",
        "mv /usr/bin/dnf-3 /usr/lib/gpuforge-lab/dnf-3",
        f"printf '#!/bin/sh\\nPYTHONPATH={DNF_PRIVATE_SITE} exec /usr/bin/python3 /usr/lib/gpuforge-lab/dnf-3"
        ' "$@"\\n\' > /usr/bin/dnf-3',
        "chmod 0755 /usr/bin/dnf-3",
        "ln -sf dnf-3 /usr/bin/dnf",
        # What the layer claims: python3 cannot import dnf, the dnf command still runs.
        "! python3 -c 'import dnf'",
        "dnf --version >/dev/null",
    ]


def _hash(base_tag: str, shape: str, files: dict, release: Path | None, text: str, base: list[Path] = ()) -> str:
    digest = hashlib.sha256(f"{LAYER_REVISION}\n{base_tag}\n{shape}\n{text}".encode())
    for path in sorted(files):
        content = files[path]
        digest.update(path.encode() + (content if isinstance(content, bytes) else content.encode()))
    for package in [release, *base] if release else list(base):
        digest.update(package.read_bytes())
    return digest.hexdigest()[:12]


def build(base_tag: str, key: bytes, log=print) -> dict[str, str]:
    """Each shape's image tag (built when missing); the base shape's is the shared image itself."""
    tags = {}
    for shape, spec in load().items():
        if shape == BASE_SHAPE:
            tags[shape] = base_tag
            continue
        files = layer_files(shape, spec, key)
        release = release_package(spec)
        base = base_packages(spec)
        text = containerfile(base_tag, spec, release is not None, tuple(package.name for package in base))
        tag = f"{base_tag.split(':')[0]}-{shape}:{_hash(base_tag, shape, files, release, text, base)}"
        tags[shape] = tag
        if exists("image", tag):
            continue
        log(f"lab: building the {shape} layer {tag}")
        context = LAB_STATE_DIR / "build" / f"shape-{shape}"
        shutil.rmtree(context, ignore_errors=True)
        for path, content in files.items():
            target = context / "root" / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content, encoding="utf-8")
            target.chmod(0o755 if path.startswith(EXECUTABLE_PREFIXES) else 0o644)
        if release:
            shutil.copy2(release, context / "release.rpm")
        for package in base:
            (context / "base").mkdir(exist_ok=True)
            shutil.copy2(package, context / "base" / package.name)
        (context / "Containerfile").write_text(text, encoding="utf-8")
        podman("build", "--pull=never", "--network=none", "-t", tag, "-f", str(context / "Containerfile"), str(context))
        shutil.rmtree(context, ignore_errors=True)
    write_env(tags)
    return tags


def write_env(tags: dict[str, str]) -> Path:
    """GPUFORGE_LAB_IMAGE_<SHAPE>=<tag> lines, which scripts/molecule_lanes.sh exports for Molecule platforms."""
    ENV_FILE.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(f"{env_name(shape)}={tag}\n" for shape, tag in sorted(tags.items()))
    if not ENV_FILE.is_file() or ENV_FILE.read_text(encoding="utf-8") != text:
        ENV_FILE.write_text(text, encoding="utf-8")
    return ENV_FILE
