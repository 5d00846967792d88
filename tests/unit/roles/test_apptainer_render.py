"""apptainer per OS, rendered with the role's own defaults: the release file names and URLs, the checksum each
download is verified against (and the refusal without one), the bind paths taken from the host's inventory, the
apptainer.conf directives, and the GPU check's command."""

from __future__ import annotations

import pytest
import yaml
from gpu_stack_render import ROOT, RoleRender

NFS = [
    {"path": "/shared/home", "server": "10.10.11.1", "export": "/srv/nfs/home"},
    {"path": "/shared/apps", "server": "10.10.11.1", "export": "/srv/nfs/apps"},
    {"path": "/old", "server": "10.10.11.1", "export": "/srv/old", "state": "absent"},
]
GPFS = [{"device": "ess3000_4M", "remote": "ess3000_4M", "mount_point": "/gpfs/ess3000_4M", "automount": "yes"}]
INVENTORY = {"nfs_client_mounts": NFS, "spectrum_scale_client_remote_filesystems": GPFS}


def render(os_name="debian12", groups=("gpu_nodes",), **extra):
    return RoleRender("apptainer", os_name, group_names=list(groups), **extra)


@pytest.mark.parametrize(
    ("os_name", "files"),
    [
        ("debian12", ["apptainer_1.5.3_amd64.deb"]),
        ("ubuntu2204", ["apptainer_1.5.3_amd64.deb"]),
        ("rhel8", ["apptainer-1.5.3-1.x86_64.rpm"]),
        ("rhel9", ["apptainer-1.5.3-1.x86_64.rpm"]),
    ],
)
def test_release_files_and_url(os_name, files):
    role = render(os_name)
    assert role.var("apptainer_files") == files
    assert role.var("apptainer_file_url") == "https://github.com/apptainer/apptainer/releases/download/v1.5.3"
    assert role.var("apptainer_supported_versions") == (
        ["9"] if os_name.startswith("rhel") else ["12"] if os_name == "debian12" else ["22"]
    )


def test_suid_adds_its_file_after_apptainer():
    assert render(apptainer_suid=True).var("apptainer_files") == [
        "apptainer_1.5.3_amd64.deb",
        "apptainer-suid_1.5.3_amd64.deb",
    ]


def test_download_is_checked_against_the_pinned_sha256():
    args = render().task_args("download.yml", "Download and verify", item="apptainer_1.5.3_amd64.deb")
    assert args["url"] == "https://github.com/apptainer/apptainer/releases/download/v1.5.3/apptainer_1.5.3_amd64.deb"
    assert args["checksum"] == "sha256:82b0bdddf459087d202383360b8318d526ad6826c748a2f669913cc6aef9ee40"
    assert args["dest"] == "/var/cache/gpuforge/apptainer/apptainer_1.5.3_amd64.deb"


def test_mirror_checksum_file_is_used_only_for_unpinned_files():
    url = "http://mirror/apptainer/releases/download/v1.5.3/SHA256SUMS"
    role = render(
        apptainer_sha256={}, apptainer_checksum_url=url, apptainer_base_url="http://mirror/apptainer/releases/download/"
    )
    args = role.task_args("download.yml", "Download and verify", item="apptainer_1.5.3_amd64.deb")
    assert args["checksum"] == f"sha256:{url}"
    assert args["url"] == "http://mirror/apptainer/releases/download/v1.5.3/apptainer_1.5.3_amd64.deb"


REFUSE = "Refuse unsupported systems and settings, and a download without a checksum"


@pytest.mark.parametrize(
    ("os_name", "extra", "allowed"),
    [
        ("debian12", {}, True),
        # No RPM checksum is published (vendor_facts/apptainer/rpm.yml): refused until the site pins one.
        ("rhel9", {}, False),
        ("rhel9", {"apptainer_sha256": {"apptainer-1.5.3-1.x86_64.rpm": "0" * 64}}, True),
        ("rhel9", {"apptainer_checksum_url": "https://mirror.example/SHA256SUMS"}, True),
        ("debian12", {"apptainer_version": "1.5.4"}, False),
    ],
)
def test_a_download_without_a_checksum_is_refused(os_name, extra, allowed):
    role = render(os_name, **extra)
    assert role.refused("main.yml", REFUSE) is not allowed
    if not allowed:
        message = role.message("main.yml", REFUSE)
        assert "no sha256 pinned for apptainer" in message
        assert "the apptainer role supports" not in message  # only the problem found


def test_bind_paths_come_from_the_hosts_own_shared_file_systems():
    role = render(
        groups=("gpu_nodes", "nfs_clients", "spectrum_scale_clients"),
        **INVENTORY,
        apptainer_bind_paths=["/var/tmp:/scratch", "/etc/hosts"],
    )
    assert role.var("apptainer_managed_bind_paths") == [
        "/shared/home",
        "/shared/apps",
        "/gpfs/ess3000_4M",
        "/var/tmp:/scratch",
    ]
    block = role.task_args("configure.yml", "Bind the shared file systems")
    assert block["block"].splitlines() == [
        "bind path = /shared/home",
        "bind path = /shared/apps",
        "bind path = /gpfs/ess3000_4M",
        "bind path = /var/tmp:/scratch",
    ]
    assert block["state"] == "present" and block["insertafter"] == "^bind path = "
    # verify.yml looks for the host side of each bind path, in one stat(1)
    assert role.var("apptainer_bind_sources") == ["/shared/home", "/shared/apps", "/gpfs/ess3000_4M", "/var/tmp"]
    version, stat = role.task_args("verify.yml", "Read the installed release")["commands"]
    assert version == {"name": "version", "argv": ["apptainer", "--version"]}
    assert stat == {
        "name": "bind_sources",
        "argv": ["stat", "--format=%n", "--", "/shared/home", "/shared/apps", "/gpfs/ess3000_4M", "/var/tmp"],
        "ok_rcs": [0, 1],
    }


def test_no_binds_from_file_systems_the_host_does_not_mount():
    # nfs_client_mounts is in group_vars/all in the lab: only nfs_clients hosts mount it.
    role = render(groups=("gpu_nodes",), **INVENTORY)
    assert role.var("apptainer_managed_bind_paths") == []
    assert role.task_args("configure.yml", "Bind the shared file systems")["state"] == "absent"
    # Nothing to stat: the verify reads only the release.
    assert role.task_args("verify.yml", "Read the installed release")["commands"] == [
        {"name": "version", "argv": ["apptainer", "--version"]}
    ]
    assert (
        render(groups=("nfs_clients",), **INVENTORY, apptainer_bind_shared_filesystems=False).var(
            "apptainer_managed_bind_paths"
        )
        == []
    )


@pytest.mark.parametrize(
    ("extra", "directives"),
    [
        ({}, {"use nvidia-container-cli": "no", "always use nv": "no"}),
        (
            {"apptainer_nvccli": True, "apptainer_always_use_nv": True, "apptainer_config": {"mount hostfs": "no"}},
            {"mount hostfs": "no", "use nvidia-container-cli": "yes", "always use nv": "yes"},
        ),
    ],
)
def test_gpu_directives(extra, directives):
    role = render(**extra)
    assert role.var("apptainer_directives") == directives
    args = role.task_args(
        "configure.yml", "Set the GPU and other directives", item={"key": "use nvidia-container-cli", "value": "yes"}
    )
    assert args["regexp"] == r"^#?\s*use\ nvidia\-container\-cli\s*="
    assert args["line"] == "use nvidia-container-cli = yes"


@pytest.mark.parametrize(
    ("extra", "allowed"),
    [
        ({}, True),
        # Paths with an "s" in them: the check looks for commas and whitespace only.
        ({"apptainer_bind_paths": ["/shared/home", "/var/tmp:/scratch:ro"]}, True),
        ({"apptainer_nvccli": True, "apptainer_suid": True}, False),
        ({"apptainer_bind_paths": ["relative/path"]}, False),
        ({"apptainer_bind_paths": ["/a,/b"]}, False),
        ({"apptainer_bind_paths": ["/a b"]}, False),
        ({"apptainer_config": {"bind path": "/opt"}}, False),
    ],
)
def test_unsupported_settings_are_refused(extra, allowed):
    role = render(**extra)
    assert role.refused("main.yml", REFUSE) is not allowed
    if not allowed:
        message = role.message("main.yml", REFUSE)
        assert "the apptainer role supports" in message
        assert "no sha256 pinned" not in message


def test_both_refusals_in_one_message():
    role = render(apptainer_nvccli=True, apptainer_suid=True, apptainer_version="1.5.4")
    assert role.refused("main.yml", REFUSE)
    message = " ".join(role.message("main.yml", REFUSE).split())
    assert message.index("the apptainer role supports") < message.index("no sha256 pinned for apptainer")


def test_gpu_check_command():
    role = render(apptainer_verify_image="/images/cuda.sif")
    assert all(role.conditions("verify.yml", "Run a GPU command in a container and check"))
    args = role.task_args("verify_container.yml", "Run a GPU command in a container")
    assert args["argv"] == ["apptainer", "exec", "--nv", "/images/cuda.sif", "nvidia-smi", "-L"]
    # Without a test image the run and its check are skipped in one decision.
    assert not all(render().conditions("verify.yml", "Run a GPU command in a container and check"))


def test_argument_specs_cover_every_default():
    defaults = yaml.safe_load((ROOT / "roles/apptainer/defaults/main.yml").read_text(encoding="utf-8"))
    specs = yaml.safe_load((ROOT / "roles/apptainer/meta/argument_specs.yml").read_text(encoding="utf-8"))
    assert set(specs["argument_specs"]["main"]["options"]) == set(defaults)


def test_lab_inventory_verifies_against_the_mirror_checksum_file():
    lab = yaml.safe_load((ROOT / "inventories/lab/group_vars/all/apptainer.yml").read_text(encoding="utf-8"))
    assert lab["apptainer_sha256"] == {}
    assert lab["apptainer_checksum_url"].endswith("/v{{ apptainer_version }}/SHA256SUMS")


@pytest.mark.parametrize(
    ("os_name", "installed"),
    [("ubuntu2404", False), ("ubuntu2204", True), ("debian12", True), ("rhel8", True), ("rhel9", True)],
)
def test_site_leaves_apptainer_out_on_ubuntu_2404_with_a_message(os_name, installed):
    # Second vendor review, F8: the release .deb has no AppArmor userns profile, which 24.04 needs; the role refuses
    # that host, so site.yml (playbooks/apptainer.yml) must not apply it there but say why.
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template
    from gpu_stack_render import OS_FACTS
    from role_yaml import trusted

    from gpuforge import vendor_facts

    fact = vendor_facts.repository("apptainer/deb").fact("apparmor_userns_profile")
    assert fact["installs_userns_profile"] is False and fact["needed_on"] == ["ubuntu2404"]
    (play,) = [p for p in yaml.safe_load((ROOT / "playbooks" / "apptainer.yml").read_text()) if "roles" in p]
    variables = {"ansible_facts": OS_FACTS[os_name], "inventory_hostname": "gpu01", "apptainer_enabled": True}
    templar = Templar(loader=DataLoader(), variables={**variables, **trusted(play["vars"])})
    (role,) = play["roles"]
    (say,) = play["pre_tasks"]
    assert templar.evaluate_conditional(trust_as_template(role["when"])) is installed
    assert templar.evaluate_conditional(trust_as_template(say["when"])) is not installed
    if not installed:
        message = " ".join(templar.template(trusted(say["ansible.builtin.debug"]["msg"])).split())
        assert message.startswith("gpu01: Apptainer is not installed on Ubuntu 24.04")
        assert RoleRender("apptainer", os_name, group_names=["gpu_nodes"]).refused("main.yml", REFUSE)
    disabled = Templar(
        loader=DataLoader(), variables={**variables, "apptainer_enabled": False, **trusted(play["vars"])}
    )
    assert not disabled.evaluate_conditional(trust_as_template(role["when"]))
    assert not disabled.evaluate_conditional(trust_as_template(say["when"]))


def test_a_failed_download_names_the_host_the_file_the_reason_and_the_fix():
    # get_url's loop result alone says "One or more items failed" (the mixed-OS lab's RHEL nodes, 2026-12-04).
    download = {
        "results": [
            {
                "item": "apptainer-1.5.3-1.x86_64.rpm",
                "failed": True,
                "msg": "Request failed: HTTP Error 404: Not Found",
            },
            {"item": "apptainer-suid-1.5.3-1.x86_64.rpm", "failed": False},
        ]
    }
    role = render("rhel9", inventory_hostname="gpu01", apptainer_download=download)
    message = " ".join(role.message("download.yml", "Name the release file").split())
    assert message.startswith("gpu01: Apptainer 1.5.3: apptainer-1.5.3-1.x86_64.rpm from ")
    assert "/v1.5.3/ failed: Request failed: HTTP Error 404: Not Found. Fix:" in message
    assert "apptainer-suid" not in message


def test_rhel_installs_the_files_requirements_with_signatures_checked_then_the_files_alone():
    # rpm -qp --requires of the release RPMs (lines as rpm prints them; apptainer.spec.in's Requires).
    requires = [
        "squashfuse",
        "fakeroot",
        "fuse-overlayfs",
        "apptainer = 1.5.3-1",
        "rpmlib(CompressedFileNames) <= 3.0.4-1",
        "/bin/sh",
        "squashfuse",
    ]
    role = render("rhel9", apptainer_suid=True, apptainer_rpm_requires={"stdout_lines": requires})
    assert role.var("apptainer_rpm_requirements") == ["squashfuse", "fakeroot", "fuse-overlayfs", "/bin/sh"]
    requirements = role.task_args("setup-RedHat.yml", "Install their requirements")
    assert "disable_gpg_check" not in requirements
    files = role.task_args("setup-RedHat.yml", "Install the verified packages")
    assert files["disable_gpg_check"] is True
    assert files["name"] == [
        "/var/cache/gpuforge/apptainer/apptainer-1.5.3-1.x86_64.rpm",
        "/var/cache/gpuforge/apptainer/apptainer-suid-1.5.3-1.x86_64.rpm",
    ]
