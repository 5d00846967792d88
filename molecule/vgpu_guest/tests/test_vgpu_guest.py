"""vgpu_guest on Debian 12, RHEL 9, Ubuntu 22.04 and 24.04 (molecule/vgpu_guest): the lab's stand-in guest driver
package installed at the pinned release by the OS's own package manager, gridd.conf's FeatureType, the client
configuration token with NVIDIA's mode, nvidia-gridd enabled and running, and nvidia-smi reporting the GPU Licensed;
then, with the token taken away and nvidia-gridd restarted, the registry's vgpu_license check (the one validate.yml
runs) fails naming the GPU, and passes again once the token is back."""

import shlex
import time

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_registry as registry
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_nvidia_smi import parse_query_xml
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_vgpu_license import parse_license_text

from gpuforge.paths import PROJECT_ROOT

PACKAGE = "nvidia-linux-grid-535"
RELEASE = "535.161.08"
TOKEN_DIR = "/etc/nvidia/ClientConfigToken"
TOKEN = f"{TOKEN_DIR}/client_configuration_token.tok"
LAB_TOKEN = PROJECT_ROOT / "molecule" / "vgpu_guest" / "files" / "lab-client-configuration-token.tok"
# The one GPU of lab/profiles/vsphere-t4-vgpu-roce.yml (GRID T4-16C).
BUS_ID = "00000000:02:02.0"
# Where the lab's simulated nvidia-gridd writes its lease (gpuforge_sim.nvidia_gridd), read by its nvidia-smi.
STATE = "/run/gpuforge-lab/vgpu-license.json"
JUDGE = next(check.judge for check in registry.CHECKS if check.names == ("vgpu_license",))


def _rpm_shaped(host) -> bool:
    return host.file("/etc/redhat-release").exists


def _vgpu_license(host) -> dict:
    """The registry's vgpu_license check on what the node's nvidia-smi -q -x says now."""
    smi = parse_query_xml(host.check_output("nvidia-smi -q -x"))
    return JUDGE({"nvidia_smi": smi}, {"vgpu_guest": True})


def _restart_gridd(host) -> None:
    """Restart nvidia-gridd and wait until the new daemon has written its lease (a Type=simple unit's restart returns
    before the program has run; the simulated nvidia-smi would read the old state or none)."""
    started = float(host.check_output("date +%s.%N"))
    host.run_expect([0], "systemctl restart nvidia-gridd")
    for _ in range(60):
        written = host.run(f"stat -c %.9Y {STATE}")
        if written.rc == 0 and float(written.stdout) >= started:
            return
        time.sleep(0.5)
    pytest.fail(f"nvidia-gridd wrote no lease to {STATE} within 30 s of its restart")


def test_the_guest_driver_is_installed_at_the_pinned_release_by_the_oss_package_manager(host):
    if _rpm_shaped(host):
        version = host.check_output(f"rpm -q --qf '%{{VERSION}}' {PACKAGE}")
        # The .rpm, not a .deb: dpkg knows nothing of it on the RHEL shape.
        assert host.run(f"dpkg-query -W {PACKAGE}").rc != 0
    else:
        version = host.check_output(f"dpkg-query -W -f '${{Version}} ${{Status}}' {PACKAGE}")
        assert version.endswith("install ok installed"), version
        version = version.split()[0]
    assert version == RELEASE
    assert host.file("/usr/bin/nvidia-gridd").is_file and host.file("/usr/bin/nvidia-smi").is_file


def test_gridd_conf_sets_the_feature_type(host):
    conf = host.file("/etc/nvidia/gridd.conf")
    assert (conf.user, conf.group, conf.mode) == ("root", "root", 0o644)
    settings = [line for line in conf.content_string.splitlines() if line and not line.startswith("#")]
    assert settings == ["FeatureType=1"]


def test_the_token_is_in_place_with_nvidias_mode(host):
    token = host.file(TOKEN)
    assert (token.user, token.group, token.mode) == ("root", "root", 0o744)
    assert token.content_string == LAB_TOKEN.read_text(encoding="utf-8")


def test_nvidia_gridd_is_enabled_and_running(host):
    service = host.service("nvidia-gridd")
    assert service.is_enabled and service.is_running


def test_nvidia_smi_reports_the_gpu_licensed(host):
    text = parse_license_text(host.check_output("nvidia-smi -q"))
    assert text["driver_version"] == RELEASE
    assert [(gpu["bus_id"], gpu["license"]["product"]) for gpu in text["gpus"]] == [
        (BUS_ID, "NVIDIA Virtual Compute Server")
    ]
    assert text["gpus"][0]["license"]["licensed"], text["gpus"][0]["license"]
    assert text["gpus"][0]["license"]["expiry"], text["gpus"][0]["license"]
    record = _vgpu_license(host)
    assert record["status"] == "PASS", record


@pytest.fixture
def token_removed(host):
    """The token moved away and nvidia-gridd restarted (it reads the token only when it starts); put back after."""
    host.run_expect([0], f"mv {TOKEN} /root/token.away")
    _restart_gridd(host)
    yield
    host.run_expect([0], f"mv /root/token.away {TOKEN}")
    _restart_gridd(host)


def test_without_the_token_the_vgpu_license_check_fails_naming_the_gpu(host, token_removed):
    assert host.service("nvidia-gridd").is_running  # the daemon runs: it is the lease that is missing
    record = _vgpu_license(host)
    assert record["status"] == "FAIL", record
    assert f"GPU 0 ({BUS_ID})" in record["fault"] and "Unlicensed" in record["fault"], record["fault"]
    assert "ClientConfigToken" in record["remedy"]
    # nvidia-gridd's log says why the lease was refused (journald may take a moment to have the line).
    for _ in range(20):
        journal = host.run(f"journalctl -u nvidia-gridd --no-pager -n 20 -o cat | grep {shlex.quote('no client')}")
        if journal.rc == 0:
            break
        time.sleep(0.5)
    assert journal.rc == 0, host.run("journalctl -u nvidia-gridd --no-pager -n 20").stdout


def test_with_the_token_back_the_guest_is_licensed_again(host):
    # Runs after the fixture above put the token back and restarted nvidia-gridd (tests run in file order).
    assert _vgpu_license(host)["status"] == "PASS"
