"""gpu_selinux on a lab node: modules compiled from the project's sources and present in Debian's policy store."""


def test_policy_toolchain_installed(host):
    for name in ("selinux-policy-default", "selinux-policy-dev", "policycoreutils", "semodule-utils", "checkpolicy"):
        assert host.package(name).is_installed, name


def test_semodule_lists_both_modules(host):
    modules = [line.split()[0] for line in host.check_output("semodule -l").splitlines() if line.strip()]
    assert "nvidia_container" in modules
    assert "infiniband" in modules
    assert len(modules) > 300  # Debian's default policy is still all there


def test_module_sources_and_install_checksums(host):
    source = host.file("/var/lib/gpuforge/selinux/nvidia_container.te")
    assert source.contains("^policy_module(nvidia_container, 1.0)$")
    assert source.contains("^dev_rw_xserver_misc(nvidia_container_t)$")
    assert ":capability" not in source.content_string  # no capability is granted
    infiniband = host.file("/var/lib/gpuforge/selinux/infiniband.te")
    assert infiniband.contains("^policy_module(infiniband, 1.0)$")
    assert infiniband.contains("dev_rw_infiniband(container_t)")
    for name in ("nvidia_container", "infiniband"):
        package = host.file(f"/var/lib/gpuforge/selinux/{name}.pp")
        recorded = host.file(f"/var/lib/gpuforge/selinux/{name}.pp.installed-sha256").content_string.strip()
        assert recorded == package.sha256sum


def test_selinux_mode_left_alone(host):
    # The role never writes the SELinux mode; Debian's package default stays as installed.
    config = host.file("/etc/selinux/config").content_string
    assert "SELINUX=disabled" not in config
