"""The vGPU guest's licence: parsed from nvidia-smi and judged (stdlib only, Python 3.8+).

A guest of NVIDIA vGPU (or a GPU passed through with a vGPU software licence) prints a "vGPU Software Licensed
Product" section per GPU in ``nvidia-smi -q``: "Product Name" (the licensed product, e.g. NVIDIA Virtual Compute
Server) and "License Status"; ``nvidia-smi -q -x`` holds the same in <vgpu_software_licensed_product> as
<licensed_product_name> and <license_status> (NVIDIA AI Enterprise documentation, "NVIDIA vGPU for Compute
Licensing", "Verifying the License Status of a Licensed NVIDIA vGPU for Compute Guest VM"; the real captures in
tests/fixtures/nvidia-smi-vgpu/SOURCES.md). The status strings are NVML's licence states as nvidia-smi and DCGM
print them: "Licensed" (with "(Expiry: <date> GMT)" when a lease has an expiry), "Unlicensed (Unrestricted)" (the
grace period: full speed for now), "Unlicensed (Restricted)" (performance reduced), "Unlicensed" (NVML API
Reference Guide, nvmlGridLicenseState / vGPU Enums; DCGM's DcgmVgpu string table). Only "Licensed" passes: an
unrestricted guest is still unlicensed and degrades when the grace period ends (NVIDIA AI Enterprise
documentation, same page: a 20-minute grace period for an unlicensed vGPU for Compute VM).
"""

from __future__ import annotations

import re

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import FAIL, PASS, node_check
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_smi_xml import document_root

__all__ = [
    "REMEDY",
    "judge_vgpu_license",
    "license_state",
    "parse_license_text",
    "parse_license_xml",
]

SECTION = "vGPU Software Licensed Product"
REMEDY = (
    "License the guest: /etc/nvidia/gridd.conf must set FeatureType (1 for an NVIDIA vGPU: the driver picks the "
    "licence from the vGPU type) and /etc/nvidia/ClientConfigToken/ must hold the client configuration token of the "
    "site's license server (a current .tok, mode 744); the guest must reach that server; then "
    "`systemctl restart nvidia-gridd` and read `nvidia-smi -q` (License Status: Licensed). The vgpu_guest role "
    "writes both from the inventory (vgpu_guest_feature_type, vgpu_guest_token_file); journalctl -u nvidia-gridd "
    "says why a lease was refused (NVIDIA Virtual GPU Client Licensing User Guide)"
)
_STATUS_RE = re.compile(r"^(?P<state>Licensed|Unlicensed)(?:\s*\((?P<detail>[^)]*)\))?\s*$", re.I)
_TEXT_GPU_RE = re.compile(r"^GPU (?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_FIELD_RE = re.compile(r"^\s+(?P<key>\S.*?)\s+:\s?(?P<value>.*)$")
_MISSING = {"", "N/A", "[N/A]"}


def license_state(product, status) -> dict | None:
    """One GPU's licence from the section's two values (None: the GPU prints no section, no vGPU software).

    {product, status (as printed), licensed (bool), restricted (True/False for Unlicensed (Restricted) /
    (Unrestricted), else None), expiry (the printed expiry, or None)}. A status that is neither Licensed nor
    Unlicensed raises ParseError (a driver that prints something new must not be read as licensed)."""
    if product is None and status is None:
        return None
    product = (product or "").strip() or None
    status = (status or "").strip()
    match = _STATUS_RE.match(status)
    if not match:
        raise ParseError(f"nvidia-smi: License Status {status!r} is neither 'Licensed' nor 'Unlicensed (...)'")
    detail = (match.group("detail") or "").strip()
    licensed = match.group("state").lower() == "licensed"
    expiry = None
    if licensed and detail.lower().startswith("expiry:"):
        expiry = detail.split(":", 1)[1].strip()
        expiry = None if expiry in _MISSING else expiry
    restricted = None
    if not licensed and detail:
        restricted = detail.lower() == "restricted"
    return {"product": product, "status": status, "licensed": licensed, "restricted": restricted, "expiry": expiry}


def parse_license_text(text: str) -> dict:
    """The licence of each GPU in `nvidia-smi -q` text: {driver_version, gpus: [{bus_id, product_name, license}]}.

    Reads a whole -q output and the excerpt bug reports quote (`nvidia-smi -q | grep -A2 'vGPU Software Licensed
    Product'`: the section without its GPU line, read as one GPU with bus_id None). A GPU without the section
    has license None (a bare-metal GPU without vGPU software). No GPU and no section: ParseError."""
    if not text or not text.strip():
        raise ParseError("nvidia-smi -q: empty output")
    driver = None
    gpus = []
    current = None
    section = None  # the indentation of the open licence section, or None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        gpu_line = _TEXT_GPU_RE.match(line)
        if gpu_line:
            current = {"bus_id": gpu_line.group("bus").upper(), "product_name": None, "license": None, "_raw": {}}
            gpus.append(current)
            section = None
            continue
        field = _FIELD_RE.match(line) or re.match(r"^(?P<key>\S.*?)\s+:\s?(?P<value>.*)$", line)
        indent = len(line) - len(line.lstrip(" "))
        if stripped == SECTION:
            if current is None:  # an excerpt without its GPU line
                current = {"bus_id": None, "product_name": None, "license": None, "_raw": {}}
                gpus.append(current)
            section = indent
            continue
        if section is not None and indent <= section:
            section = None
        if field is None:
            continue
        key, value = field.group("key").strip(), field.group("value").strip()
        if current is None and key == "Driver Version":
            driver = value
        elif current is not None and section is not None and key in ("Product Name", "License Status"):
            current["_raw"][key] = value
        elif current is not None and section is None and key == "Product Name" and indent <= 4:
            current["product_name"] = value
    if not gpus:
        raise ParseError(f"nvidia-smi -q: no GPU block and no '{SECTION}' section in the output")
    for gpu in gpus:
        values = gpu.pop("_raw")
        if values:
            gpu["license"] = license_state(values.get("Product Name"), values.get("License Status"))
    return {"driver_version": driver, "gpus": gpus}


def parse_license_xml(text: str) -> dict:
    """The licence of each GPU in `nvidia-smi -q -x`, in parse_license_text's shape."""
    root = document_root(text)
    gpus = []
    for node in root.findall("gpu"):
        section = node.find("vgpu_software_licensed_product")
        lic = None
        if section is not None:
            lic = license_state(section.findtext("licensed_product_name"), section.findtext("license_status"))
        bus = node.get("id")
        gpus.append(
            {"bus_id": bus.upper() if bus else None, "product_name": node.findtext("product_name"), "license": lic}
        )
    return {"driver_version": root.findtext("driver_version"), "gpus": gpus}


def judge_vgpu_license(sources: dict, expected: dict) -> dict:
    """The vgpu_license check, on a node whose expected system is a vGPU guest (expected.vgpu_guest true): every GPU
    of sources["nvidia_smi"] (parse_query_xml/-text's shape, each GPU's ``vgpu_license`` from license_state) must
    be Licensed. A guest GPU that prints no licence section, or nvidia-smi that could not be read, fails too."""
    from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_registry import Unreadable

    wanted = {"vgpu_guest": bool(expected.get("vgpu_guest")), "license_status": "Licensed"}
    if not wanted["vgpu_guest"]:
        return node_check("vgpu_license", PASS, {"vgpu_guest": False}, wanted)
    smi = sources.get("nvidia_smi")
    gpus = smi.get("gpus") if isinstance(smi, dict) else None
    if isinstance(smi, Unreadable) or not gpus:
        reason = str(smi) if isinstance(smi, Unreadable) else "nvidia-smi reported no GPU"
        fix = "Read nvidia-smi -q -x on the node (the guest driver must be installed and loaded)"
        return node_check("vgpu_license", FAIL, None, wanted, f"vGPU licence unknown: {reason}", fix)
    observed, bad = {}, []
    for gpu in gpus:
        label = f"GPU {gpu.get('index')} ({gpu.get('bus_id')})"
        lic = gpu.get("vgpu_license")
        observed[str(gpu.get("index"))] = lic
        if not lic:
            bad.append(f"{label} prints no '{SECTION}' section (not the vGPU guest driver?)")
        elif not lic.get("licensed"):
            bad.append(f"{label}: {lic.get('product') or 'licensed product unknown'}: {lic.get('status')}")
    if bad:
        return node_check("vgpu_license", FAIL, observed, wanted, "vGPU guest not licensed: " + "; ".join(bad), REMEDY)
    return node_check("vgpu_license", PASS, observed, wanted)
