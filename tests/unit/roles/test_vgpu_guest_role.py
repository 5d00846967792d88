"""vgpu_guest: its refusals (OS, every missing setting, a FeatureType gridd.conf does not know), the gridd.conf it
renders, and the token copy (no_log, mode 744 as NVIDIA's Virtual GPU Client Licensing User Guide says)."""

from __future__ import annotations

import pytest
import yaml
from gpu_stack_render import OS_FACTS, ROOT, RoleRender

REFUSAL = "Refuse unsupported systems and missing settings"
SITE = {
    "vgpu_guest_driver_base_url": "https://mirror.example.org/nvidia/vgpu/16.5/",
    "vgpu_guest_driver_files": {
        "Debian": "nvidia-linux-grid-535_535.161.08_amd64.deb",
        "RedHat": "nvidia-linux-grid-535-535.161.08-1.x86_64.rpm",
    },
    "vgpu_guest_driver_sha256": {"Debian": "a" * 64, "RedHat": "b" * 64},
    "vgpu_guest_driver_package": "nvidia-linux-grid-535",
    "vgpu_guest_driver_version": "535.161.08",
    "vgpu_guest_token_file": "files/client_configuration_token.tok",
}
ROLE = ROOT / "roles" / "vgpu_guest"


def role(os_name="debian12", **extra):
    return RoleRender("vgpu_guest", os_name, **{**SITE, **extra})


# RHEL 8 is no claim: every host role refuses it (ansible-core 2.17+ cannot run its dnf bindings' Python 3.6).
@pytest.mark.parametrize("os_name", sorted(set(OS_FACTS) - {"rhcos419", "rhel8"}))
def test_claimed_systems_with_the_site_settings_are_not_refused(os_name):
    assert not role(os_name).refused("main.yml", REFUSAL)


def test_another_release_is_refused_naming_the_supported_ones():
    facts = {**OS_FACTS["debian12"], "distribution_major_version": "11", "distribution_version": "11.9"}
    role(ansible_facts=facts).assert_problems(
        "main.yml", REFUSAL, ["the vgpu_guest role supports Debian 12, Ubuntu 22.04 and 24.04, RHEL 9"]
    )


def test_every_missing_site_setting_is_named_in_one_message():
    RoleRender("vgpu_guest", "debian12").assert_problems(
        "main.yml",
        REFUSAL,
        [
            "set vgpu_guest_driver_base_url",
            "set vgpu_guest_driver_files.Debian",
            "set vgpu_guest_driver_package and vgpu_guest_driver_version",
            "set vgpu_guest_token_file",
        ],
    )


def test_a_package_without_its_sha256_is_refused():
    sha = {"Debian": "not-a-digest", "RedHat": "b" * 64}
    role(vgpu_guest_driver_sha256=sha).assert_problems("main.yml", REFUSAL, ["a package is never installed unchecked"])
    # the RHEL host needs the RedHat entry, not the Debian one
    assert not role("rhel9", vgpu_guest_driver_sha256=sha).refused("main.yml", REFUSAL)


def test_a_feature_type_gridd_does_not_know_is_refused_and_0_needs_no_token():
    role(vgpu_guest_feature_type=3).assert_problems("main.yml", REFUSAL, ["vgpu_guest_feature_type 3 is not"])
    assert not role(vgpu_guest_feature_type=0, vgpu_guest_token_file="").refused("main.yml", REFUSAL)


def test_gridd_conf_sets_the_feature_type_and_the_site_s_settings():
    text = role(vgpu_guest_feature_type=1, vgpu_guest_gridd_settings={"EnableUI": "FALSE"}).template("gridd.conf.j2")
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert lines == ["FeatureType=1", "EnableUI=FALSE"]


def test_the_token_is_copied_unlogged_mode_744_and_restarts_the_service():
    tasks = yaml.safe_load((ROLE / "tasks" / "license.yml").read_text(encoding="utf-8"))
    copy = next(t for t in tasks if t["name"] == "Copy the client configuration token")
    assert copy["no_log"] is True
    assert copy["ansible.builtin.copy"]["mode"] == "0744"
    assert copy["notify"] == "Restart nvidia-gridd"
    gridd = next(t for t in tasks if t["name"].startswith("Write gridd.conf"))
    assert gridd["notify"] == "Restart nvidia-gridd"
    handlers = yaml.safe_load((ROLE / "handlers" / "main.yml").read_text(encoding="utf-8"))
    assert handlers[0]["ansible.builtin.systemd_service"] == {"name": "nvidia-gridd", "state": "restarted"}


@pytest.mark.parametrize(("os_name", "family"), [("debian12", "Debian"), ("rhel9", "RedHat")])
def test_the_download_is_checked_against_the_pinned_sha256(os_name, family):
    args = role(os_name).task_args("download.yml", "Download the guest driver package", vgpu_guest_file="x.pkg")
    assert args["url"] == "https://mirror.example.org/nvidia/vgpu/16.5/x.pkg"
    assert args["checksum"] == "sha256:" + SITE["vgpu_guest_driver_sha256"][family]


@pytest.mark.parametrize(
    ("licences", "licensed"),
    [
        ([{"licensed": True}], True),
        ([{"licensed": True}, {"licensed": False}], False),
        ([None], False),
        ([], False),
    ],
)
def test_the_licence_read_back_needs_every_gpu_licensed(licences, licensed):
    gpus = [{"index": i, "bus_id": f"0000000{i}:02:02.0", "vgpu_license": lic} for i, lic in enumerate(licences)]
    smi = {"ansible_facts": {"nvidia_smi": {"gpus": gpus, "errors": []}}}
    render = role()
    assert render.refused("license.yml", "Refuse a guest that is not licensed", vgpu_guest_smi=smi) is not licensed


def test_rhel8_is_refused_naming_the_supported_releases():
    rhel8 = role("rhel8")
    assert rhel8.refused("main.yml", REFUSAL)
    message = " ".join(rhel8.message("main.yml", REFUSAL).split())
    assert "supports Debian 12, Ubuntu 22.04 and 24.04, RHEL 9 (this is RedHat 8." in message, message
