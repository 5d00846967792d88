"""PCIe inputs of a simulated lab node: the lab's lspci (which also writes the node's sysfs tree) read the way
gpu_node_check reads a real node (library/gpu_node_check.pcie_inputs, sysfs_pkeys)."""

from __future__ import annotations

import contextlib
import io

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_pcie import parse_lspci
from ansible_collections.gpuforge.cluster.plugins.modules import gpu_node_check
from gpuforge_sim import lspci


def lspci_output(*argv: str) -> str:
    """stdout of the lab's lspci run in-process (the hardware document of the current SimNode)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert lspci.main(list(argv)) == 0
    return out.getvalue()


def pcie_inputs(nvidia_smi: dict, log: str) -> dict:
    """judge_node's `pcie` input for the SimNode whose environment is set: lspci -vvv -D, then its sysfs."""
    text = lspci_output("-vvv", "-D")
    return gpu_node_check.pcie_inputs(parse_lspci(text), log, lspci.sysfs_root(), nvidia_smi)


def pkeys() -> dict:
    lspci_output()
    return gpu_node_check.sysfs_pkeys(lspci.sysfs_root())
