"""`gpuforge parse KIND FILE`: the module_utils parsers, reachable from the CLI.

The parsers are imported by their collection path (gpuforge.paths.collection_import), as the modules import them;
everything else in the CLI asks `parse()` or `resolve()` here.
"""

from __future__ import annotations

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
    "ibstat": ("gpuforge_infiniband", "parse_ibstat"),
    "ibstatus": ("gpuforge_infiniband", "parse_ibstatus"),
    "ibv-devinfo": ("gpuforge_infiniband", "parse_ibv_devinfo"),
    "ibdev2netdev": ("gpuforge_infiniband", "parse_ibdev2netdev"),
    "lsmod": ("gpuforge_kernel", "parse_lsmod"),
    "dmesg-xid": ("gpuforge_kernel", "parse_xid_events"),
    "nccl-tests": ("gpuforge_nccl_tests", "parse_nccl_tests"),
    "ib-write-bw": ("gpuforge_perftest", "parse_perftest_bw"),
    "resnet50": ("gpuforge_resnet50", "parse_resnet50"),
    "apt-simulate": ("gpuforge_package_closure", "parse_apt_simulate"),
    "dnf-transaction": ("gpuforge_package_closure", "parse_dnf_transaction"),
}


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


def parse(kind: str, text: str):
    """Run the KIND parser over text. Parser errors are ValueError subclasses (each module's ParseError)."""
    return resolve(kind)(text)
