"""spectrum_scale_client per OS: pinned package specs, build dependencies, portability-layer stamp, member."""

from __future__ import annotations

import pytest
from ansible.template import trust_as_template
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_apt_sources import repository_uri
from fabric_role_vars import render
from gpu_stack_render import RoleRender


# IBM's installer role set (gpfs.base, gpfs.docs, gpfs.msg.en*, gpfs.compression, gpfs.gskit, gpfs.gpl) plus the
# Data Access edition's license package; the message catalog is gpfs.msg.en-us as a .deb, gpfs.msg.en_US as an RPM.
@pytest.mark.parametrize(
    ("os_name", "pins"),
    [
        ("Debian", ["gpfs.base=5.1.9-3", "gpfs.gpl=5.1.9-3", "gpfs.gskit=8.0.55-19.1", "gpfs.docs=5.1.9-3",
                    "gpfs.msg.en-us=5.1.9-3", "gpfs.compression=5.1.9-3", "gpfs.license.da=5.1.9-3"]),
        ("Ubuntu", ["gpfs.base=5.1.9-3", "gpfs.gpl=5.1.9-3", "gpfs.gskit=8.0.55-19.1", "gpfs.docs=5.1.9-3",
                    "gpfs.msg.en-us=5.1.9-3", "gpfs.compression=5.1.9-3", "gpfs.license.da=5.1.9-3"]),
        ("RedHat", ["gpfs.base-5.1.9-3", "gpfs.gpl-5.1.9-3", "gpfs.gskit-8.0.55-19.1", "gpfs.docs-5.1.9-3",
                    "gpfs.msg.en_US-5.1.9-3", "gpfs.compression-5.1.9-3", "gpfs.license.da-5.1.9-3"]),
    ],
)  # fmt: skip
def test_package_pins(os_name, pins):
    assert render("spectrum_scale_client", os_name, "{{ spectrum_scale_client_package_pins }}") == pins


def test_data_management_edition_adds_its_license_and_the_advanced_packages():
    pins = render("spectrum_scale_client", "RedHat", "{{ spectrum_scale_client_package_pins }}",
                  gpuforge_spectrum_scale_edition="dm")  # fmt: skip
    assert pins[-3:] == ["gpfs.license.dm-5.1.9-3", "gpfs.adv-5.1.9-3", "gpfs.crypto-5.1.9-3"]
    assert not [pin for pin in pins if pin.startswith("gpfs.license.da")]


def test_local_deb_files_and_the_loop_of_the_local_path_install():
    assert render("spectrum_scale_client", "Debian", "{{ spectrum_scale_client_deb_files }}") == [
        "gpfs.base_5.1.9-3_amd64.deb", "gpfs.gpl_5.1.9-3_all.deb", "gpfs.gskit_8.0.55-19.1_amd64.deb",
        "gpfs.docs_5.1.9-3_all.deb", "gpfs.msg.en-us_5.1.9-3_all.deb", "gpfs.compression_5.1.9-3_amd64.deb",
        "gpfs.license.da_5.1.9-3_amd64.deb",
    ]  # fmt: skip
    # setup-Debian.yml's local_path tasks loop over name -> version under the Debian names.
    packages = render("spectrum_scale_client", "Debian", "{{ spectrum_scale_client_deb_packages }}")
    assert packages["gpfs.msg.en-us"] == "5.1.9-3" and "gpfs.msg.en_US" not in packages


@pytest.mark.parametrize(
    ("os_name", "headers"),
    [("Debian", "linux-headers-6.1.0-26-amd64"), ("RedHat", "kernel-devel-5.14.0-427.13.1.el9_4.x86_64")],
)
def test_build_deps_follow_running_kernel(os_name, headers):
    assert headers in render("spectrum_scale_client", os_name, "{{ spectrum_scale_client_build_deps }}")


def test_gpl_stamp_names_kernel_and_release():
    stamp = render("spectrum_scale_client", "Debian", "{{ spectrum_scale_client_gpl_stamp }}")
    assert stamp == "/var/lib/gpuforge/gpfs-gpl-6.1.0-26-amd64-5.1.9-3"


def test_member_is_first_cluster_host():
    assert render("spectrum_scale_client", "Debian", "{{ spectrum_scale_client_member }}") == "storage01"


# --- The install tasks (vendor_repository for the repository, pinned sha256 for local .debs) ----------------


def _role(os_name: str, **extra) -> RoleRender:
    """The role through RoleRender, with the vars tasks/main.yml hands to the install tasks."""
    main = RoleRender("spectrum_scale_client", os_name).find_task("main.yml", "Install the Storage Scale packages")
    assert set(main["vars"]) == {
        "spectrum_scale_client_key_fingerprint_effective",
        "spectrum_scale_client_deb_sha256_effective",
    }
    return RoleRender("spectrum_scale_client", os_name, **{**main["vars"], **extra})


@pytest.mark.parametrize("os_name", ["debian12", "ubuntu2204", "ubuntu2404"])
def test_apt_repository_path_installs_the_pins_from_gpuforge_gpfs(os_name):
    role = _role(
        os_name,
        gpuforge_spectrum_scale_repo_url="https://repo.example.com/gpfs/5.1.9.3/ubuntu/",
        gpuforge_spectrum_scale_key_url="https://repo.example.com/gpfs/site-repo-key.asc",
        gpuforge_spectrum_scale_key_fingerprint="27BC357DA1007FC4A52AAC7428AEB8EB2BEDA4EF",
    )
    name, included = role.included_role("setup-Debian.yml", "Trust the site's Storage Scale repository")
    assert name == "vendor_repository"
    # Same names as before vendor_repository: /etc/apt/sources.list.d/gpuforge-gpfs.sources, keyrings/gpuforge-gpfs.asc.
    assert included["vendor_repository_name"] == "gpuforge-gpfs"
    assert included["vendor_repository_key_fingerprint"] == "27BC357DA1007FC4A52AAC7428AEB8EB2BEDA4EF"
    source = RoleRender("vendor_repository", os_name, **included).task_args("setup-Debian.yml", "Add the repository")
    assert (source["name"], repository_uri(source["url"]), source["suites"]) == (
        "gpuforge-gpfs",
        "https://repo.example.com/gpfs/5.1.9.3/ubuntu/",
        ["/"],
    )
    assert source["key_fingerprint"] == "27BC357DA1007FC4A52AAC7428AEB8EB2BEDA4EF"
    pins = role.task_args("setup-Debian.yml", "Install the pinned packages")["name"]
    assert pins == role.var("spectrum_scale_client_package_pins") and "gpfs.base=5.1.9-3" in pins


def test_apt_local_path_checks_and_installs_the_deb_files_ibm_ships():
    role = _role("debian12", spectrum_scale_client_local_path="/srv/gpfs_debs")
    task = role.find_task("deb_files.yml", "Install the verified package files")
    items = role.task_templar(task).template(trust_as_template(task["loop"]))
    debs = [
        role.task_args("deb_files.yml", "Install the verified package files", spectrum_scale_client_deb=item)["deb"]
        for item in items
    ]
    assert debs == ["/srv/gpfs_debs/" + name for name in role.var("spectrum_scale_client_deb_files")]
    assert "/srv/gpfs_debs/gpfs.base_5.1.9-3_amd64.deb" in debs and "/srv/gpfs_debs/gpfs.gpl_5.1.9-3_all.deb" in debs
    stat = role.task_args("deb_files.yml", "Read the sha256 of each package file", spectrum_scale_client_deb=items[0])
    assert (stat["path"], stat["checksum_algorithm"], stat["get_checksum"]) == (debs[0], "sha256", True)
    # setup-Debian.yml includes the package-file tasks only for a local path (a repository install skips them).
    include = role.task_args("setup-Debian.yml", "Install the package files from a local directory")
    assert include["file"] == "deb_files.yml"
    assert role.conditions("setup-Debian.yml", "Install the package files from a local directory") == [True]
    assert _role("debian12").conditions("setup-Debian.yml", "Install the package files from a local directory") == [
        False
    ]


@pytest.mark.parametrize("os_name", ["rhel8", "rhel9"])
def test_dnf_path_keeps_gpgcheck_on_with_ibms_key(os_name):
    role = _role(
        os_name,
        spectrum_scale_client_local_path="/usr/lpp/mmfs/5.1.9.3/gpfs_rpms",
        gpuforge_spectrum_scale_key_url="file:///usr/lpp/mmfs/5.1.9.3/Public_Keys/SpectrumScale_public_key.pgp",
        gpuforge_spectrum_scale_key_sha256="ab" * 32,
    )
    name, included = role.included_role("setup-RedHat.yml", "Trust the Storage Scale repository")
    assert name == "vendor_repository"
    repo = RoleRender("vendor_repository", os_name, **included).task_args("setup-RedHat.yml", "Add the repository")
    assert (repo["name"], repo["baseurl"]) == ("gpuforge-gpfs", "file:///usr/lpp/mmfs/5.1.9.3/gpfs_rpms")
    assert (repo["gpgcheck"], repo["repo_gpgcheck"]) == (True, False)
    assert repo["gpgkey"] == "file:///etc/pki/rpm-gpg/RPM-GPG-KEY-gpuforge-gpfs"
    packages = role.task_args("setup-RedHat.yml", "Install the pinned packages")["name"]
    assert "gpfs.base-5.1.9-3" in packages and "kernel-devel-" + role.var("ansible_facts.kernel") in packages
