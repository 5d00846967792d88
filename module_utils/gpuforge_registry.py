"""The node health check registry: one entry per check.

An entry says what the check reads (its sources), how it is judged, the keys of the expected spec it reads (their
names carry their unit: ``_max`` counts, ``_fraction`` shares, ``_gbit_per_s``), the remedy and the lab fault that
makes it fail. gpu_node_check reads the sources the registered checks need and runs them; ``CHECK_NAMES``,
``EXPECTED_KINDS`` (gpuforge_node_health.EXPECTED) and ``LAB_FAULTS`` (the lab's fault table,
src/gpuforge/lab/profiles.py) come from here, and the tests compare gpu_node_check's documentation and the lab's
fault table with it (tests/unit/module_utils/test_gpuforge_registry.py).

Two kinds of entry:

- a standalone check (``judge`` set): ``judge(sources, expected) -> gpuforge_checks.node_check``, where ``sources``
  maps each name of ``needs`` to its parsed content, or to a ``Unreadable`` with the reason it could not be read.
  Adding one is a parser, this entry, its threshold default, its lab fault and its tests.
- the checks gpuforge_node_health.judge_node judges together (``judge`` None): they share the GPUs' bus IDs and name
  each other in ``caused_by`` (a GPU off the bus explains the count, the Xid 79, the affinity), so one function
  judges them; their entries still say what they read and which spec keys and lab faults belong to them.

Stdlib only, Python 3.8+: the node's gpuforge-health command imports it as gpu_node_check does.
"""

from __future__ import annotations

import os
from collections import namedtuple

from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_health_checks as health_checks
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_vgpu_license as vgpu_license
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_options import (
    boolean,
    integer,
    list_of,
    mapping_of,
    number,
    record,
    string,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_taint import REMEDY as TAINT_REMEDY
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_taint import judge_taint

__all__ = [
    "CHECKS",
    "CHECK_NAMES",
    "EXPECTED_KINDS",
    "HEALTH_CHECKS",
    "HEALTH_CHECK_NAMES",
    "LAB_FAULTS",
    "LINK_LAYERS",
    "SOURCES",
    "Check",
    "Source",
    "Unreadable",
    "numa_affinity",
    "read_file",
    "standalone",
]

# A source: kind is "facts" (a facts dict: given, or gathered), "command" (argv run on the node), "file" (a path
# under the node's root: / on a node, the lab's simulated tree in the lab) or "sysfs" (files under sysfs_root);
# parse: (module_utils file, function) of its parser, which `gpuforge parse <name>` runs (src/gpuforge/parsers.py).
Source = namedtuple("Source", "name kind read fix parse", defaults=(None,))
# names: the check names the entry emits; needs: source names; expected: {spec key: option kind};
# lab_fault: (fault type, required parameters, optional parameters) or None.
Check = namedtuple("Check", "names needs judge expected remedy lab_fault")


class Unreadable(str):
    """A source that could not be read: the reason (a failed ``<source>_readable``-style result for the check)."""


def read_file(root: str, path: str):
    """The text of root/path (a "file" source), or an Unreadable naming the path and the error."""
    full = os.path.join(root or "/", path)
    try:
        with open(full, encoding="ascii", errors="replace") as handle:
            return handle.read()
    except OSError as exc:
        return Unreadable(f"{full} could not be read: {exc.strerror or exc}")


LINK_LAYERS = ("InfiniBand", "Ethernet")  # as ibstat prints them


def numa_affinity(extra=False):
    """The kind of an expected system's numa_affinity: a list of NUMA groups, each with its GPU indexes
    (required), its HCA names and its NUMA node (required). extra=True keeps keys a group adds, unchecked
    (gpuforge_gdr reads the system entry leniently); otherwise such a key is refused, which catches typos."""
    return list_of(
        record(
            {
                "gpus": list_of(integer(minimum=0)),
                "hcas": list_of(string(numbers=True, nonempty=True)),
                "numa": integer(minimum=0),
            },
            required=("gpus", "numa"),
            extra=extra,
        )
    )


_PORT = record(
    {
        "port": integer(minimum=1),
        "link": string(numbers=True, nonempty=True),
        "rate_gbit_per_s": number(above=0),
        "link_layer": string(choices=LINK_LAYERS),
    }
)
_COUNT = integer(minimum=0)

SOURCES = {
    "nvidia_smi": Source("nvidia_smi", "facts", "nvidia-smi -q -x, topo -m, nvlink --status, clock samples", ""),
    "infiniband": Source("infiniband", "facts", "ibstat, ibv_devinfo -v, ibdev2netdev, ofed_info -s", ""),
    "lsmod": Source("lsmod", "command", ["lsmod"], "install kmod, or pass lsmod"),
    "kernel_log": Source("kernel_log", "command", ["dmesg"], "install util-linux, or pass kernel_log (journalctl -k)"),
    "lspci": Source("lspci", "command", ["lspci", "-vvv", "-D"], "install pciutils, or pass lspci"),
    "fabric_manager": Source(
        "fabric_manager", "command", ["systemctl", "is-active", "nvidia-fabricmanager"], "pass fabric_manager"
    ),
    "sysfs": Source("sysfs", "sysfs", "aer_dev_*, class/infiniband/*/ports/*/pkeys, the PCI device tree", ""),
    "tainted": Source(
        "tainted",
        "file",
        "proc/sys/kernel/tainted",
        "read /proc/sys/kernel/tainted on the node",
        ("gpuforge_taint", "parse_tainted"),
    ),
    # gpuforge-health's own sources (HEALTH_CHECKS): the node's mount table, and the processes nvidia-smi -q -x lists
    # on each GPU (the XML of the same nvidia-smi run the nvidia_smi facts come from).
    "mountinfo": Source(
        "mountinfo",
        "file",
        "proc/self/mountinfo",
        "read /proc/self/mountinfo on the node",
        ("gpuforge_health_checks", "mount_points"),
    ),
    "gpu_processes": Source("gpu_processes", "command", ["nvidia-smi", "-q", "-x"], "install the NVIDIA driver"),
}

# The checks gpuforge_node_health.judge_node judges together, in the order it emits them.
_SMI = ("nvidia_smi",)
_GROUP = (
    ("nvidia_smi_readable", _SMI, {}, None),
    ("infiniband_readable", ("infiniband",), {}, None),
    ("lsmod_readable", ("lsmod",), {}, None),
    ("kernel_log_readable", ("kernel_log",), {}, None),
    ("gpu_count", _SMI, {"gpu_count": _COUNT}, ("gpu_missing", {"gpu"}, set())),
    ("gpu_model", _SMI, {"gpu_model": string()}, None),
    ("gpu_fallen_off_bus", _SMI, {}, ("gpu_fallen_off_bus", {"gpu"}, set())),
    ("driver_branch", _SMI, {"driver_branch": string(numbers=True)}, None),
    ("persistence_mode", _SMI, {"persistence_mode": boolean()}, None),
    ("ecc_enabled", _SMI, {"ecc": boolean()}, None),
    ("ecc_volatile_dbe", _SMI, {}, ("ecc_dbe", {"gpu", "count"}, set())),
    (
        "ecc_aggregate",
        _SMI,
        {"sram_uncorrectable_max": _COUNT, "sram_correctable_max": _COUNT, "dram_errors_max": _COUNT},
        ("ecc_aggregate", {"gpu", "memory", "kind", "count"}, set()),
    ),
    ("row_remap", _SMI, {"remap_uncorrectable_max": _COUNT}, ("row_remap_pending", {"gpu"}, set())),
    ("retired_pages", _SMI, {"retired_pages_max": _COUNT}, None),
    (
        "pcie_link",
        _SMI,
        {"pcie_gen_max": integer(minimum=1), "pcie_width_max": integer(minimum=1)},
        ("pcie_width_degraded", {"gpu", "width"}, {"gen"}),
    ),
    (
        "throttle",
        _SMI,
        {
            "clock_event_max_fraction": number(minimum=0, maximum=1),
            "clock_event_min_samples": integer(minimum=1),
            "clock_event_reasons": list_of(string(nonempty=True)),
        },
        ("clock_events", {"gpu", "reason", "fraction"}, set()),
    ),
    (
        "xid",
        ("kernel_log", "nvidia_smi"),
        {"xid_fatal": list_of(_COUNT), "xid_fail_actions": list_of(string(nonempty=True))},
        ("xid", {"gpu", "code"}, {"message"}),
    ),
    ("nvlink_active", _SMI, {"nvlink_links": _COUNT}, ("nvlink_inactive", {"gpu", "links"}, set())),
    (
        "nvlink_errors",
        _SMI,
        {"nvlink_error_max": mapping_of(_COUNT, key=string(nonempty=True))},
        ("nvlink_errors", {"gpu", "link"}, {"replay", "recovery", "crc"}),
    ),
    (
        "hcas_present",
        ("infiniband",),
        {"hcas": list_of(record({"name": string(numbers=True, nonempty=True), "ports": list_of(_PORT)}, ("name",)))},
        ("hca_missing", {"hca"}, set()),
    ),
    ("ib_port_state", ("infiniband",), {}, ("ib_port_state", {"hca", "port", "state"}, {"phys_state"})),
    (
        "ib_port_rate",
        ("infiniband",),
        {
            "link_speeds": mapping_of(
                record({"rate_gbit_per_s": number(above=0), "link_layer": string(choices=LINK_LAYERS)}),
                key=string(numbers=True),
            )
        },
        ("ib_port_rate", {"hca", "port", "rate_gbit_per_s"}, set()),
    ),
    (
        "ib_link_flaps",
        ("kernel_log", "infiniband"),
        {"ib_link_flaps_max": _COUNT},
        ("ib_link_flap", {"hca", "port"}, {"count"}),
    ),
    ("peermem_loaded", ("lsmod",), {"peermem": boolean()}, ("peermem_load_failure", set(), set())),
    ("gpu_hca_affinity", ("nvidia_smi", "infiniband"), {"numa_affinity": numa_affinity()}, None),
    ("lspci_readable", ("lspci",), {}, None),
    ("pcie_link_hca", ("lspci",), {}, ("pcie_link_degraded", set(), {"gpu", "hca", "width", "gen"})),
    ("pcie_link_limited", ("kernel_log", "lspci"), {}, None),
    (
        "pcie_aer",
        ("sysfs",),
        {"pcie_aer_correctable_max": _COUNT, "pcie_aer_uncorrectable_max": _COUNT},
        ("pcie_aer_errors", set(), {"gpu", "hca", "correctable", "nonfatal", "fatal"}),
    ),
    ("pcie_acs", ("lspci", "sysfs"), {"virtual": boolean()}, ("acs_enabled", set(), {"gpu", "hca"})),
    (
        "sxid",
        ("kernel_log",),
        {"nvswitch": boolean()},
        ("sxid", {"switch", "pci", "code", "fatal"}, {"link", "message"}),
    ),
    ("fabric_manager", ("fabric_manager", "nvidia_smi"), {}, ("fabric_manager_down", set(), set())),
)

CHECKS = [Check((name,), needs, None, expected, "", fault) for name, needs, expected, fault in _GROUP]
_TAINT_BITS = list_of(integer(minimum=0, maximum=63))
CHECKS += [
    # Kernel taint flags that mean a machine check, a bad page, an oops (fail) or a warning, a soft lockup, a forced
    # module load/unload (warn); gpuforge_taint.py cites the kernel's table. Lab fault: the bits set in the lab's
    # /proc/sys/kernel/tainted (lab/sim/gpuforge_sim/lspci.py writes it beside the simulated sysfs tree).
    Check(
        ("kernel_taint",),
        ("tainted",),
        judge_taint,
        {"kernel_taint_fail_bits": _TAINT_BITS, "kernel_taint_warn_bits": _TAINT_BITS},
        TAINT_REMEDY,
        ("kernel_taint", {"bits"}, set()),
    ),
    # A vGPU guest's licence (nvidia-smi's "vGPU Software Licensed Product"), judged only where the expected system
    # says vgpu_guest: true; every GPU must be Licensed (module_utils/gpuforge_vgpu_license.py cites the states).
    # Lab fault: the simulated nvidia-smi prints License Status "Unlicensed (Restricted)" for that GPU (or all).
    Check(
        ("vgpu_license",),
        ("nvidia_smi",),
        vgpu_license.judge_vgpu_license,
        {"vgpu_guest": boolean()},
        vgpu_license.REMEDY,
        ("vgpu_unlicensed", set(), {"gpu", "status"}),
    ),
]


def standalone() -> list:
    """The registered checks gpu_node_check runs itself (after judge_node's), in registry order."""
    return [check for check in CHECKS if check.judge is not None]


# The checks only gpuforge-health runs (module_utils/gpuforge_health.py PROFILES names which profile reports each):
# their input is what one validation run does not have - the boards of the node's first healthy run (kept in its
# state file), the end of a job (Epilog), the mount table the site needs. Same shape and same judge signature as a
# standalone check; expected keys are gpuforge-health's configuration (roles/node_health), not validation's spec.
HEALTH_CHECKS = [
    Check(
        ("gpu_bus_ids",),
        ("nvidia_smi",),
        health_checks.judge_gpu_bus_ids,
        {"gpu_bus_ids": list_of(string(nonempty=True))},
        health_checks.REMEDY_BUS_IDS,
        ("gpu_missing", {"gpu"}, set()),
    ),
    Check(
        ("mounts_present",),
        ("mountinfo",),
        health_checks.judge_mounts_present,
        {"mounts": list_of(string(nonempty=True))},
        health_checks.REMEDY_MOUNTS,
        None,  # no lab fault: the lab has no simulated mount table; tests set a mount point that is not mounted
    ),
    # Lab fault gpu_process_left: the simulated nvidia-smi lists a process on that GPU (-q -x <process_info>) and
    # counts its memory in FB Memory Usage/Used, as a process that outlived its job shows.
    Check(
        ("gpu_memory_released",),
        ("nvidia_smi",),
        health_checks.judge_gpu_memory_released,
        {"gpu_memory_used_max_mib": integer(minimum=0)},
        health_checks.REMEDY_MEMORY,
        ("gpu_process_left", {"gpu"}, {"pid", "name", "memory_mib"}),
    ),
    Check(
        ("gpu_processes_exited",),
        ("gpu_processes",),
        health_checks.judge_gpu_processes_exited,
        {"gpu_process_names_allowed": list_of(string(nonempty=True))},
        health_checks.REMEDY_PROCESSES,
        ("gpu_process_left", {"gpu"}, {"pid", "name", "memory_mib"}),
    ),
]


def _derived():
    names, kinds, faults = [], {}, {}
    for check in CHECKS:
        names.extend(check.names)
        kinds.update(check.expected)
        if check.lab_fault:
            faults[check.lab_fault[0]] = (set(check.lab_fault[1]), set(check.lab_fault[2]))
    for check in HEALTH_CHECKS:  # their lab faults are the lab's too; their names and keys are not validation's
        if check.lab_fault:
            faults[check.lab_fault[0]] = (set(check.lab_fault[1]), set(check.lab_fault[2]))
    return tuple(names), kinds, faults


# CHECK_NAMES: every check gpu_node_check can emit before its diagnostics; EXPECTED_KINDS: the expected spec's
# keys the checks read; LAB_FAULTS: fault type -> (required, optional parameters), the lab fault of each check.
CHECK_NAMES, EXPECTED_KINDS, LAB_FAULTS = _derived()
# The checks only gpuforge-health emits, in registry order.
HEALTH_CHECK_NAMES = tuple(name for check in HEALTH_CHECKS for name in check.names)
