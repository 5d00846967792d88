"""RHEL packages whose lab payload is Debian 12's build of the same program, or a generated tree
(lab/packages/packages.yml rpm_payload_from_debian and rpm_payload_generated; gpuforge.lab.shape_repos)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gpuforge import vendor_facts
from gpuforge.lab import mirror, rpm_repo, shape_repos

needs_rpmbuild = pytest.mark.skipif(shutil.which("rpmbuild") is None, reason="rpmbuild comes with scripts/setup.sh")
DEBIAN_DEVEL = Path("/usr/share/selinux/devel")


def _deb(tmp_path: Path, name: str, files: dict[str, str], links: dict[str, str] | None = None) -> Path:
    """A minimal .deb built with dpkg-deb, holding these files (path -> text) and symlinks (path -> target)."""
    root = tmp_path / f"build-{name}"
    for path, text in files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    for path, target in (links or {}).items():
        link = root / path.lstrip("/")
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target)
    (root / "DEBIAN").mkdir(parents=True, exist_ok=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: {name}\nVersion: 1.0-1\nArchitecture: all\nMaintainer: t <t@example.org>\nDescription: test\n",
        encoding="utf-8",
    )
    out = tmp_path / f"{name}_1.0-1_all.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(root), str(out)], check=True, capture_output=True)
    return out


def _tree(root: Path) -> list[str]:
    return sorted("/" + str(path.relative_to(root)) for path in root.rglob("*") if not path.is_dir())


def test_debian_files_take_rhel_paths_and_leave_the_documentation(tmp_path: Path):
    debs = {
        "policycoreutils": _deb(
            tmp_path,
            "policycoreutils",
            {"/sbin/restorecon": "x", "/usr/sbin/semodule": "x", "/usr/share/doc/policycoreutils/copyright": "c"},
            {"/sbin/setfiles": "restorecon"},
        ),
        "semodule-utils": _deb(tmp_path, "semodule-utils", {"/usr/bin/semodule_package": "x"}),
    }
    spec = {"debian": ["policycoreutils", "semodule-utils"]}
    tree = shape_repos.debian_payload("policycoreutils", spec, debs, tmp_path / "work")
    expected = ["/usr/bin/semodule_package", "/usr/sbin/restorecon", "/usr/sbin/semodule", "/usr/sbin/setfiles"]
    assert _tree(tree) == expected
    assert (tree / "usr/sbin/setfiles").readlink() == Path("restorecon")


def test_the_store_is_renamed_to_what_rhel_calls_it(tmp_path: Path):
    debs = {
        "selinux-policy-default": _deb(
            tmp_path,
            "selinux-policy-default",
            {"/etc/selinux/default/setrans.conf": "s", "/usr/share/selinux/default/.modules": "base\napache\n"},
        )
    }
    spec = mirror.load_definitions()["rpm_payload_from_debian"]["selinux-policy-targeted"]
    tree = shape_repos.debian_payload("selinux-policy-targeted", spec, debs, tmp_path / "work")
    assert _tree(tree) == ["/etc/selinux/targeted/setrans.conf", "/usr/share/selinux/targeted/.modules"]
    # The %post builds the store from exactly the modules listed, at priority 100, without loading a kernel policy.
    store = str(tree / "usr/share/selinux/targeted")
    script = spec["post"].replace("semodule ", "echo ", 1).replace("/usr/share/selinux/targeted", store)
    script = script.replace("mkdir -p /var/lib/selinux/targeted", "true")
    listed = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout.split()
    assert listed[:5] == ["-X", "100", "-n", "-s", "targeted"]
    assert [item.rsplit("/", 1)[-1] for item in listed[5:]] == ["base.pp.bz2", "apache.pp.bz2"]


def test_a_debian_package_missing_from_the_subset_names_the_list_to_add_it_to(tmp_path: Path):
    message = r"m4: Debian package m4 is not in the lab's Debian subset.*debian\.txt"
    with pytest.raises(mirror.MirrorError, match=message):
        shape_repos.debian_payload("m4", {"debian": ["m4"]}, {}, tmp_path / "work")


def test_every_payload_names_a_registry_package_of_a_published_rhel_repository():
    definitions = mirror.load_definitions()
    published = {
        package.name
        for key in definitions["publish_os_shapes"]["rpm"]
        for package in vendor_facts.repository(key).packages
    }
    named = set(definitions["rpm_payload_from_debian"]) | set(definitions["rpm_payload_generated"])
    assert named <= published, named - published


@needs_rpmbuild
def test_payload_rpm_keeps_registry_relations_and_runs_its_post(tmp_path: Path):
    repo = vendor_facts.repository("rhel-baseos/rhel9")
    definitions = mirror.load_definitions()
    wanted = [p for p in repo.packages if p.name == "selinux-policy-targeted"]
    packages = [mirror._from_registry(p, repo, definitions) for p in wanted]
    debs = {
        "selinux-policy-default": _deb(
            tmp_path, "selinux-policy-default", {"/usr/share/selinux/default/.modules": "base\n"}
        )
    }
    (package,) = shape_repos.with_payloads(packages, definitions, debs, tmp_path / "staging")
    built = rpm_repo.build_rpm(package, tmp_path / "w", tmp_path / "o")
    assert rpm_repo.rpm_query(built, "%{NAME} %{VERSION}-%{RELEASE}") == "selinux-policy-targeted 38.1.35-2.el9_4"
    requires = rpm_repo.rpm_query(built, "[%{REQUIRENAME} %{REQUIREFLAGS:depflags} %{REQUIREVERSION}\n]").splitlines()
    assert "selinux-policy = 38.1.35-2.el9_4" in requires
    assert "policycoreutils >= 3.6" in requires
    assert "semodule -X 100 -n -s targeted" in rpm_repo.rpm_query(built, "%{POSTIN}")
    assert rpm_repo.rpm_query(built, "[%{FILENAMES}\n]").split() == ["/usr/share/selinux/targeted/.modules"]
    assert "Debian 12 selinux-policy-default" in rpm_repo.rpm_query(built, "%{SUMMARY}")


@pytest.mark.skipif(not (DEBIAN_DEVEL / "Makefile").is_file(), reason="Debian's selinux-policy-dev (scripts/setup.sh)")
def test_selinux_policy_devel_is_the_rhel_like_tree(tmp_path: Path):
    files = {
        "/" + str(path.relative_to("/")): path.read_text(encoding="utf-8", errors="replace")
        for path in DEBIAN_DEVEL.rglob("*")
        if path.is_file()
    }
    debs = {"selinux-policy-dev": _deb(tmp_path, "selinux-policy-dev", files)}
    tree = shape_repos.generated_payload("selinux-policy-devel", "rhel_like_selinux_devel", debs, tmp_path / "w")
    devices = (tree / "usr/share/selinux/devel/include/kernel/devices.if").read_text(encoding="utf-8")
    assert "interface(`dev_rw_infiniband_dev'," in devices  # RHEL's name (vendor_facts/selinux-policy/rhel9.yml)
    assert "interface(`dev_rw_infiniband'," not in devices  # refpolicy's, absent on RHEL
    assert (tree / "usr/share/selinux/devel/Makefile").is_file()
    with pytest.raises(mirror.MirrorError, match="unknown payload generator"):
        shape_repos.generated_payload("x", "nope", debs, tmp_path / "w2")
