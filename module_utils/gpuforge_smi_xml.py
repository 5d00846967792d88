"""The root element of an ``nvidia-smi -q -x`` document, read safely: the one reader the nvidia-smi parsers share
(GPU facts, the vGPU licence, the processes gpuforge-health's Epilog checks).

Stdlib only, Python 3.8+.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError

__all__ = ["document_root"]


def document_root(text: str):
    """The <nvidia_smi_log> element of text; ParseError when there is none, when the document declares entities
    (nvidia-smi never does; refusing them keeps entity expansion out of a parser fed from a node) or when it is not
    well-formed (a run cut short by a timeout)."""
    if not text or "<nvidia_smi_log" not in text:
        raise ParseError("nvidia-smi -q -x: no <nvidia_smi_log> document in the output")
    if "<!ENTITY" in text:
        raise ParseError("nvidia-smi -q -x: refusing XML that declares entities")
    try:
        root = ET.fromstring(text.strip())
    except ET.ParseError as exc:
        raise ParseError(f"nvidia-smi -q -x: not well-formed XML ({exc}); output truncated?") from exc
    if root.tag != "nvidia_smi_log":
        raise ParseError(f"nvidia-smi -q -x: root element is <{root.tag}>, expected <nvidia_smi_log>")
    return root
