"""gpu_selinux on a Debian 12 and a RHEL 9 lab node: modules compiled from the project's sources against the OS's
own devel headers and present in its policy store (Debian's default, RHEL's targeted).

On the RHEL 9 shape the headers are RHEL's interfaces (vendor_facts/selinux-policy/rhel9.yml, the lab's
selinux-policy-devel): the infiniband module's m4 choice must take RHEL's dev_rw_infiniband_dev() where Debian's
refpolicy takes dev_rw_infiniband(); both take corenet_ib_access_unlabeled_pkeys()."""

BUILD_DIR = "/var/lib/gpuforge/selinux"


def _is_rhel(host) -> bool:
    return host.system_info.distribution == "rhel"


def test_policy_toolchain_installed(host):
    if _is_rhel(host):
        names = ("selinux-policy-devel", "policycoreutils-python-utils")
        # What selinux-policy-devel pulls in (vendor_facts/rhel-appstream/rhel9.yml), by the rpmdb.
        names += ("m4", "make", "checkpolicy", "policycoreutils-devel", "selinux-policy-targeted")
    else:
        names = ("selinux-policy-default", "selinux-policy-dev", "policycoreutils", "semodule-utils", "checkpolicy")
    for name in names:
        assert host.package(name).is_installed, name


def test_rhel_installs_come_from_the_rhel_repositories(host):
    if not _is_rhel(host):
        return
    # dnf's own record of where each package came from: AppStream for the devel headers, BaseOS for the tools.
    origin = host.check_output("dnf -q repoquery --installed --qf '%{name} %{from_repo}' selinux-policy-devel "
                               "policycoreutils-python-utils")  # fmt: skip
    assert "selinux-policy-devel rhel-9-for-x86_64-appstream-rpms" in origin.splitlines()
    assert "policycoreutils-python-utils rhel-9-for-x86_64-baseos-rpms" in origin.splitlines()
    assert not host.exists("apt-get") or host.run("dpkg-query -W selinux-policy-dev").rc != 0


def test_semodule_lists_both_modules(host):
    modules = [line.split()[0] for line in host.check_output("semodule -l").splitlines() if line.strip()]
    assert "nvidia_container" in modules
    assert "infiniband" in modules
    assert len(modules) > 300  # the OS's policy is still all there


def test_the_store_is_the_os_policy_type(host):
    config = host.file("/etc/selinux/config").content_string
    store = "targeted" if _is_rhel(host) else "default"
    assert f"SELINUXTYPE={store}" in config
    assert host.file(f"/var/lib/selinux/{store}/active/modules/400/infiniband").is_directory


def test_module_sources_and_install_checksums(host):
    source = host.file(f"{BUILD_DIR}/nvidia_container.te")
    assert source.contains("^policy_module(nvidia_container, 1.0)$")
    assert source.contains("^dev_rw_xserver_misc(nvidia_container_t)$")
    assert ":capability" not in source.content_string  # no capability is granted
    infiniband = host.file(f"{BUILD_DIR}/infiniband.te")
    assert infiniband.contains("^policy_module(infiniband, 1.0)$")
    assert infiniband.contains("dev_rw_infiniband(container_t)")
    for name in ("nvidia_container", "infiniband"):
        package = host.file(f"{BUILD_DIR}/{name}.pp")
        recorded = host.file(f"{BUILD_DIR}/{name}.pp.installed-sha256").content_string.strip()
        assert recorded == package.sha256sum


def test_infiniband_rules_come_from_the_os_interfaces(host):
    # m4's expansion of the module (what checkmodule read), left by the devel Makefile in tmp/.
    expanded = host.file(f"{BUILD_DIR}/tmp/infiniband.tmp").content_string
    assert "allow container_t infiniband_device_t:chr_file { getattr open read write" in expanded
    # corenet_ib_access_unlabeled_pkeys(), which both policies define
    assert "allow container_t unlabeled_t:infiniband_pkey access;" in expanded
    # RHEL's dev_rw_infiniband_dev() also covers block devices and map; refpolicy's dev_rw_infiniband() does not
    assert ("allow container_t infiniband_device_t:blk_file" in expanded) == _is_rhel(host)
    assert ("allow container_t infiniband_device_t:chr_file map;" in expanded) == _is_rhel(host)


def test_selinux_mode_left_alone(host):
    # The role never writes the SELinux mode; the OS's own default stays as installed (RHEL: enforcing).
    config = host.file("/etc/selinux/config").content_string
    assert "SELINUX=disabled" not in config
    if _is_rhel(host):
        assert "SELINUX=enforcing" in config
