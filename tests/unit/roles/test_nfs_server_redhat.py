"""nfs_server's RedHat path with nfs-ganesha: the CentOS Storage SIG's repository (the registry's URL and key), and the
packages dnf installs, showmount's nfs-utils among them (the export check runs it)."""

from __future__ import annotations

from gpu_stack_render import RoleRender

from gpuforge import vendor_facts

SIG = "centos-storage-sig/nfsganesha5-el9"
ADD_REPO = "Add the CentOS Storage SIG's nfs-ganesha repository"


def test_rhel_ganesha_adds_the_storage_sig_repository_the_registry_records():
    role = RoleRender("nfs_server", "rhel9", nfs_server_implementation="ganesha")
    name, variables = role.included_role("setup-RedHat.yml", ADD_REPO)
    repo = vendor_facts.repository(SIG)
    assert name == "vendor_repository"
    assert variables["vendor_repository_url"] == repo.url
    assert variables["vendor_repository_key_url"] == repo.signing_key["url"]
    assert variables["vendor_repository_key_fingerprint"] == repo.signing_key["fingerprint"]
    assert role.conditions("setup-RedHat.yml", ADD_REPO) == [True]


def test_no_repository_for_the_kernel_server_or_with_an_empty_url():
    assert RoleRender("nfs_server", "rhel9").conditions("setup-RedHat.yml", ADD_REPO) == [False]
    role = RoleRender("nfs_server", "rhel9", nfs_server_implementation="ganesha", nfs_server_ganesha_rhel_repo_url="")
    assert role.conditions("setup-RedHat.yml", ADD_REPO) == [False]


def test_rhel_ganesha_packages_are_in_the_sig_and_baseos_and_carry_showmount():
    role = RoleRender("nfs_server", "rhel9", nfs_server_implementation="ganesha")
    packages = role.task_args("setup-RedHat.yml", "Install the NFS server packages")["name"]
    assert packages == ["nfs-ganesha", "nfs-ganesha-vfs", "nfs-utils"]
    published = {
        package.name: package for key in (SIG, "rhel-baseos/rhel9") for package in vendor_facts.repository(key).packages
    }
    assert set(packages) <= set(published)
    # The export check (tasks/verify.yml) runs showmount: a package the role installs must ship it.
    showmount = role.var("nfs_server_showmount")
    assert any(showmount in (published[name].files or ()) for name in packages)
