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


def _deb(
    tmp_path: Path, name: str, files: dict[str, str], links: dict[str, str] | None = None, dirs: tuple[str, ...] = ()
) -> Path:
    """A minimal .deb built with dpkg-deb, holding these files (path -> text), symlinks (path -> target) and empty
    directories."""
    root = tmp_path / f"build-{name}"
    for directory in dirs:
        (root / directory.lstrip("/")).mkdir(parents=True, exist_ok=True)
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


def _deb_with_depends(tmp_path: Path, name: str, depends: str, pre_depends: str = "") -> Path:
    deb = _deb(tmp_path, name, {f"/usr/lib/{name}/marker": name})
    root = tmp_path / f"build-{name}"
    control = root / "DEBIAN" / "control"
    text = control.read_text(encoding="utf-8")
    text += (f"Pre-Depends: {pre_depends}\n" if pre_depends else "") + (f"Depends: {depends}\n" if depends else "")
    control.write_text(text, encoding="utf-8")
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(root), str(deb)], check=True, capture_output=True)
    return deb


def test_with_dependencies_carries_what_the_subset_holds_of_the_closure(tmp_path: Path):
    # network-manager -> libnm0 (in the subset) -> libc6 (in the image: not in the subset); alternatives take the
    # first the subset holds; a package nothing depends on stays out.
    debs = {
        "network-manager": _deb_with_depends(
            tmp_path, "network-manager", "libnm0 (>= 1.42), libc6 (>= 2.34), udev | systemd-udev", "libpam-systemd"
        ),
        "libnm0": _deb_with_depends(tmp_path, "libnm0", "libc6, libndp0:any"),
        "libndp0": _deb_with_depends(tmp_path, "libndp0", ""),
        "udev": _deb_with_depends(tmp_path, "udev", ""),
        "libpam-systemd": _deb_with_depends(tmp_path, "libpam-systemd", ""),
        "unrelated": _deb_with_depends(tmp_path, "unrelated", ""),
    }
    assert shape_repos.closure(["network-manager"], debs) == [
        "network-manager",
        "libpam-systemd",
        "libnm0",
        "udev",
        "libndp0",
    ]
    spec = {"debian": ["network-manager"], "with_dependencies": True}
    tree = shape_repos.debian_payload("NetworkManager", spec, debs, tmp_path / "work")
    assert sorted(path.parent.name for path in (tree / "usr/lib").glob("*/marker")) == sorted(
        ["network-manager", "libpam-systemd", "libnm0", "udev", "libndp0"]
    )


@needs_rpmbuild
def test_an_empty_directory_of_the_debian_package_is_owned_by_the_rpm(tmp_path: Path):
    # NetworkManager's keyfile directory: the ipoib role writes into it and does not create it (the package does).
    debs = {
        "network-manager": _deb(
            tmp_path, "network-manager", {"/usr/bin/nmcli": "x"}, dirs=("/etc/NetworkManager/system-connections",)
        )
    }
    repo = vendor_facts.repository("rhel-baseos/rhel9")
    definitions = mirror.load_definitions()
    wanted = [p for p in repo.packages if p.name == "NetworkManager"]
    packages = [mirror._from_registry(p, repo, definitions) for p in wanted]
    (package,) = shape_repos.with_payloads(packages, definitions, debs, tmp_path / "staging")
    built = rpm_repo.build_rpm(package, tmp_path / "w", tmp_path / "o")
    listed = rpm_repo.rpm_query(built, "[%{FILENAMES} %{FILEMODES:perms}\n]").splitlines()
    assert "/etc/NetworkManager/system-connections drwxr-xr-x" in listed
    assert "/usr/bin/nmcli -rw-r--r--" in listed
    assert not any(line.startswith(("/etc ", "/etc/NetworkManager ", "/usr ")) for line in listed)


def test_a_package_another_entry_carries_stays_out_of_the_closure(tmp_path: Path):
    # netplan.io's closure takes python3-rich along but not libnetplan0 or python3-yaml, which the Ubuntu archive
    # publishes as their own packages (deb_payload_from_debian): two packages must not hold one file.
    debs = {
        "netplan.io": _deb_with_depends(tmp_path, "netplan.io", "libnetplan0 (= 0.106), python3-yaml, python3-rich"),
        "libnetplan0": _deb_with_depends(tmp_path, "libnetplan0", ""),
        "python3-yaml": _deb_with_depends(tmp_path, "python3-yaml", ""),
        "python3-rich": _deb_with_depends(tmp_path, "python3-rich", "python3-pygments"),
        "python3-pygments": _deb_with_depends(tmp_path, "python3-pygments", ""),
    }
    definitions = mirror.load_definitions()
    packages = [
        {"name": name, "version": "1-1", "description": name} for name in ("netplan.io", "libnetplan0", "python3-yaml")
    ]
    carried = {
        package["name"]: sorted(path.parent.name for path in (package["payload"] / "usr/lib").glob("*/marker"))
        for package in shape_repos.with_payloads(packages, definitions, debs, tmp_path / "staging", "deb")
    }
    assert carried == {
        "netplan.io": ["netplan.io", "python3-pygments", "python3-rich"],
        "libnetplan0": ["libnetplan0"],
        "python3-yaml": ["python3-yaml"],
    }


def test_closures_share_nothing_across_repositories_and_within_one(tmp_path: Path):
    # EPEL's slurm takes libhwloc15 along but not munge or libmunge2, which AppStream's munge and munge-libs carry (a
    # RHEL node enables both repositories); an EPEL package listed after it does not carry libhwloc15 a second time.
    debs = {
        "slurm-client": _deb_with_depends(tmp_path, "slurm-client", "slurm-wlm-basic-plugins, munge"),
        "slurm-wlm-basic-plugins": _deb_with_depends(tmp_path, "slurm-wlm-basic-plugins", "libhwloc15, libmunge2"),
        "libhwloc15": _deb_with_depends(tmp_path, "libhwloc15", ""),
        "munge": _deb_with_depends(tmp_path, "munge", "libmunge2"),
        "libmunge2": _deb_with_depends(tmp_path, "libmunge2", ""),
        "slurmd": _deb_with_depends(tmp_path, "slurmd", "libhwloc15, slurm-wlm-basic-plugins"),
    }
    definitions = {
        "rpm_payload_from_debian": {
            "slurm": {"debian": ["slurm-client", "slurm-wlm-basic-plugins"], "with_dependencies": True},
            "slurm-slurmd": {"debian": ["slurmd"], "with_dependencies": True},
            "munge": {"debian": ["munge"]},
            "munge-libs": {"debian": ["libmunge2"]},
        }
    }
    epel = [{"name": name, "version": "1-1", "description": name} for name in ("slurm", "slurm-slurmd")]
    carried = {
        package["name"]: sorted(path.parent.name for path in (package["payload"] / "usr/lib").glob("*/marker"))
        for package in shape_repos.with_payloads(epel, definitions, debs, tmp_path / "staging")
    }
    assert carried == {"slurm": ["libhwloc15", "slurm-client", "slurm-wlm-basic-plugins"], "slurm-slurmd": ["slurmd"]}


@pytest.mark.parametrize("package_format", ["rpm", "deb"])
def test_the_munge_scriptlet_makes_the_user_and_hands_it_its_directories(package_format):
    # munged refuses directories it does not own (munged(8)); Debian's and Ubuntu's postinst also make a key.
    post = mirror.load_definitions()[f"{package_format}_payload_from_debian"]["munge"]["post"]
    assert "munge" in post.splitlines()[0] and ("useradd -r" in post or "adduser --quiet --system" in post)
    assert "chown munge:munge /etc/munge /var/lib/munge /var/log/munge" in post
    assert ("mungekey" in post) is (package_format == "deb")


def test_the_ubuntu_archive_packages_with_debian_payloads_are_registry_packages():
    definitions = mirror.load_definitions()
    published = {
        package.name
        for release in definitions["publish_os_shapes"]["archives"]["ubuntu"]["releases"]
        for key in release["registry"]
        for package in vendor_facts.repository(key).packages
    }
    assert set(definitions["deb_payload_from_debian"]) <= published


@needs_rpmbuild
def test_ibm_storage_scale_is_published_as_its_installer_s_gpfs_rpms_too(tmp_path: Path):
    # The same registry file as gpfs_debs/, under the RPM names and architectures its facts record: the role's RHEL
    # path pins gpfs.msg.en_US-5.1.9-3 and gpfs.base-5.1.9-3.
    repo = vendor_facts.repository("ibm-storage-scale/5.1.9.3")
    definitions = mirror.load_definitions()
    assert definitions["publish_os_shapes"]["rpm"]["ibm-storage-scale/5.1.9.3"] == "gpfs/5.1.9.3/rhel9"
    packages = shape_repos.rpm_flavour(repo, [mirror._from_registry(p, repo, definitions) for p in repo.packages])
    by_name = {package["name"]: package for package in packages}
    assert by_name["gpfs.msg.en_US"]["architecture"] == "noarch"
    assert by_name["gpfs.base"]["architecture"] == "x86_64"
    assert "gpfs.msg.en-us" not in by_name
    built = rpm_repo.build_rpm(by_name["gpfs.msg.en_US"], tmp_path / "w", tmp_path / "o")
    assert built.name == "gpfs.msg.en_US-5.1.9-3.noarch.rpm"
    with pytest.raises(mirror.MirrorError, match=r"no RPM architecture for gpfs\.unknown"):
        shape_repos.rpm_flavour(repo, [dict(by_name["gpfs.base"], name="gpfs.unknown")])


def test_a_deb_with_a_payload_runs_its_post_as_postinst(tmp_path: Path):
    tree = tmp_path / "tree" / "usr/sbin"
    tree.mkdir(parents=True)
    (tree / "munged").write_text("x", encoding="utf-8")
    package = {"name": "munge", "version": "0.5.14-6ubuntu0.1", "description": "munge", "payload": tmp_path / "tree"}
    package["post"] = "echo made\n"
    (tmp_path / "out").mkdir()
    deb = mirror.build_deb(package, tmp_path / "staging", tmp_path / "out")
    control = tmp_path / "control"
    subprocess.run(["dpkg-deb", "-e", str(deb), str(control)], check=True)
    assert (control / "postinst").read_text(encoding="utf-8") == "#!/bin/sh\nset -e\necho made\n"
    assert (control / "postinst").stat().st_mode & 0o111
    assert "./usr/sbin/munged" in subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True).stdout


def _library_tree(root: Path) -> Path:
    lib = root / "usr/lib/x86_64-linux-gnu"
    lib.mkdir(parents=True)
    (lib / "libnetplan.so.0.0").write_text("x", encoding="utf-8")
    return root


def test_a_payload_with_a_shared_library_has_ldconfig_run(tmp_path: Path):
    # Debian's libnetplan0 ships libnetplan.so.0.0 and no libnetplan.so.0: its triggers file has ldconfig make the
    # link. Without it the lab's netplan CLI could not load its library (Molecule ipoib on Ubuntu, 2026-12-04).
    assert shape_repos.has_shared_libraries(_library_tree(tmp_path / "lib"))
    programs = tmp_path / "bin" / "usr/sbin"
    programs.mkdir(parents=True)
    (programs / "munged").write_text("x", encoding="utf-8")
    assert not shape_repos.has_shared_libraries(tmp_path / "bin")
    package = {"name": "libnetplan0", "version": "0.106.1-7ubuntu0.22.04.2", "description": "netplan"}
    package |= {"payload": tmp_path / "lib", "ldconfig": True}
    (tmp_path / "out").mkdir()
    deb = mirror.build_deb(package, tmp_path / "staging", tmp_path / "out")
    subprocess.run(["dpkg-deb", "-e", str(deb), str(tmp_path / "control")], check=True)
    assert (tmp_path / "control" / "triggers").read_text(encoding="utf-8") == "activate-noawait ldconfig\n"


@needs_rpmbuild
def test_a_payload_rpm_with_a_shared_library_runs_ldconfig_after_its_own_post(tmp_path: Path):
    package = {"name": "NetworkManager-libnm", "version": "1:1.46.0-19.el9_4", "description": "libnm"}
    package |= {"payload": _library_tree(tmp_path / "lib"), "ldconfig": True, "post": "echo made"}
    built = rpm_repo.build_rpm(package, tmp_path / "w", tmp_path / "o")
    assert rpm_repo.rpm_query(built, "%{POSTIN}").splitlines() == ["echo made", "/sbin/ldconfig"]


@needs_rpmbuild
def test_nccl_stand_in_rpm_carries_mpi4py_and_numpy_but_not_python_or_open_mpi(tmp_path: Path):
    """The nccl-tests stand-in's RPM (packages.yml lab_packages, ``rpm``): the script, Debian's mpi4py and NumPy with
    the BLAS/LAPACK sonames Debian's update-alternatives would make, requiring openmpi; not the subset's python3.11,
    which would replace the image's Python, and not Open MPI, which the openmpi RPM carries."""
    debs = {
        name: _deb(tmp_path, name, {path: "x"})
        for name, path in {
            "python3-mpi4py": "/usr/lib/python3/dist-packages/mpi4py/__init__.py",
            "python3-numpy": "/usr/lib/python3/dist-packages/numpy/__init__.py",
            "libblas3": "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3",
            "liblapack3": "/usr/lib/x86_64-linux-gnu/lapack/liblapack.so.3",
            "libgfortran5": "/usr/lib/x86_64-linux-gnu/libgfortran.so.5",
            "libquadmath0": "/usr/lib/x86_64-linux-gnu/libquadmath.so.0",
            "python3.11": "/usr/bin/python3.11",
            "openmpi-bin": "/usr/bin/mpirun.openmpi",
        }.items()
    }
    tools = shape_repos.rpm_lab_tools(mirror.load_definitions(), debs, tmp_path / "payloads")
    nccl = next(package for package in tools if package["name"] == "nccl-tests")
    built = rpm_repo.build_rpm(nccl, tmp_path / "work", tmp_path / "out")
    assert rpm_repo.rpm_query(built, "%{NAME} %{VERSION}-%{RELEASE} %{ARCH}") == "nccl-tests 2.13.10-1gpuforge1 x86_64"
    requires = rpm_repo.rpm_query(built, "[%{REQUIRENAME}\n]").split()
    assert sorted(name for name in requires if not name.startswith(("rpmlib(", "/"))) == ["gpuforge-lab-sim", "openmpi"]
    files = rpm_repo.rpm_query(built, "[%{FILENAMES}\n]").split()
    assert "/usr/bin/all_reduce_perf" in files
    assert "/usr/lib/python3/dist-packages/mpi4py/__init__.py" in files
    assert "/usr/lib/python3/dist-packages/numpy/__init__.py" in files
    assert "/usr/lib/x86_64-linux-gnu/libblas.so.3" in files and "/usr/lib/x86_64-linux-gnu/liblapack.so.3" in files
    assert "/usr/bin/python3.11" not in files and "/usr/bin/mpirun.openmpi" not in files
    # The script is the stand-in itself, executable.
    tree = tmp_path / "work" / "root"
    assert (tree / "usr/bin/all_reduce_perf").read_bytes().startswith(b"#!/usr/bin/python3")
