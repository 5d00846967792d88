"""mlnx_ofed on a lab DGX-1 of every OS shape the role claims: DOCA-OFED from the signed mirror's DOCA repository for
the node's OS as the registry describes it, openibd, OpenSM, active ports. Expected values come from the vendor facts
registry (vendor_facts/nvidia-doca/<os>.yml), not from the role."""

import fnmatch
import json
import shlex
from pathlib import Path

import pytest
import yaml

from gpuforge import vendor_facts

MOLECULE_YML = Path(__file__).resolve().parents[1] / "molecule.yml"

# The lab mirror publishes Debian 12's DOCA repository at the registry's lab_path and the other shapes' at
# lab/packages/packages.yml's publish_os_shapes (the paths the role's base URL and distro labels lead to).
DOCA_PATHS = {
    "debian12": "doca/2.9.1/debian12.5/x86_64",
    "ubuntu2204": "doca/2.9.1/ubuntu22.04/x86_64",
    "ubuntu2404": "doca/2.9.1/ubuntu24.04/x86_64",
    "rhel9": "doca/2.9.1/rhel9.4/x86_64",
}
# The simulators' hardware document, a writable copy of the profile (prepare.yml), where a test puts a fault.
HARDWARE = "/etc/gpuforge-lab/hardware.json"
# converge.yml: the node's OpenSM binds mlx5_0 port 1 at priority 14, the one SM of the node's own fabric.
OPENSM_GUID = "0x248a07030029e1fa"
OPENSM_PRIORITY = 14
# sm_duplicate_master's second master when the fault names none (lab/profiles/SCHEMA.md).
DUPLICATE_GUID = "0x98039b0300a4c700"


@pytest.fixture
def doca(shape):
    return vendor_facts.repository(f"nvidia-doca/{shape}")


def test_the_mirror_paths_are_the_registry_and_lab_definitions():
    # DOCA_PATHS above must not drift from what the mirror publishes.
    from gpuforge.lab import mirror

    definitions = mirror.load_definitions()
    shapes = definitions["publish_os_shapes"]
    assert vendor_facts.repository("nvidia-doca/debian12").lab_path == DOCA_PATHS["debian12"]
    for shape, path in DOCA_PATHS.items():
        if shape != "debian12":
            assert path in (shapes["deb"].get(f"nvidia-doca/{shape}"), shapes["rpm"].get(f"nvidia-doca/{shape}"))


def test_doca_ofed_installed_from_mirror_at_a_published_version(host, shape, doca):
    installed = host.package("doca-ofed").version
    rhel = shape.startswith("rhel")
    if rhel:
        # rpm splits version and release: testinfra's version is the part before the dash.
        installed = host.check_output("rpm -q --qf '%{VERSION}-%{RELEASE}' doca-ofed")
        kernel = host.check_output("rpm -q --qf '%{VERSION}-%{RELEASE}' mlnx-ofed-kernel-dkms")
    else:
        kernel = host.package("mlnx-ofed-kernel-dkms").version
    assert installed in doca.versions("doca-ofed")
    assert fnmatch.fnmatchcase(installed, "2.9.1-*")
    assert kernel in doca.versions("mlnx-ofed-kernel-dkms")
    if rhel:
        repo = host.file("/etc/yum.repos.d/doca.repo")
        assert repo.contains(f"baseurl = http://mirror/{DOCA_PATHS[shape]}")
        assert repo.contains("gpgcheck = 1")
        assert "doca" in host.check_output("dnf -q repoquery --installed --qf '%{from_repo}' doca-ofed")
    else:
        assert f"http://mirror/{DOCA_PATHS[shape]}" in host.check_output("apt-cache policy doca-ofed")
        source = host.file("/etc/apt/sources.list.d/doca.sources")
        assert source.contains("Signed-By: /etc/apt/keyrings/doca.asc")
        assert source.contains(f"URIs: http://mirror/{DOCA_PATHS[shape]}/")


def test_ofed_info_prints_the_doca_form_of_the_pinned_release(host, doca):
    # DOCA-OFED prints OFED-internal-<version>: (the tarball installer's MLNX_OFED_LINUX- form would be wrong
    # here), and the role's verify accepted it.
    assert host.check_output("ofed_info -s") == doca.fact("ofed_info_s")
    assert host.check_output("ofed_info -s").startswith("OFED-internal-24.10-1.1.4")


def test_openibd_active_and_stack_loaded(host):
    service = host.service("openibd")
    assert service.is_running and service.is_enabled
    loaded = [line.split()[0] for line in host.check_output("lsmod").splitlines()[1:]]
    for module in ("mlx_compat", "ib_core", "mlx5_ib", "ib_ipoib", "rdma_ucm"):
        assert module in loaded


def test_opensm_master_and_subnet_up(host, doca):
    assert host.service(doca.fact("opensm_service")).is_running
    assert "SUBNET UP" in host.file("/var/log/opensm.log").content_string


def test_opensm_started_with_the_options_file(host, doca):
    # tasks/opensm.yml: the lab's OpenSM is DOCA's opensmd, which reads upstream's default /etc/opensm/opensm.conf
    # (linux-rdma/opensm@3.3.23:include/opensm/osm_base.h); the lab host is the preferred SM of converge.yml:
    # priority 14, bound to mlx5_0 port 1, fat-tree routing with minhop behind it.
    conf = host.file("/etc/opensm/opensm.conf")
    assert conf.exists and conf.user == "root" and conf.mode == 0o644
    options = [line.split("#", 1)[0].split() for line in conf.content_string.splitlines()]
    assert [o for o in options if o] == [
        ["sm_priority", "14"],
        ["guid", "0x248a07030029e1fa"],
        ["routing_engine", "ftree,minhop"],
    ]
    # the bound GUID is a port of this node, as ibstat -p lists them
    assert "0x248a07030029e1fa" in host.check_output("ibstat -p").split()
    # OpenSM reads the file only at start: it must have (re)started after the file was last written.
    unit = doca.fact("opensm_service")
    started = host.check_output(f"systemctl show -P ActiveEnterTimestamp --timestamp=unix {unit}").lstrip("@")
    assert int(started) >= int(host.check_output("stat -c %Y /etc/opensm/opensm.conf"))


def _judge_subnet_manager(host) -> dict:
    """The subnet manager check as playbooks/validate.yml runs it: the SM hosts of the node's fabric (converge.yml's
    mlnx_ofed_subnet_manager_group, the node alone) with the GUID and priority their OpenSM was given."""
    configured = [{"host": host.backend.host, "guid": OPENSM_GUID, "priority": OPENSM_PRIORITY}]
    result = host.ansible(
        "gpuforge.cluster.subnet_manager_check", json.dumps({"subnet_managers": configured}), check=False
    )
    assert result["changed"] is False, result
    return result["check"]


def _assert_own_opensm_is_master(check):
    assert check["status"] == "PASS", check
    master = check["observed"]["master"]
    assert master["sm_guid"] == OPENSM_GUID, check
    assert master["priority"] == OPENSM_PRIORITY and master["state_name"] == "SMINFO_MASTER", check


def _write_hardware(host, document: str):
    host.run_expect([0], f"printf '%s' {shlex.quote(document)} > {HARDWARE}")


# Each subnet manager fault the lab puts on the node (lab/sim/gpuforge_sim/sminfo.py), with what the check must say
# (module_utils/gpuforge_sminfo.py judge_subnet_manager / judge_fabric).
SM_FAULTS = {
    "sm_missing": ["no subnet manager answers: sminfo exited with code 255: sminfo: iberror: failed: query"],
    "sm_duplicate_master": [
        f"2 SMs are master at equal priority {OPENSM_PRIORITY}",
        OPENSM_GUID,
        f"unconfigured SM {DUPLICATE_GUID}",
    ],
}


# The fault each platform takes: the check reads the lab's sminfo, the same on every OS, so each fault is proven on two
# platforms and each platform proves one fault (its own OpenSM found as master before and after), not all of them.
FAULT_OF_PLATFORM = {
    "mlnx-ofed": "sm_duplicate_master",
    "mlnx-ofed-rhel9": "sm_missing",
    "mlnx-ofed-ubuntu2204": "sm_duplicate_master",
    "mlnx-ofed-ubuntu2404": "sm_missing",
}


def test_every_platform_takes_a_fault_and_every_fault_is_taken():
    platforms = [platform["name"] for platform in yaml.safe_load(MOLECULE_YML.read_text())["platforms"]]
    assert sorted(FAULT_OF_PLATFORM) == sorted(platforms)
    assert sorted(set(FAULT_OF_PLATFORM.values())) == sorted(SM_FAULTS)


def test_subnet_manager_check_names_the_own_opensm_and_catches_its_fault(host):
    kind = FAULT_OF_PLATFORM[host.backend.host]
    # Healthy: the node's OpenSM (the lab's opensmd, found by the lab's sminfo in the process table) is master.
    _assert_own_opensm_is_master(_judge_subnet_manager(host))
    original = host.file(HARDWARE).content_string
    hardware = json.loads(original)
    faulty = json.dumps({**hardware, "faults": [*hardware.get("faults", []), {"type": kind}]})
    _write_hardware(host, faulty)
    try:
        check = _judge_subnet_manager(host)
        assert check["status"] == "FAIL", check
        for words in SM_FAULTS[kind]:
            assert words in check["fault"], check
        if kind == "sm_missing":
            assert check["observed"]["master"] is None, check
        else:  # the two masters: this node's OpenSM, named by its host, and the other part's
            assert f"{host.backend.host} ({OPENSM_GUID})" in check["fault"], check
    finally:
        _write_hardware(host, original)
    _assert_own_opensm_is_master(_judge_subnet_manager(host))
