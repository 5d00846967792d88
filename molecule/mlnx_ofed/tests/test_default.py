"""mlnx_ofed on a lab DGX-1 of every OS shape the role claims: DOCA-OFED from the signed mirror's DOCA repository for
the node's OS as the registry describes it, openibd, OpenSM, active ports; and on the mlnx_ofed_inbox node the
distribution's in-box stack (rdma-core, its tools and OpenSM from the OS's own repository, no OFED). Expected values
come from the vendor facts registry (vendor_facts/nvidia-doca/<os>.yml, vendor_facts/rhel-baseos/rhel9.yml,
vendor_facts/debian/bookworm.yml), not from the role."""

import fnmatch
import json
import shlex
from pathlib import Path

import pytest
import yaml

from gpuforge import vendor_facts

MOLECULE_YML = Path(__file__).resolve().parents[1] / "molecule.yml"
SHAPES_YML = Path(__file__).resolve().parents[3] / "lab" / "image" / "shapes.yml"

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


# The nodes that keep the in-box stack (converge.yml: mlnx_ofed_source inbox for group mlnx_ofed_inbox), by shape: the
# registry file of the OS repository their packages come from.
INBOX_GROUP = "mlnx_ofed_inbox"
INBOX_REGISTRY = {"rhel9": "rhel-baseos/rhel9", "debian12": "debian/bookworm"}
INBOX_PACKAGES = {
    "rhel9": ["rdma-core", "libibverbs-utils", "infiniband-diags", "opensm"],
    "debian12": ["rdma-core", "ibverbs-utils", "infiniband-diags", "opensm"],
}
# The package of each in-box tool (rdma-core.spec on EL; Debian's rdma-core binary packages, registry files).
INBOX_TOOL_PACKAGES = {
    "rhel9": {
        "/usr/sbin/ibstat": "infiniband-diags",
        "/usr/bin/ibv_devinfo": "libibverbs-utils",
        "/usr/sbin/opensm": "opensm",
    },
    "debian12": {
        "/usr/sbin/ibstat": "infiniband-diags",
        "/usr/bin/ibv_devinfo": "ibverbs-utils",
        "/usr/sbin/opensm": "opensm",
    },
}
# Where each stack's OpenSM reads its options: upstream's default for DOCA's opensmd
# (linux-rdma/opensm@3.3.23:include/opensm/osm_base.h), /etc/rdma for RHEL's opensm package (opensm.spec of the
# Fedora/RHEL lineage: --with-opensm-conf-sub-dir=rdma, %config(noreplace) /etc/rdma/opensm.conf; Red Hat's RHEL 7
# Networking Guide, "Configuring the Subnet Manager": "The opensm program keeps its master configuration file in
# /etc/rdma/opensm.conf").
# Debian's opensm 3.3.23 reads upstream's default (vendor_facts/debian/bookworm.yml; roles/mlnx_ofed/defaults/main.yml).
OPENSM_CONF = {
    "doca": "/etc/opensm/opensm.conf",
    "rhel9-inbox": "/etc/rdma/opensm.conf",
    "debian12-inbox": "/etc/opensm/opensm.conf",
}


def _platforms() -> list[dict]:
    return yaml.safe_load(MOLECULE_YML.read_text())["platforms"]


INBOX_PLATFORMS = {p["name"] for p in _platforms() if INBOX_GROUP in p.get("groups", [])}


@pytest.fixture
def doca(shape):
    return vendor_facts.repository(f"nvidia-doca/{shape}")


@pytest.fixture
def inbox(host) -> bool:
    return host.backend.host in INBOX_PLATFORMS


@pytest.fixture
def doca_node(inbox):
    if inbox:
        pytest.skip("an in-box stack node: no DOCA-OFED (the inbox tests below)")


@pytest.fixture
def inbox_node(inbox):
    if not inbox:
        pytest.skip("a DOCA-OFED node")


@pytest.fixture
def opensm_unit(inbox, shape, doca) -> str:
    """The OpenSM unit of the node's stack: DOCA's opensmd, or the distribution package's own unit (registry)."""
    if not inbox:
        return doca.fact("opensm_service")
    (units,) = [p.units for p in vendor_facts.repository(INBOX_REGISTRY[shape]).packages if p.name == "opensm"]
    # Debian's package has opensm@.service beside it too: the instances opensm.service starts, one per port.
    (unit,) = [unit for unit in units if "@" not in unit]
    return unit.removesuffix(".service")


@pytest.fixture
def opensm_conf(inbox, shape) -> str:
    return OPENSM_CONF[f"{shape}-inbox" if inbox else "doca"]


def test_the_mirror_paths_are_the_registry_and_lab_definitions():
    # DOCA_PATHS above must not drift from what the mirror publishes.
    from gpuforge.lab import mirror

    definitions = mirror.load_definitions()
    shapes = definitions["publish_os_shapes"]
    assert vendor_facts.repository("nvidia-doca/debian12").lab_path == DOCA_PATHS["debian12"]
    for shape, path in DOCA_PATHS.items():
        if shape != "debian12":
            assert path in (shapes["deb"].get(f"nvidia-doca/{shape}"), shapes["rpm"].get(f"nvidia-doca/{shape}"))


def test_doca_ofed_installed_from_mirror_at_a_published_version(host, shape, doca, doca_node):
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


def test_ofed_info_prints_the_doca_form_of_the_pinned_release(host, doca, doca_node):
    # DOCA-OFED prints OFED-internal-<version>: (the tarball installer's MLNX_OFED_LINUX- form would be wrong
    # here), and the role's verify accepted it.
    assert host.check_output("ofed_info -s") == doca.fact("ofed_info_s")
    assert host.check_output("ofed_info -s").startswith("OFED-internal-24.10-1.1.4")


def test_openibd_active_and_stack_loaded(host, doca_node):
    service = host.service("openibd")
    assert service.is_running and service.is_enabled
    loaded = [line.split()[0] for line in host.check_output("lsmod").splitlines()[1:]]
    for module in ("mlx_compat", "ib_core", "mlx5_ib", "ib_ipoib", "rdma_ucm"):
        assert module in loaded


def test_opensm_master_and_subnet_up(host, opensm_unit):
    service = host.service(opensm_unit)
    assert service.is_running and service.is_enabled
    assert "SUBNET UP" in host.file("/var/log/opensm.log").content_string


def test_opensm_started_with_the_options_file(host, opensm_unit, opensm_conf):
    # tasks/opensm.yml: DOCA's opensmd reads upstream's default /etc/opensm/opensm.conf, RHEL's in-box opensm
    # /etc/rdma/opensm.conf (OPENSM_CONF); the lab host is the preferred SM of converge.yml: priority 14, bound to
    # mlx5_0 port 1, fat-tree routing with minhop behind it.
    conf = host.file(opensm_conf)
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
    unit = opensm_unit
    started = host.check_output(f"systemctl show -P ActiveEnterTimestamp --timestamp=unix {unit}").lstrip("@")
    assert int(started) >= int(host.check_output(f"stat -c %Y {opensm_conf}"))
    # the other stack's options file is not written
    assert not host.file(({*OPENSM_CONF.values()} - {opensm_conf}).pop()).exists


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
    "mlnx-ofed-inbox-rhel9": "sm_duplicate_master",
    "mlnx-ofed-inbox-debian12": "sm_missing",
}


def test_every_platform_takes_a_fault_and_every_fault_is_taken():
    platforms = [platform["name"] for platform in _platforms()]
    assert sorted(FAULT_OF_PLATFORM) == sorted(platforms)
    assert sorted(set(FAULT_OF_PLATFORM.values())) == sorted(SM_FAULTS)


def test_subnet_manager_check_names_the_own_opensm_and_catches_its_fault(host):
    kind = FAULT_OF_PLATFORM[host.backend.host]
    # Healthy: the node's OpenSM (opensmd or opensm, found by the lab's sminfo in the process table) is master.
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


# --- The in-box stack (mlnx_ofed_source: inbox) -------------------------------------------------------------------


def test_every_inbox_platform_has_its_os_repository_in_the_registry():
    # Platforms of group mlnx_ofed_inbox are RHEL 9 and Debian 12 nodes here; a shape without an INBOX_REGISTRY entry
    # would have its tests fail on a KeyError instead of naming the missing registry file.
    shapes = {p["name"]: [g.removeprefix("os_") for g in p["groups"] if g.startswith("os_")] for p in _platforms()}
    assert INBOX_PLATFORMS, "no platform keeps the in-box stack"
    for name in INBOX_PLATFORMS:
        (shape,) = shapes[name]
        assert shape in INBOX_REGISTRY and shape in INBOX_PACKAGES, name


def _installed_version(host, shape, name) -> str:
    if shape.startswith("rhel"):
        return host.check_output(f"rpm -q --qf '%{{VERSION}}-%{{RELEASE}}' {name}")
    return host.check_output(f"dpkg-query -W -f '${{Version}}' {name}")


def test_inbox_stack_installed_from_the_distribution_repository(host, shape, inbox_node):
    # The role's in-box package run (vars/<OS>.yml: rdma-core and its tools; OpenSM on the subnet manager host) at a
    # version the OS repository publishes, from that repository, through the node's own package manager.
    repo = vendor_facts.repository(INBOX_REGISTRY[shape])
    for name in INBOX_PACKAGES[shape]:
        installed = _installed_version(host, shape, name)
        assert installed in repo.versions(name), (name, installed, repo.versions(name))
    if shape.startswith("rhel"):
        # The shape's dnf repository id of that registry file (lab/image/shapes.yml, as subscription-manager names it).
        repositories = yaml.safe_load(SHAPES_YML.read_text())[shape]["repositories"]
        (repo_id,) = [repo_id for repo_id, key in repositories.items() if key == INBOX_REGISTRY[shape]]
        for name in INBOX_PACKAGES[shape]:
            assert host.check_output(f"dnf -q repoquery --installed --qf '%{{from_repo}}' {name}") == repo_id, name
        return
    # Debian: the installed version is the Debian archive's (the lab mirror's bookworm suite), and no other source
    # offers one: the node has no DOCA repository, whose builds of the same names sort higher.
    for name in INBOX_PACKAGES[shape]:
        policy = host.check_output(f"apt-cache policy {name}")
        sources = [line.split()[1:3] for line in policy.splitlines() if line.strip().split()[:1] == ["500"]]
        assert sources == [["http://mirror/debian", "bookworm/main"]], (name, policy)


def test_inbox_tools_are_the_distribution_packages_and_answer(host, shape, inbox_node):
    # ibstat and ibv_devinfo come from rdma-core's binary packages, OpenSM from its own, and they read the node's
    # HCAs: the port OpenSM binds is among ibstat's, and ibv_devinfo lists mlx5_0 with that port Active.
    for path, package in INBOX_TOOL_PACKAGES[shape].items():
        if shape.startswith("rhel"):
            assert host.check_output(f"rpm -qf --qf '%{{NAME}}' {path}") == package, path
        else:
            assert host.check_output(f"dpkg -S {path}") == f"{package}: {path}", path
    assert OPENSM_GUID in host.check_output("ibstat -p").split()
    devinfo = host.check_output("ibv_devinfo -d mlx5_0")
    assert "hca_id:\tmlx5_0" in devinfo and "PORT_ACTIVE" in devinfo


def test_debian_inbox_opensm_runs_on_the_bound_port_only(host, shape, inbox_node):
    # Debian's opensm.service starts one opensm@<GUID> per port of /etc/default/opensm's PORTS (ALL as the package
    # ships it: the DGX-1 profile's four IB ports); the role binds converge.yml's port by listing only that GUID
    # (tasks/opensm.yml), so exactly that instance runs, with the GUID on its command line.
    if not shape.startswith("debian"):
        pytest.skip("RHEL's opensm.service runs one OpenSM with the options file's guid")
    assert host.file("/etc/default/opensm").contains(f"^PORTS={OPENSM_GUID}$")
    running = host.check_output("systemctl list-units --no-legend --plain --state=active 'opensm@*'").splitlines()
    assert [line.split()[0] for line in running] == [f"opensm@{OPENSM_GUID}.service"], running
    main_pid = host.check_output(f"systemctl show -P MainPID opensm@{OPENSM_GUID}.service")
    assert f"--guid {OPENSM_GUID}" in host.file(f"/proc/{main_pid}/cmdline").content_string.replace("\0", " ")


def test_inbox_node_has_no_ofed(host, shape, inbox_node):
    # The in-box path installs nothing of NVIDIA's (defaults/main.yml: no ofed_info; no openibd): no DOCA repository,
    # none of its packages, no ofed_info, no openibd unit, and the kernel's own drivers loaded (no mlx_compat, the
    # compatibility layer only MLNX_OFED's kernel package brings).
    assert not host.file("/etc/yum.repos.d/doca.repo").exists
    assert not host.file("/etc/apt/sources.list.d/doca.sources").exists
    query = "rpm -q" if shape.startswith("rhel") else "dpkg-query -W"
    for name in ("doca-ofed", "mlnx-ofed-kernel-utils", "mlnx-ofed-kernel-dkms", "ofed-scripts"):
        assert host.run(f"{query} {name}").rc != 0, name
    assert host.run("command -v ofed_info").rc != 0
    assert host.run("systemctl cat openibd.service").rc != 0
    assert host.run("systemctl cat opensmd.service").rc != 0
    # The kernel's drivers, loaded at boot (prepare.yml) and left so: the kernel log has each loaded from the in-box
    # markers (version inbox), none replaced by a package's module.
    loaded = [line.split()[0] for line in host.check_output("lsmod").splitlines()[1:]]
    log = host.check_output("dmesg")
    for module in ("ib_core", "mlx5_core", "mlx5_ib", "ib_uverbs", "ib_umad"):
        assert module in loaded
        assert f"{module}: module loaded (version inbox)" in log
    assert "mlx_compat" not in loaded
    assert not host.file("/usr/lib/gpuforge-lab/modules/mlx5_ib.ko").exists
