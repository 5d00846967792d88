"""container_runtime_limits on a lab node with Debian's containerd: drop-ins and the effective limit."""


def test_containerd_unit_has_unlimited_memlock(host):
    # systemd read the drop-in (daemon-reload ran): the unit's limit is infinity. The lab cannot restart
    # containerd with it (see converge.yml), so the running daemon keeps it for its next start.
    assert host.check_output("systemctl show -p LimitMEMLOCK containerd.service") == "LimitMEMLOCK=infinity"
    assert host.check_output("systemctl show -p DropInPaths --value containerd.service") == (
        "/etc/systemd/system/containerd.service.d/50-gpuforge-memlock.conf"
    )
    assert host.service("containerd").is_running


def test_dropins_for_every_runtime(host):
    for unit in ("crio.service", "containerd.service", "docker.service"):
        dropin = host.file(f"/etc/systemd/system/{unit}.d/50-gpuforge-memlock.conf")
        assert dropin.contains(r"^\[Service\]$"), unit
        assert dropin.contains(r"^LimitMEMLOCK=infinity$"), unit
