"""`gpuforge parse KIND FILE` and `gpuforge parse --list`: the module_utils parsers, reachable from the CLI.

Every parser a module runs on a tool's output has a KIND here (tests/unit/cli/test_parse_kinds.py runs each on
a real output and checks that every parse_* function of the node-side parsers is registered or deliberately left
out).

The parsers are imported by their collection path (gpuforge.paths.collection_import), as the modules import them;
everything else in the CLI asks `parse()` or `resolve()` here.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from gpuforge.paths import collection_import

# KIND -> (module in module_utils/, function taking the tool's text and returning a dict/list).
PARSERS: dict[str, tuple[str, str]] = {
    "nvidia-smi-xml": ("gpuforge_nvidia_smi", "parse_query_xml"),
    "nvidia-smi-text": ("gpuforge_nvidia_smi", "parse_query_text"),
    "nvidia-smi-csv": ("gpuforge_nvidia_smi", "parse_query_gpu_csv"),
    "nvidia-smi-list": ("gpuforge_nvidia_smi", "parse_list_gpus"),
    "nvidia-smi-topo": ("gpuforge_nvidia_smi", "parse_topo_matrix"),
    "nvlink-status": ("gpuforge_nvidia_smi", "parse_nvlink_status"),
    "nvidia-smi-vgpu-license": ("gpuforge_vgpu_license", "parse_license_text"),
    "nvidia-smi-vgpu-license-xml": ("gpuforge_vgpu_license", "parse_license_xml"),
    "ibstat": ("gpuforge_infiniband", "parse_ibstat"),
    "ibstatus": ("gpuforge_infiniband", "parse_ibstatus"),
    "ibv-devinfo": ("gpuforge_infiniband", "parse_ibv_devinfo"),
    "ibdev2netdev": ("gpuforge_infiniband", "parse_ibdev2netdev"),
    "lsmod": ("gpuforge_kernel", "parse_lsmod"),
    "dmesg-xid": ("gpuforge_kernel", "parse_xid_events"),
    "nccl-tests": ("gpuforge_nccl_tests", "parse_nccl_tests"),
    "nccl-tests-json": ("gpuforge_nccl_tests", "parse_nccl_tests_json"),
    "ib-write-bw": ("gpuforge_perftest", "parse_perftest_bw"),
    "resnet50": ("gpuforge_resnet50", "parse_resnet50"),
    "apt-simulate": ("gpuforge_package_closure", "parse_apt_simulate"),
    "dnf-transaction": ("gpuforge_package_closure", "parse_dnf_transaction"),
    "perfquery": ("gpuforge_perfquery", "parse_perfquery"),
    "sminfo": ("gpuforge_sminfo", "parse_sminfo"),
    "mlnx-qos": ("gpuforge_mlnx_qos", "parse_mlnx_qos"),
    "dcgmi-diag": ("gpuforge_dcgm", "parse_diag"),
    "dcgmi-diag-table": ("gpuforge_dcgm", "parse_diag_table"),
    "nvbandwidth": ("gpuforge_nvbandwidth", "parse_output"),
    "lspci": ("gpuforge_pcie", "parse_lspci"),
    "pcie-aer-sysfs": ("gpuforge_pcie", "parse_aer"),
    "pcie-link-limited": ("gpuforge_pcie", "parse_link_limited"),
    "nvlink-errors": ("gpuforge_nvidia_smi", "parse_nvlink_errors"),
    "nvidia-smi-clock-events": ("gpuforge_nvidia_smi", "parse_clock_event_samples"),
    "dmesg-sxid": ("gpuforge_kernel", "parse_sxid_events"),
    "p2p": ("gpuforge_p2p", "parse_p2p"),
    "fio": ("gpuforge_fio", "parse_fio"),
    "semodule-list": ("gpuforge_selinux", "parse_semodule_list"),
    "systemctl-show": ("gpuforge_systemd", "parse_show"),
    "scontrol-show-node": ("gpuforge_slurm", "parse_show_node"),
    "mmlsconfig": ("gpuforge_spectrum_scale", "parse_mmlsconfig"),
    "mmlscluster-y": ("gpuforge_spectrum_scale", "parse_mmlscluster_y"),
    "mmgetstate-y": ("gpuforge_spectrum_scale", "parse_mmgetstate_y"),
    "mmlsmount": ("gpuforge_spectrum_scale", "parse_mmlsmount"),
}

# KIND -> what it reads (the command, and its flags), for `gpuforge parse --list`.
DESCRIPTIONS: dict[str, str] = {
    "nvidia-smi-xml": "nvidia-smi -q -x",
    "nvidia-smi-text": "nvidia-smi -q",
    "nvidia-smi-csv": "nvidia-smi --query-gpu=... --format=csv",
    "nvidia-smi-list": "nvidia-smi -L",
    "nvidia-smi-topo": "nvidia-smi topo -m",
    "nvlink-status": "nvidia-smi nvlink --status",
    "nvidia-smi-vgpu-license": "nvidia-smi -q (or its 'vGPU Software Licensed Product' section): vGPU licence",
    "nvidia-smi-vgpu-license-xml": "nvidia-smi -q -x: each GPU's <vgpu_software_licensed_product>",
    "nvlink-errors": "nvidia-smi nvlink -e (replay, recovery, CRC error counters per link)",
    "nvidia-smi-clock-events": "nvidia-smi --query-gpu=...clocks_event_reasons... --format=csv samples",
    "ibstat": "ibstat",
    "ibstatus": "ibstatus",
    "ibv-devinfo": "ibv_devinfo [-v]",
    "ibdev2netdev": "ibdev2netdev [-v]",
    "perfquery": "perfquery [-x] [-C hca -P port]: port counters (-x: 64-bit extended), one block per port",
    "sminfo": "sminfo [-G port_guid]: the SMInfo of the master SM (or of the SM at that port)",
    "mlnx-qos": "mlnx_qos -i <netdev>: DCBX mode, trust state, dscp2prio, PFC enabled/buffer rows, tc/priority map",
    "lsmod": "lsmod",
    "dmesg-xid": "kernel log: NVRM Xid lines",
    "dmesg-sxid": "kernel log: nvidia-nvswitch SXid lines",
    "lspci": "lspci -vvv -D: devices, LnkCap/LnkSta, ACSCtl",
    "pcie-aer-sysfs": "/sys/bus/pci/devices/*/aer_dev_{correctable,fatal,nonfatal}",
    "pcie-link-limited": "kernel log: 'PCIe bandwidth ... limited by' lines",
    "dcgmi-diag": "dcgmi diag -r N -j (DCGM 3.x and 4.x JSON)",
    "dcgmi-diag-table": "dcgmi diag -r N without -j: the text table (DCGM 3.x and 4.x)",
    "nvbandwidth": (
        "nvbandwidth -t ...: matrices, SUM and COEFFICIENT_OF_VARIATION lines; multinode runs (-p multinode): ranks, "
        "bisect pairs"
    ),
    "nccl-tests": "nccl-tests *_perf text output (legacy and 2.13+ tables)",
    "nccl-tests-json": "the file nccl-tests *_perf -J FILE writes (JSON_FILE_VERSION 1 to 3)",
    "ib-write-bw": "ib_write_bw (perftest) result table",
    "p2p": "CUDA samples p2pBandwidthLatencyTest",
    "fio": "fio --output-format=json",
    "resnet50": "benchmarks/resnet50/resnet50_bench.py output",
    "semodule-list": "semodule -l",
    "systemctl-show": "systemctl show --property=... UNIT...",
    "scontrol-show-node": "scontrol show node -o",
    "mmlsconfig": "mmlsconfig (IBM Storage Scale)",
    "mmlscluster-y": "mmlscluster -Y",
    "mmgetstate-y": "mmgetstate -Y",
    "mmlsmount": "mmlsmount all -L",
    "apt-simulate": "apt-get install --simulate",
    "dnf-transaction": "dnf install --assumeno",
}


def _registered() -> dict:
    """{kind: ((module, function), what it reads)} of the check registry's sources that name their parser
    (module_utils/gpuforge_registry.py SOURCES): a new check's parser is reachable here from its registry entry."""
    registry = collection_import("plugins.module_utils.gpuforge_registry")
    return {name: (source.parse, f"/{source.read}") for name, source in registry.SOURCES.items() if source.parse}


for _kind, (_parser, _reads) in _registered().items():
    PARSERS.setdefault(_kind, tuple(_parser))
    DESCRIPTIONS.setdefault(_kind, _reads)


class UnknownKind(ValueError):
    """The KIND is not in the registry."""


def resolve(kind: str) -> Callable[[str], object]:
    """The parser function for KIND (ImportError/AttributeError when the registry names a wrong one)."""
    try:
        module_name, function_name = PARSERS[kind]
    except KeyError:
        raise UnknownKind(f"unknown kind {kind!r}; known: {', '.join(sorted(PARSERS))}") from None
    module = collection_import(f"plugins.module_utils.{module_name}")
    function = getattr(module, function_name)
    if not callable(function):
        raise TypeError(f"{module_name}.{function_name} is not callable")
    return function


def listing() -> list[tuple[str, str, str]]:
    """(kind, module.function, what it reads) for every kind, sorted by kind."""
    return [
        (kind, f"{module}.{function}", DESCRIPTIONS.get(kind, ""))
        for kind, (module, function) in sorted(PARSERS.items())
    ]


def jsonable(value):
    """value with every dict key a string, as JSON writes it (None -> "null", 1 -> "1"), so the output can be
    printed with sorted keys (lspci's lines before the first device belong to the device None)."""
    if isinstance(value, dict):
        return {key if isinstance(key, str) else json.dumps(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    return value


def parse(kind: str, text: str):
    """Run the KIND parser over text. A parser error is gpuforge_errors.ParseError (a ValueError)."""
    return resolve(kind)(text)
