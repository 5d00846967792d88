"""The lab's OS shapes: release files and repositories from the registry, RPMs as rpm reads them, module streams."""

import shutil
from pathlib import Path

import pytest
import yaml

from gpuforge import vendor_facts
from gpuforge.lab import mirror, os_shapes, rpm_repo, shape_repos, spec

KEY = b"-----BEGIN PGP PUBLIC KEY BLOCK-----\nlab key\n-----END PGP PUBLIC KEY BLOCK-----\n"


def _os_release(text: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line)
    return {key: value.strip('"') for key, value in pairs}


def test_rhel9_layer_names_the_os_as_red_hat_does():
    files = os_shapes.layer_files("rhel9", os_shapes.load()["rhel9"], KEY)
    release = _os_release(files["/usr/lib/os-release"])
    assert (release["ID"], release["VERSION_ID"], release["PLATFORM_ID"]) == ("rhel", "9.4", "platform:el9")
    # /etc/os-release and /etc/redhat-release come from the release package, installed in the layer's rpmdb.
    assert "/etc/redhat-release" not in files
    assert files["/etc/rpm/macros.dbpath"] == "%_dbpath /var/lib/rpm\n"
    assert files[os_shapes.RPM_KEY_PATH] == KEY
    assert files["/etc/dnf/plugins/local.conf"] == "[main]\nenabled = 0\n"
    repo = files["/etc/yum.repos.d/redhat.repo"]
    assert "[rhel-9-for-x86_64-baseos-rpms]" in repo
    assert "baseurl = http://mirror/rhel/9/x86_64/baseos/" in repo
    # AppStream beside BaseOS, as subscription-manager enables both (selinux-policy-devel, m4 come from AppStream).
    assert "[rhel-9-for-x86_64-appstream-rpms]" in repo
    assert "baseurl = http://mirror/rhel/9/x86_64/appstream/" in repo
    assert repo.count("gpgcheck = 1") == repo.count("[rhel-9-for-x86_64-") == 2


def test_rhel9_layer_installs_the_selinux_store_in_one_rpm_transaction():
    spec = os_shapes.load()["rhel9"]
    names = ("gawk.rpm", "policycoreutils.rpm", "selinux-policy-targeted-38.1.35-2.el9_4.noarch.rpm")
    text = os_shapes.containerfile("localhost/gpuforge-lab-node:abc", spec, True, names)
    assert "COPY base/ /tmp/base/" in text
    assert f"rpm -i /tmp/base/gawk.rpm /tmp/base/policycoreutils.rpm /tmp/base/{names[2]}" in text
    # rpm exits 0 when a %post fails: the layer checks the store that %post builds.
    assert text.index("rpm -i /tmp/base/") < text.index("semodule -l | grep -qx base")
    assert text.index("rpm -i /tmp/release.rpm") < text.index("rpm -i /tmp/base/")
    assert "selinux-policy-targeted" in spec["base_packages"]
    assert "/tmp/base" not in os_shapes.containerfile("localhost/gpuforge-lab-node:abc", spec, True)


def test_ubuntu2204_layer_names_the_os_and_lists_the_three_pockets():
    files = os_shapes.layer_files("ubuntu2204", os_shapes.load()["ubuntu2204"], KEY)
    release = _os_release(files["/etc/os-release"])
    assert (release["ID"], release["VERSION_ID"], release["VERSION_CODENAME"]) == ("ubuntu", "22.04", "jammy")
    assert "DISTRIB_CODENAME=jammy" in files["/etc/lsb-release"]
    sources = files["/etc/apt/sources.list"].splitlines()
    assert [line.split()[3] for line in sources] == ["jammy", "jammy-updates", "jammy-security"]
    assert all("signed-by=" in line and "http://mirror/ubuntu/" in line for line in sources)


def test_rhel8_layer_names_the_os_as_red_hat_does():
    files = os_shapes.layer_files("rhel8", os_shapes.load()["rhel8"], KEY)
    release = _os_release(files["/usr/lib/os-release"])
    assert (release["ID"], release["VERSION_ID"], release["PLATFORM_ID"]) == ("rhel", "8.10", "platform:el8")
    assert release["VERSION"] == "8.10 (Ootpa)"
    repo = files["/etc/yum.repos.d/redhat.repo"]
    assert "[rhel-8-for-x86_64-baseos-rpms]" in repo
    assert "baseurl = http://mirror/rhel/8/x86_64/baseos/" in repo


def test_rhel8_keeps_dnf_bindings_from_the_modules_python():
    # RHEL 8's python3-dnf is built for platform-python 3.6, which ansible-core >= 2.17 cannot run modules on.
    text = os_shapes.containerfile("localhost/gpuforge-lab-node:abc", os_shapes.load()["rhel8"], True)
    run = next(line for line in text.splitlines() if line.startswith("RUN "))
    assert f"/usr/lib/python3/dist-packages/dnf {os_shapes.DNF_PRIVATE_SITE}" not in run  # moved one by one
    assert "mv $package /usr/lib/gpuforge-lab/dnf-site/" in run
    assert f"PYTHONPATH={os_shapes.DNF_PRIVATE_SITE} exec /usr/bin/python3" in run
    assert "! python3 -c 'import dnf'" in run
    assert "platform-python" not in run
    rhel9 = os_shapes.containerfile("localhost/gpuforge-lab-node:abc", os_shapes.load()["rhel9"], True)
    assert os_shapes.DNF_PRIVATE_SITE not in rhel9


def test_ubuntu2404_layer_names_the_os_and_lists_the_three_noble_pockets():
    files = os_shapes.layer_files("ubuntu2404", os_shapes.load()["ubuntu2404"], KEY)
    release = _os_release(files["/etc/os-release"])
    assert (release["ID"], release["VERSION_ID"], release["VERSION_CODENAME"]) == ("ubuntu", "24.04", "noble")
    assert "DISTRIB_RELEASE=24.04" in files["/etc/lsb-release"]
    sources = files["/etc/apt/sources.list"].splitlines()
    assert [line.split()[3] for line in sources] == ["noble", "noble-updates", "noble-security"]


def test_one_ubuntu_archive_serves_every_release():
    archive = mirror.load_definitions()["publish_os_shapes"]["archives"]["ubuntu"]
    shapes = os_shapes.load()
    ubuntu = {name: spec for name, spec in shapes.items() if spec["family"] == "ubuntu"}
    assert {spec["archive"] for spec in ubuntu.values()} == {"ubuntu"}
    assert sorted(r["suites_from"] for r in archive["releases"]) == sorted(s["release_facts"] for s in ubuntu.values())


def test_every_rhel_shape_has_its_cuda_epel_and_baseos_repositories_and_key():
    shapes_defs = mirror.load_definitions()["publish_os_shapes"]
    for name, shape in os_shapes.load().items():
        if shape["family"] != "rhel":
            continue
        major = name.removeprefix("rhel")
        assert {f"nvidia-cuda/{name}", f"rhel-baseos/{name}", f"epel/el{major}"} <= set(shapes_defs["rpm"]), name
        assert f"epel/RPM-GPG-KEY-EPEL-{major}" in shapes_defs["key_copies"], name


def test_rhel8_module_streams_default_to_open_dkms_as_nvidia_repository_lists():
    repo, packages = _packages("nvidia-cuda/rhel8")
    documents = list(yaml.safe_load_all(rpm_repo.module_streams(repo, packages)))
    defaults = next(doc for doc in documents if doc["document"] == "modulemd-defaults")
    assert defaults["data"]["stream"] == "open-dkms"
    dkms = next(doc for doc in documents if doc.get("data", {}).get("stream") == "535-dkms")
    assert "nvidia-driver-3:535.183.01-1.el8.x86_64" in dkms["data"]["artifacts"]["rpms"]


def test_every_shape_env_name():
    assert os_shapes.env_name("debian12") == "GPUFORGE_LAB_IMAGE"
    assert os_shapes.env_name("rhel9") == "GPUFORGE_LAB_IMAGE_RHEL9"


def test_rhel_layer_installs_the_release_package_after_importing_the_key():
    text = os_shapes.containerfile("localhost/gpuforge-lab-node:abc", os_shapes.load()["rhel9"], True)
    run = next(line for line in text.splitlines() if line.startswith("RUN "))
    assert run.index("rpm --import") < run.index("rpm -i /tmp/release.rpm")
    assert "debian.sources" in run
    # RHEL 9's yum package: /usr/bin/yum -> dnf-3 (community.general.yum_versionlock calls yum).
    assert "ln -sf dnf-3 /usr/bin/yum" in run


def test_rhel_layer_has_a_dracut_that_records_the_rebuild():
    files = os_shapes.layer_files("rhel9", os_shapes.load()["rhel9"], KEY)
    assert "update_initramfs_main" in files["/usr/local/sbin/dracut"]
    assert "/usr/local/sbin/dracut".startswith(os_shapes.EXECUTABLE_PREFIXES)


@pytest.mark.parametrize(
    ("relation", "expected"),
    [
        ("nvidia-smi (= 3:535.183.01-1.el9)", "nvidia-smi = 3:535.183.01-1.el9"),
        ("a (>> 1) | b", "(a > 1 or b)"),
        ("system-release(releasever) (= 9)", "system-release(releasever) = 9"),
        ("dkms", "dkms"),
    ],
)
def test_registry_relations_become_rpm_dependencies(relation, expected):
    assert rpm_repo.rpm_relation(relation) == expected


def test_split_version():
    assert rpm_repo.split_version("3:535.183.01-1.el9") == ("3", "535.183.01", "1.el9")
    assert rpm_repo.split_version("1.0") == ("", "1.0", "1")


def _packages(key: str) -> tuple[vendor_facts.Repository, list[dict]]:
    repo = vendor_facts.repository(key)
    definitions = mirror.load_definitions()
    return repo, [mirror._from_registry(package, repo, definitions) for package in repo.packages]


def test_module_streams_hold_the_branch_userland_and_its_kernel_module_package():
    repo, packages = _packages("nvidia-cuda/rhel9")
    documents = list(yaml.safe_load_all(rpm_repo.module_streams(repo, packages)))
    streams = {doc["data"]["stream"]: doc["data"] for doc in documents if doc["document"] == "modulemd"}
    dkms = streams["535-dkms"]["artifacts"]["rpms"]
    assert "nvidia-driver-3:535.183.01-1.el9.x86_64" in dkms
    assert "kmod-nvidia-latest-dkms-3:535.183.01-1.el9.x86_64" in dkms
    # The precompiled stream has no DKMS package; the fabric manager (no epoch) is not modular.
    assert not any(rpm.startswith("kmod-nvidia-latest-dkms") for rpm in streams["535"]["artifacts"]["rpms"])
    assert not any(rpm.startswith("nvidia-fabric") for doc in streams.values() for rpm in doc["artifacts"]["rpms"])
    defaults = next(doc for doc in documents if doc["document"] == "modulemd-defaults")
    assert defaults["data"]["profiles"]["535-dkms"] == ["default"]
    # The registry's default stream: its packages are what dnf lists before a stream is enabled.
    assert defaults["data"]["stream"] == repo.fact("module_default_stream") == "open-dkms"


def test_security_builds_go_to_updates_and_security_pockets():
    repo = vendor_facts.repository("ubuntu/jammy")
    suites = ["jammy", "jammy-updates", "jammy-security"]
    assert shape_repos.pockets(repo, suites, {"name": "munge", "version": "0.5.14-6ubuntu0.1"}) == suites[1:]
    assert shape_repos.pockets(repo, suites, {"name": "munge", "version": "0.5.14-6"}) == ["jammy"]


def _requires(path: Path) -> list[str]:
    """The package's Requires without rpmbuild's own rpmlib() features."""
    names = rpm_repo.rpm_query(path, "[%{REQUIRENAME}\n]").split()
    return [name for name in names if not name.startswith("rpmlib(")]


@pytest.mark.skipif(shutil.which("rpmbuild") is None, reason="rpmbuild comes with scripts/setup.sh (package rpm)")
def test_rpm_carries_the_registry_name_epoch_relations_and_simulated_files(tmp_path: Path):
    _, packages = _packages("nvidia-cuda/rhel9")
    package = next(p for p in packages if p["name"] == "nvidia-driver-cuda" and p["version"].startswith("3:535.183"))
    built = rpm_repo.build_rpm(package, tmp_path / "work", tmp_path / "out")
    assert rpm_repo.rpm_query(built, "%{NAME} %{EPOCH}:%{VERSION}-%{RELEASE} %{ARCH}") == (
        "nvidia-driver-cuda 3:535.183.01-1.el9 x86_64"
    )
    requires = [
        name for name in rpm_repo.rpm_query(built, "[%{REQUIRENAME}\n]").split() if not name.startswith("rpmlib(")
    ]
    # The registry's relations and the simulator library, nothing rpmbuild found in the files (AutoReqProv: no).
    assert sorted(requires) == sorted(vendor_facts.parse_relation(d)[0][0] for d in package["depends"])
    assert "gpuforge-lab-sim" in requires
    files = rpm_repo.rpm_query(built, "[%{FILENAMES}\n]").split()
    assert "/usr/bin/nvidia-smi" in files
    kmod = next(p for p in packages if p["name"] == "kmod-nvidia-latest-dkms")
    built = rpm_repo.build_rpm(kmod, tmp_path / "work2", tmp_path / "out")
    assert sorted(_requires(built)) == sorted(vendor_facts.parse_relation(d)[0][0] for d in kmod["depends"])
    provides = rpm_repo.rpm_query(built, "[%{PROVIDENAME} %{PROVIDEVERSION}\n]").splitlines()
    assert f"nvidia-kmod {kmod['version']}" in provides
    assert "/usr/lib/gpuforge-lab/modules/nvidia.ko" in rpm_repo.rpm_query(built, "[%{FILENAMES}\n]").split()


@pytest.mark.skipif(shutil.which("rpmbuild") is None, reason="rpmbuild comes with scripts/setup.sh (package rpm)")
def test_rhel_shapes_get_the_tool_simulators_and_the_nccl_stand_in(tmp_path: Path):
    """lab/playbooks/site_tools.yml installs nvbandwidth, nccl-tests and p2pBandwidthLatencyTest on RHEL-shaped nodes
    from the RPM tools repository. The nccl-tests stand-in's RPM requires the shape's openmpi, which carries Debian's
    Open MPI (its payload: test_shape_repos_payloads)."""
    definitions = mirror.load_definitions()
    tools = shape_repos.rpm_lab_tools(definitions)
    assert sorted(p["name"] for p in tools) == ["cuda-samples-p2pbandwidthlatencytest", "nccl-tests", "nvbandwidth"]
    built = rpm_repo.build_rpm(next(p for p in tools if p["name"] == "nvbandwidth"), tmp_path / "w", tmp_path / "o")
    assert rpm_repo.rpm_query(built, "%{NAME} %{VERSION}-%{RELEASE} %{ARCH}") == "nvbandwidth 0.6-1gpuforge1 noarch"
    assert _requires(built) == ["gpuforge-lab-sim"]
    assert rpm_repo.rpm_query(built, "[%{FILENAMES}\n]").split() == ["/usr/bin/nvbandwidth"]
    nccl = next(p for p in tools if p["name"] == "nccl-tests")
    assert nccl["depends"] == ["openmpi", "gpuforge-lab-sim"] and "payload" not in nccl
    # openmpi is a package of the RHEL shape's repositories, with Debian's Open MPI as its payload.
    assert "openmpi" in {p.name for p in vendor_facts.repository("rhel-appstream/rhel9").packages}
    assert "openmpi-bin" in definitions["rpm_payload_from_debian"]["openmpi"]["debian"]


@pytest.mark.skipif(shutil.which("rpmbuild") is None, reason="rpmbuild comes with scripts/setup.sh (package rpm)")
def test_release_package_provides_what_dnf_reads_releasever_from(tmp_path: Path):
    _, packages = _packages("rhel-baseos/rhel9")
    package = next(p for p in packages if p["name"] == "redhat-release")
    built = rpm_repo.build_rpm(package, tmp_path / "work", tmp_path / "out")
    provides = rpm_repo.rpm_query(built, "[%{PROVIDENAME} %{PROVIDEFLAGS:depflags} %{PROVIDEVERSION}\n]")
    assert "system-release(releasever) = 9" in provides.splitlines()


def test_lab_spec_node_os_is_checked(tmp_path: Path):
    path = tmp_path / "lab.yml"
    path.write_text("nodes:\n  - {name: gpu01, profile: dgx1-v100-edr, os: rhel9}\n  - {name: head01, profile: head}\n")
    nodes = spec.from_file(path).nodes
    assert [node.os for node in nodes] == ["rhel9", "debian12"]
    path.write_text("nodes:\n  - {name: gpu01, profile: dgx1-v100-edr, os: rhel7}\n")
    with pytest.raises(ValueError, match="os must be one of debian12, ubuntu2204, ubuntu2404, rhel8, rhel9"):
        spec.from_file(path)


def test_base_packages_are_registry_packages_of_the_shape_repositories():
    # And /etc/services is among them: libtirpc (showmount, rpcinfo) resolves rpcbind's "sunrpc" service there, and
    # without it every RPC client says "RPC: Unknown host" (found by the mixed-OS lab's NFS clients on rhel9).
    for name, shape in os_shapes.load().items():
        published = {
            package.name: package
            for key in (shape.get("repositories") or {}).values()
            for package in vendor_facts.repository(key).packages
        }
        assert set(shape.get("base_packages") or []) <= set(published), name
        if shape.get("base_packages"):
            carried = mirror.load_definitions()["rpm_payload_from_debian"]
            assert "/etc/services" in published["setup"].files and carried["setup"] == {"debian": ["netbase"]}
