"""The lab mirror's packages are generated from the vendor facts registry: every package is buildable,
carries the vendor's name, version and relations, and the newer competing builds are published too."""

from __future__ import annotations

import subprocess

import pytest

from gpuforge import vendor_facts
from gpuforge.lab import mirror


@pytest.fixture(scope="module")
def packages():
    return mirror.expand(mirror.load_definitions())


def test_every_simulated_command_has_its_simulator(packages):
    missing = {package["name"]: mirror.missing_simulators(package) for package in packages}
    assert {name: modules for name, modules in missing.items() if modules} == {}


def test_every_registry_package_of_a_published_repository_is_built_at_every_version(packages):
    built = {(p["repo"], p["name"], p["version"]) for p in packages}
    for key in mirror.load_definitions()["publish"]:
        for package in vendor_facts.repository(key).packages:
            assert (key, package.name, package.version) in built


def test_built_packages_carry_the_registry_relations_not_role_names(packages):
    cuda = vendor_facts.repository("nvidia-cuda/debian12")
    by_key = {(p["name"], p["version"]): p for p in packages if p["repo"] == "nvidia-cuda/debian12"}
    drivers = by_key[("cuda-drivers-550", "550.90.07-1")]
    assert drivers["depends"] == list(cuda.package("cuda-drivers-550", "550.90.07-1").depends)
    assert "nvidia-driver (>= 550.90.07)" in drivers["depends"]
    # The branch-suffixed names the roles once invented do not exist at NVIDIA, so not in the lab either.
    assert not [name for name, _ in by_key if name in ("nvidia-kernel-dkms-535", "nvidia-smi-535", "nvidia-driver-535")]


def test_newer_competing_builds_are_published(packages):
    smi = sorted((p["version"] for p in packages if p["name"] == "nvidia-smi"), key=vendor_facts.VersionKey)
    assert len(smi) > 1 and smi[0] == "550.90.07-1"


def test_simulator_data_comes_from_registry_facts(packages):
    smi = next(p for p in packages if p["name"] == "nvidia-smi" and p["version"] == "570.195.03-1")
    assert smi["files"]["/usr/lib/gpuforge-lab/nvidia-driver.json"] == (
        '{"driver_version": "570.195.03", "cuda_version": "12.8"}'
    )
    ofed = next(p for p in packages if p["name"] == "ofed-scripts")
    assert (
        vendor_facts.repository("nvidia-doca/debian12").fact("ofed_info_s")
        in (ofed["files"]["/usr/lib/gpuforge-lab/ofed_info.json"])
    )


def test_every_package_names_a_known_repository(packages):
    repos = mirror.repository_paths(mirror.load_definitions())
    assert [package["name"] for package in packages if package["repo"] not in repos] == []
    assert repos["nvidia-doca/debian12"] == "doca/2.9.1/debian12.5/x86_64"


def test_built_deb_has_control_wrapper_and_module_marker(tmp_path, packages):
    package = next(p for p in packages if p["name"] == "nvidia-kernel-dkms" and p["version"] == "550.90.07-1")
    deb = mirror.build_deb(package, tmp_path / "stage", tmp_path)
    info = subprocess.run(["dpkg-deb", "--field", str(deb), "Package", "Version", "Provides"], capture_output=True)
    assert info.stdout.decode().splitlines() == [
        "Package: nvidia-kernel-dkms",
        "Version: 550.90.07-1",
        "Provides: nvidia-kernel-550.90.07",
    ]
    listing = subprocess.run(["dpkg-deb", "--contents", str(deb)], capture_output=True).stdout.decode()
    assert "./usr/lib/gpuforge-lab/modules/nvidia_peermem.ko" in listing


def test_wrapper_exports_program_name():
    text = mirror._wrapper("/usr/lpp/mmfs/bin/mmlsconfig", "gpuforge_sim.gpfs")
    assert "GPUFORGE_SIM_PROG=mmlsconfig\nexport GPUFORGE_SIM_PROG\n" in text
    assert "from gpuforge_sim.gpfs import main" in text
    assert "BEGIN INIT INFO" not in text


def test_an_init_script_wrapper_has_the_lsb_header_update_rc_d_reads():
    # systemctl enable openibd.service runs update-rc.d for /etc/init.d/openibd, which refuses a script whose
    # header names no Default-Start runlevels (as the DOCA/MLNX_OFED script's header does).
    text = mirror._wrapper("/etc/init.d/openibd", "gpuforge_sim.openibd")
    header = text.split("### BEGIN INIT INFO\n", 1)[1].split("### END INIT INFO\n", 1)[0]
    fields = dict(line[2:].split(":", 1) for line in header.splitlines())
    assert fields["Provides"].strip() == "openibd"
    assert fields["Default-Start"].split() == ["2", "3", "4", "5"]
    assert fields["Default-Stop"].split() == ["0", "1", "6"]
    assert text.index("END INIT INFO") < text.index("exec /usr/bin/python3")


def test_the_in_box_stack_is_built_for_the_debian_archive_from_the_registry(tmp_path):
    # packages.yml publish_in_debian_archive: Debian's in-box InfiniBand stack at the registry's versions, with
    # Debian's own OpenSM units (opensm.service starting opensm@<GUID>), not the RHEL unit of the same name.
    definitions = mirror.load_definitions()
    built = {package["name"]: package for package in mirror.archive_packages(definitions)}
    debian = vendor_facts.repository("debian/bookworm")
    assert sorted(built) == sorted(definitions["publish_in_debian_archive"]["debian/bookworm"])
    for name, package in built.items():
        assert [package["version"]] == debian.versions(name), name
    opensm = built["opensm"]
    assert "libopensm9 (= 3.3.23-2+b1)" in opensm["depends"]
    assert opensm["commands"] == {"/usr/sbin/opensm": "gpuforge_sim.opensm"}
    assert sorted(opensm["units"]) == ["opensm.service", "opensm@.service"]
    assert "EnvironmentFile=/etc/default/opensm" in opensm["units"]["opensm.service"]
    assert opensm["units"]["opensm.service"] != definitions["units"]["opensm.service"]
    assert "--guid %I" in opensm["units"]["opensm@.service"]
    assert opensm["files"]["/etc/default/opensm"].splitlines()[-1] == "PORTS=ALL"
    assert set(built["infiniband-diags"]["commands"]) >= {"/usr/sbin/ibstat", "/usr/sbin/sminfo", "/usr/sbin/perfquery"}
    deb = mirror.build_deb(opensm, tmp_path / "staging", tmp_path)
    assert deb.name == "opensm_3.3.23-2+b1_amd64.deb"
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout
    for path in ("./lib/systemd/system/opensm@.service", "./etc/default/opensm", "./usr/lib/gpuforge-lab/opensm-ports"):
        assert path in listing, path


def test_the_opensm_ports_script_starts_one_instance_per_port(tmp_path):
    # What the lab's Debian opensm.service runs: PORTS=ALL takes every GUID `ibstat -p` prints, a list as it is.
    script = mirror.load_definitions()["data_files"]["/etc/default/opensm"]["/usr/lib/gpuforge-lab/opensm-ports"]
    (tmp_path / "usr/sbin").mkdir(parents=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text('#!/bin/sh\necho "systemctl $*"\n', encoding="utf-8")
    (bin_dir / "systemctl").chmod(0o755)
    fake_ibstat = tmp_path / "usr/sbin/ibstat"
    fake_ibstat.write_text("#!/bin/sh\nprintf '0x1\\n0x2\\n'\n", encoding="utf-8")
    fake_ibstat.chmod(0o755)
    script = script.replace("/usr/sbin/ibstat", str(fake_ibstat))

    def run(ports):
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "PORTS": ports}
        return subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, check=True).stdout

    assert run("ALL").splitlines()[-1] == "systemctl start opensm@0x1.service opensm@0x2.service"
    assert run("0x248a07030029e1fa").splitlines()[-1] == "systemctl start opensm@0x248a07030029e1fa.service"
    assert "systemctl" not in run("")


def test_an_in_box_package_without_its_simulator_is_refused_not_served_as_debian_builds_it(tmp_path, monkeypatch):
    # With every simulator present the in-box stack builds (above); without them the mirror refuses, naming the
    # package and the module, instead of leaving Debian's real build of the name in the archive.
    monkeypatch.setattr(mirror, "SIM_DIR", tmp_path)
    with pytest.raises(
        mirror.MirrorError, match=r"publish_in_debian_archive: no simulator .*opensm needs gpuforge_sim\.opensm"
    ):
        mirror.archive_packages(mirror.load_definitions())
