"""The files validate.yml writes on the controller, from what every node's gpu_node_check returned.

``validation/<host>.json`` holds the node's records as gpu_node_check returned them, plus its ``fleet_consistency``
record (gpuforge_records.fleet_check_record of its system's fleet check), and the node's verdict over those records
(gpuforge_records.node_verdicts, the one verdict function); ``validation/{dcgm,nvbandwidth,gdr}/<host>.json`` hold
the raw results of the diagnostics that ran. validate.yml's summary and its assert read ``verdicts`` from here too,
so the file, the assert and the report agree.
"""

from __future__ import annotations

import json

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_records import (
    SCHEMA_VERSION,
    fleet_check_record,
    node_check_record,
    node_verdicts,
)

# What each diagnostic's file keeps of its result (gpu_node_check RETURN diagnostics; see the modules dcgm_diag,
# nvbandwidth and gdr_loopback_bw).
DIAGNOSTIC_KEYS = {
    "dcgm": ("checked_at", "ran", "healthy", "check", "dcgm"),
    "nvbandwidth": ("checked_at", "ran", "healthy", "check", "nvbandwidth"),
    "gdr": ("checked_at", "applicable", "reason", "ran", "healthy", "plan", "unplanned", "check"),
}


def _get(mapping, key, default=None):
    """mapping[key] or default: hostvars entries are mappings that template on access (no role defaults there)."""
    try:
        return mapping.get(key, default)
    except (AttributeError, TypeError):
        return default


def validation_documents(results: dict, fleet=None, dcgm=None) -> dict:
    """{"documents": {relative path: document}, "verdicts": {host: node_verdicts entry}}.

    results: {host: its gpu_node_check result}; fleet: the fleet_consistency result (``checks``: {system: check});
    dcgm: {host: {"enabled": bool, "level": int}} - with DCGM on and no DCGM result (a SKU DCGM does not support),
    the dcgm file records it as not run.
    """
    documents, verdicts = {}, {}
    fleet_checks = dict(_get(fleet or {}, "checks") or {})
    for host in sorted(results):
        result = results[host]
        if result.get("failed") or not isinstance(result.get("records"), list):
            continue  # its check task failed: no file, no verdict (validate.yml names it "no result")
        system = result.get("system")
        checked_at = result.get("checked_at")
        records = [dict(record) for record in result["records"]]
        if system in fleet_checks:
            records.append(fleet_check_record(fleet_checks[system], host, system, checked_at))
        verdict = node_verdicts(records)[host]
        verdicts[host] = verdict
        documents[f"{host}.json"] = {
            "schema_version": SCHEMA_VERSION,
            "host": host,
            "system": system,
            "checked_at": checked_at,
            "verdict": verdict,
            "records": records,
        }
        ran = result.get("diagnostics") or {}
        setting = (dcgm or {}).get(host) or {}
        if "dcgm" in ran or setting.get("enabled"):
            outcome = ran.get("dcgm") or {"checked_at": checked_at, "ran": False, "healthy": True}
            document = {"host": host, "level": setting.get("level")}
            document.update({key: outcome.get(key) for key in DIAGNOSTIC_KEYS["dcgm"]})
            documents[f"dcgm/{host}.json"] = document
        for name in ("nvbandwidth", "gdr"):
            if name in ran:
                document = {"host": host}
                document.update({key: ran[name].get(key) for key in DIAGNOSTIC_KEYS[name]})
                documents[f"{name}/{host}.json"] = document
    return {"documents": documents, "verdicts": verdicts}


def gpuforge_validation_files(hosts, directory, fleet=None, dcgm_enabled=True, dcgm_level=1) -> dict:
    """{{ ansible_play_hosts | map('extract', hostvars) | gpuforge_validation_files(dir, fleet, dcgm, level) }}.

    {"directories": [...], "files": [...] (managed_files' options), "verdicts": {host: verdict}, "summary": [one line
    per host]}; a host's own
    gpuforge_validate_dcgm and gpuforge_dcgm_level win over the play's (dcgm_enabled, dcgm_level)."""
    results, dcgm = {}, {}
    for node in hosts:
        host = _get(node, "inventory_hostname")
        results[host] = dict(_get(node, "gpuforge_node_check") or {})
        enabled = _get(node, "gpuforge_validate_dcgm", dcgm_enabled)
        dcgm[host] = {
            "enabled": str(enabled).lower() in ("true", "yes", "1", "on"),
            "level": int(_get(node, "gpuforge_dcgm_level", dcgm_level)),
        }
    built = validation_documents(results, fleet, dcgm)
    files = [
        {"path": f"{directory}/{path}", "mode": "0644", "content": json.dumps(doc, indent=4, sort_keys=True) + "\n"}
        for path, doc in sorted(built["documents"].items())
    ]
    folders = sorted({file["path"].rsplit("/", 1)[0] for file in files})
    return {
        "directories": [{"path": folder, "mode": "0755"} for folder in folders],
        "files": files,
        "verdicts": built["verdicts"],
        "summary": [summary_line(host, verdict) for host, verdict in sorted(built["verdicts"].items())],
    }


def summary_line(host, verdict) -> str:
    """``gpu01 | PASS``, ``gpu02 | WARN: check throttle``, ``gpu03 | FAIL: ecc_volatile_dbe (caused: gpu_count)``."""
    if verdict["verdict"] == "FAIL":
        caused = f" (caused: {', '.join(verdict['caused_failures'])})" if verdict["caused_failures"] else ""
        return f"{host} | FAIL: {', '.join(verdict['failed_checks'])}{caused}"
    flagged = [reason["what"] for reason in verdict["reasons"]]
    return f"{host} | {verdict['verdict']}" + (f": {', '.join(flagged)}" if flagged else "")


def gpuforge_node_check_records(checks, node, system=None, checked_at=None) -> list:
    """{{ smoke.checks | gpuforge_node_check_records(inventory_hostname, system) }}: the node_check record of each
    judged check (gpuforge_records.node_check_record), for a producer that returns checks (container_gpu_smoke)."""
    return [node_check_record(dict(check), node, system, checked_at) for check in checks or []]


class FilterModule:
    def filters(self):
        return {
            "gpuforge_node_check_records": gpuforge_node_check_records,
            "gpuforge_validation_files": gpuforge_validation_files,
        }
