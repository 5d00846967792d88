"""Parser and judge for NVIDIA DCGM diagnostics, ``dcgmi diag -r <level> -j`` (stdlib only, Python 3.8).

Two JSON shapes are read (fixtures and their sources: tests/fixtures/dcgmi/SOURCES.md):

* DCGM 3.x - top key ``"DCGM GPU Diagnostic"``; ``test_categories[].tests[].results[]`` entries carry
  ``"gpu_id": "0"`` (a string; the older LWVS form ``"gpu_ids": "0,1,2,3"`` names several GPUs) and
  ``status`` (``Pass``/``Fail``/``Warn``/``Skip``), optionally ``warnings`` and ``info``
  (NVIDIA/DCGM issue 139, a DCGM 3.3.1 ``dcgmi diag -r 3 -j`` document).
* DCGM 4.x - top key ``"DCGM Diagnostic"`` (the rename is listed in DCGM's release notes, "Deprecations and
  breaking changes", and handled by facebookresearch/gcm PR 38); results name an entity
  (``entity_group`` ``"GPU"``, ``entity_group_id``, ``entity_id`` as an integer), each test has a
  ``test_summary`` {status, info, warnings}, and the document has ``entity_groups`` (device_id, serial_num)
  and ``metadata`` {version, "Driver Version Detected"} (NVIDIA/DCGM testing/python3/dcgm_diag_schema.json).
  ``warnings`` entries are objects {warning, error_id, error_category, error_severity}.

DCGM numbers GPUs as NVML does (the index ``nvidia-smi`` shows; ``dcgmi discovery -l`` prints both the
GPU ID and the PCI bus ID), so a result is tied to a board through the nvidia-smi facts' index -> bus_id.

``parse_diag_table`` reads the text table ``dcgmi diag -r N`` prints without ``-j`` (what operators paste into
tickets and what older runbooks keep) into the same shape, so ``judge_diag`` judges it alike. Its layout is
dcgmi's (NVIDIA/DCGM ``dcgmi/Diag.cpp``): rows ``| <name, 25 wide> | <result, 46 wide> |``, category rows
``|-----  Deployment  ---...|``, messages split into 45-character chunks on rows with an empty name.
DCGM 3.x (v3.3.8) prints one row per test, ``Pass - All`` or ``Fail - GPU: 0`` / ``Fail - GPUs: 0, 1`` (one row per
status), then ``Warning``/``Info`` rows whose text starts ``GPU <n>``; DCGM 4.x (v4.4.2) prints the test's
result, then a ``GPU<n>: <result>`` row per GPU and ``Warning: GPU<n>`` / ``Info: GPU<n>`` rows for that GPU.
"""

from __future__ import annotations

import json
import re

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import FAIL, PASS, WARN, node_check
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_units import to_integer

__all__ = [
    "ParseError",
    "judge_diag",
    "parse_diag",
    "parse_diag_table",
]

TOP_KEYS = {"DCGM GPU Diagnostic": "dcgm3", "DCGM Diagnostic": "dcgm4"}
# Statuses as dcgmi writes them, folded to one spelling (older builds wrote PASS/FAIL in capitals).
_STATUS = {"pass": "pass", "fail": "fail", "warn": "warn", "warning": "warn", "skip": "skip", "not run": "not_run"}
# What a test status does to the verdict: a failed test fails the node; a warning warns; a test that did not
# run is reported (a level-3 run where everything skipped is not a pass of the stress tests).
_FAILING = ("fail",)
_WARNING = ("warn",)


def _status(value) -> str:
    text = str(value or "").strip().lower()
    return _STATUS.get(text, text.replace(" ", "_") or "unknown")


def _messages(value) -> list:
    """warnings/info as a list of strings: entries may be strings or {warning|info|message: ...} objects."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    found = []
    for item in items:
        if isinstance(item, dict):
            text = item.get("warning") or item.get("info") or item.get("message")
            if text is None:
                continue
            code = item.get("error_id")
            found.append(f"{text} (DCGM error {code})" if isinstance(code, int) and code else str(text))
        elif str(item).strip():
            found.append(str(item).strip())
    return found


def _gpu_ids(result: dict, where: str) -> list:
    """The GPU ids one result entry covers ([] for a non-GPU entity: CPU, NVSwitch, ...)."""
    if "entity_id" in result:
        if str(result.get("entity_group", "GPU")) != "GPU":
            return []
        return [_int(result["entity_id"], where + ".entity_id")]
    if "gpu_id" in result:
        return [_int(result["gpu_id"], where + ".gpu_id")]
    if "gpu_ids" in result:
        text = str(result["gpu_ids"]).strip()
        return [_int(part, where + ".gpu_ids") for part in text.split(",") if part.strip()]
    raise ParseError(f"{where}: result names no GPU (no entity_id, gpu_id or gpu_ids)")


def _int(value, where: str) -> int:
    found = to_integer(value)
    if found is None:
        raise ParseError(f"{where}: {value!r} is not a GPU id")
    return found


def _document(text: str) -> dict:
    if not (text or "").strip():
        raise ParseError("empty output: dcgmi diag printed nothing (was -j given?)")
    start = text.find("{")
    if start < 0:
        first = text.strip().splitlines()[0][:200]
        raise ParseError(f"not JSON (dcgmi diag -j prints one JSON document): {first!r}")
    try:
        data = json.loads(text[start:])
    except ValueError as exc:
        raise ParseError(f"truncated or invalid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ParseError("top level is not a JSON object")
    return data


def parse_diag(text: str) -> dict:
    """Parse ``dcgmi diag -r N -j`` output.

    Returns {format (dcgm3|dcgm4), version, driver_version, runtime_error, tests: [{category, name, status,
    results: [{gpu, status, warnings, info}], warnings, info}], gpus: {gpu id: {test name: status}}}.
    A test's status is its test_summary status (4.x) or the worst of its GPUs' statuses (3.x).
    Statuses are lower case: pass, fail, warn, skip, not_run (another word is kept, lower case).
    """
    data = _document(text)
    key = next((k for k in TOP_KEYS if k in data), None)
    if key is None:
        raise ParseError(
            f"no 'DCGM GPU Diagnostic' (DCGM 3.x) or 'DCGM Diagnostic' (DCGM 4.x) object; keys: {sorted(data)[:8]}"
        )
    root = data[key]
    if not isinstance(root, dict):
        raise ParseError(f"{key!r} is not an object")
    metadata = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    runtime_error = root.get("runtime_error") or data.get("runtime_error")
    categories = root.get("test_categories")
    if categories is None:
        categories = []
    if not isinstance(categories, list):
        raise ParseError(f"{key}.test_categories is not a list")
    if not categories and not runtime_error:
        raise ParseError(f"{key} has no test_categories and no runtime_error")
    tests, gpus = [], {}
    for c, category in enumerate(categories):
        where = f"test_categories[{c}]"
        if not isinstance(category, dict) or not isinstance(category.get("tests"), list):
            raise ParseError(f"{where}: not an object with a tests list")
        for t, test in enumerate(category["tests"]):
            tests.append(_test(test, str(category.get("category") or ""), f"{where}.tests[{t}]"))
    for test in tests:
        for result in test["results"]:
            gpus.setdefault(result["gpu"], {})[test["name"]] = result["status"]
    return {
        "format": TOP_KEYS[key],
        "version": metadata.get("version") or metadata.get("DCGM Version"),
        "driver_version": metadata.get("Driver Version Detected"),
        "runtime_error": str(runtime_error) if runtime_error else None,
        "tests": tests,
        "gpus": gpus,
    }


_RANK = {"fail": 4, "warn": 3, "pass": 1}


def _worst(statuses) -> str:
    """The status that counts for a test from its GPUs' statuses: fail, then warn, then any other word, then pass."""
    return max(statuses, key=lambda s: _RANK.get(s, 2))


# --- the text table (dcgmi diag without -j) ---------------------------------------------------------------------
_ROW = re.compile(r"^\s*\|(?P<name>[^|]*)\|(?P<info>[^|]*)\|\s*$")
_CATEGORY = re.compile(r"^\s*[|+]-{5}\s+(?P<name>\S[^-|+]*?)\s+-*\+-+[|+]\s*$")
_RULE = re.compile(r"^\s*\+[-=]+\+[-=]+\+\s*$")
# DCGM 3.x: "Pass - All", "Fail - GPU: 0", "Warn - GPUs: 0, 1" (dcgmi/Diag.cpp, HelperDisplayGpuResults), or a
# deployment plugin's bare "Pass"/"Fail".
_STATUS_3 = re.compile(r"^(?P<status>Pass|Fail|Warn|Skip)(?: - (?:(?P<all>All)|GPUs?: (?P<gpus>[\d, ]+)))?\s*$")
# DCGM 4.x: "<entity group><id>: <result>" per entity; an empty result is a test that did not run there.
_ENTITY_4 = re.compile(r"^(?P<group>[A-Za-z_]+?)(?P<id>\d+):(?: (?P<status>Pass|Fail|Warn|Skip))?\s*$")
_MESSAGE = re.compile(r"^(?P<kind>Warning|Info|Error)(?:: (?P<group>[A-Za-z_]+?)(?P<id>\d+))?$")
_MESSAGE_GPU_3 = re.compile(r"^GPU (?P<id>\d+)\b")
_CHUNK = 45  # DATA_INFO_TAG_LEN: a message's characters per row


def _table_rows(text: str) -> list:
    """[(kind, name, info cell)] for the table's lines: kind is category, row; rules and other lines are left out."""
    rows = []
    for line in text.splitlines():
        category = _CATEGORY.match(line)
        if category:
            rows.append(("category", category.group("name").strip(), ""))
            continue
        if _RULE.match(line):
            continue
        row = _ROW.match(line)
        if row:
            rows.append(("row", row.group("name").strip(), row.group("info")))
    return rows


def parse_diag_table(text: str) -> dict:
    """Parse the text table of ``dcgmi diag -r N`` (DCGM 3.x or 4.x), into parse_diag's shape (format
    dcgm3-text or dcgm4-text). A DCGM 3.x result for "All" GPUs is tied to GPU ids 0..n-1 when the Metadata rows list
    n device IDs, and to no GPU otherwise (the test's status still counts). Output without a table is DCGM's own
    error (runtime_error: its first line), as when nv-hostengine is not running."""
    if not (text or "").strip():
        raise ParseError("empty output: dcgmi diag printed nothing")
    rows = _table_rows(text)
    if not rows:
        first = text.strip().splitlines()[0].strip()
        if first.startswith("{"):
            raise ParseError("JSON, not the text table: read it as dcgmi-diag (dcgmi diag -j)")
        if re.match(r"^(Error|Failed|Unable)\b", first):
            return {"format": "dcgm-text", "version": None, "driver_version": None, "runtime_error": first,
                    "tests": [], "gpus": {}}  # fmt: skip
        raise ParseError(f"no dcgmi diag table (rows '| name | result |'): {first[:200]!r}")
    metadata, tests = {}, []
    category = ""
    test = message = None
    entity_rows = False

    def close_message():
        nonlocal message
        if message is not None:
            target, key, chunks = message
            target[key].append("".join(chunks).strip())
            message = None

    def results_of(current: dict) -> dict:
        return {result["gpu"]: result for result in current["results"]}

    for kind, name, cell in rows:
        value = cell[1:].rstrip()
        if kind == "category":
            close_message()
            category = name
            continue
        if name == "Diagnostic" and value == "Result":
            continue
        if category == "Metadata":
            if name:
                metadata[name] = value.strip()
            continue
        if not name:
            entity = _ENTITY_4.match(value.strip())
            status_3 = _STATUS_3.match(value.strip())
            if entity and test is not None:
                close_message()
                entity_rows = True
                if entity.group("group") == "GPU":
                    status = _status(entity.group("status")) if entity.group("status") else "not_run"
                    test["results"].append({"gpu": int(entity.group("id")), "status": status, "warnings": [],
                                            "info": []})  # fmt: skip
            elif message is not None:
                message[2].append(cell[1 : 1 + _CHUNK])
            elif status_3 and status_3.group("gpus") and test is not None:
                test["statuses"].append(status_3)
            elif test is not None and value.strip():
                test["info"].append(value.strip())  # e.g. the Diagnostic's "Code: (...)" after "Warn - All"
            continue
        close_message()
        found = _MESSAGE.match(name)
        if found:
            if test is None:
                raise ParseError(f"a {found.group('kind')} row before any test: {value.strip()[:120]!r}")
            key = "info" if found.group("kind") == "Info" else "warnings"
            target = test
            if found.group("id") is not None and found.group("group") == "GPU":
                target = results_of(test).get(int(found.group("id")), test)
            message = (target, key, [cell[1 : 1 + _CHUNK]])
            continue
        status_3 = _STATUS_3.match(value.strip())
        test = {"category": category, "name": name, "status_text": value.strip(), "statuses": [status_3],
                "results": [], "warnings": [], "info": []}  # fmt: skip
        tests.append(test)
    close_message()
    device_ids = [part for part in metadata.get("GPU Device IDs Detected", "").split(",") if part.strip()]
    gpus = {}
    for current in tests:
        statuses = [found for found in current.pop("statuses") if found]
        text_status = current.pop("status_text")
        if not current["results"]:
            for found in statuses:
                ids = range(len(device_ids)) if found.group("all") else []
                if found.group("gpus"):
                    ids = [int(part) for part in found.group("gpus").replace(" ", "").split(",") if part]
                for gpu in ids:
                    current["results"].append({"gpu": gpu, "status": _status(found.group("status")),
                                               "warnings": [], "info": []})  # fmt: skip
            # DCGM 3.x names the GPU at the start of a Warning's text ("GPU 0 Error using CUDA API ...").
            by_gpu = results_of(current)
            for key in ("warnings", "info"):
                kept = []
                for text_line in current[key]:
                    named = _MESSAGE_GPU_3.match(text_line)
                    if named and int(named.group("id")) in by_gpu:
                        by_gpu[int(named.group("id"))][key].append(text_line)
                    else:
                        kept.append(text_line)
                current[key] = kept
        if entity_rows or not statuses:
            current["status"] = _status(text_status.split(" ")[0]) if text_status else "not_run"
        else:
            current["status"] = _worst(_status(f.group("status")) for f in statuses)
        for result in current["results"]:
            gpus.setdefault(result["gpu"], {})[current["name"]] = result["status"]
    if not tests:
        raise ParseError("the dcgmi diag table lists no test (only its Metadata rows)")
    return {
        "format": "dcgm4-text" if entity_rows else "dcgm3-text",
        "version": metadata.get("DCGM Version"),
        "driver_version": metadata.get("Driver Version Detected"),
        "runtime_error": None,
        "tests": tests,
        "gpus": gpus,
    }


def _test(test, category: str, where: str) -> dict:
    if not isinstance(test, dict) or not test.get("name"):
        raise ParseError(f"{where}: a test needs a name")
    results = test.get("results") or []
    if not isinstance(results, list):
        raise ParseError(f"{where}.results is not a list")
    parsed = []
    for r, result in enumerate(results):
        if not isinstance(result, dict) or "status" not in result:
            raise ParseError(f"{where}.results[{r}]: needs a status")
        for gpu in _gpu_ids(result, f"{where}.results[{r}]"):
            parsed.append(
                {
                    "gpu": gpu,
                    "status": _status(result["status"]),
                    "warnings": _messages(result.get("warnings")),
                    "info": _messages(result.get("info")),
                }
            )
    summary = test.get("test_summary") if isinstance(test.get("test_summary"), dict) else {}
    if summary.get("status"):
        status = _status(summary["status"])
    elif parsed:
        status = _worst(p["status"] for p in parsed)
    else:
        raise ParseError(f"{where}: test {test['name']!r} has neither results nor a test_summary status")
    return {
        "category": category,
        "name": str(test["name"]),
        "status": status,
        "results": parsed,
        "warnings": _messages(summary.get("warnings")),
        "info": _messages(summary.get("info")),
    }


def _bus_ids(gpus) -> dict:
    """{index: bus_id} from nvidia_smi facts' gpus (or any list of {index, bus_id})."""
    found = {}
    for gpu in gpus or []:
        if isinstance(gpu, dict) and gpu.get("index") is not None and gpu.get("bus_id"):
            try:
                found[int(gpu["index"])] = str(gpu["bus_id"])
            except (TypeError, ValueError):
                continue
    return found


def judge_diag(parsed: dict, level: int, gpus=None, allow_skip=True) -> dict:
    """The ``dcgm_diag`` check: fail when a test failed on a GPU (named by its PCI bus ID through ``gpus``,
    the nvidia-smi facts' list) or DCGM reported a runtime error; warn on warnings and, unless allow_skip,
    on tests that did not run. observed: {level, version, failed: [{test, gpu, bus_id, messages}],
    warned: [...], skipped: [test names], tests: {name: status}, per_gpu: {bus id or gpu<N>: {test: status}}}.
    """
    buses = _bus_ids(gpus)

    def board(gpu: int) -> str:
        return buses.get(gpu, f"GPU {gpu} (bus ID unknown: not in the nvidia-smi facts)")

    failed, warned = [], []
    for test in parsed["tests"]:
        for result in test["results"]:
            entry = {
                "test": test["name"],
                "gpu": result["gpu"],
                "bus_id": buses.get(result["gpu"]),
                "messages": result["warnings"] + result["info"],
            }
            if result["status"] in _FAILING:
                failed.append(entry)
            elif result["status"] in _WARNING:
                warned.append(entry)
        if test["status"] in _FAILING and not any(f["test"] == test["name"] for f in failed):
            failed.append({"test": test["name"], "gpu": None, "bus_id": None, "messages": test["warnings"]})
    skipped = sorted({t["name"] for t in parsed["tests"] if t["status"] in ("skip", "not_run")})
    observed = {
        "level": level,
        "version": parsed.get("version"),
        "runtime_error": parsed.get("runtime_error"),
        "failed": failed,
        "warned": warned,
        "skipped": skipped,
        "tests": {t["name"]: t["status"] for t in parsed["tests"]},
        "per_gpu": {buses.get(g, f"gpu{g}"): tests for g, tests in sorted(parsed["gpus"].items())},
    }
    expected = {"level": level, "every_test": "pass" + (" or skip" if allow_skip else "")}
    if parsed.get("runtime_error"):
        return node_check(
            "dcgm_diag",
            FAIL,
            observed,
            expected,
            f"DCGM diagnostic level {level} did not run: {parsed['runtime_error']}",
            "Read /var/log/nvidia-dcgm/nv-hostengine.log and nvvs.log; check that nv-hostengine runs "
            "(systemctl status nvidia-dcgm) and that no other process holds the GPUs, then rerun dcgmi diag",
        )
    if failed:
        named = "; ".join(
            f"{f['test']} on {board(f['gpu']) if f['gpu'] is not None else 'the node'}"
            + (f" ({f['messages'][0]})" if f["messages"] else "")
            for f in failed
        )
        return node_check(
            "dcgm_diag",
            FAIL,
            observed,
            expected,
            f"DCGM diagnostic level {level} failed: {named}",
            "Drain the node. Rerun 'dcgmi diag -r 3' on the named GPU (-i <id>) to confirm; a failed memory, "
            "pcie, diagnostic or stress test on the same board again means a hardware fault: reseat or replace the "
            "GPU (RMA with the dcgmi JSON and nvidia-bug-report.sh output). A software/deployment failure names "
            "its fix in the message (persistence mode, driver, permissions)",
        )
    if warned or (skipped and not allow_skip):
        parts = [f"{w['test']} warned on {board(w['gpu'])}" for w in warned]
        if skipped and not allow_skip:
            parts.append(f"not run: {', '.join(skipped)}")
        return node_check(
            "dcgm_diag",
            WARN,
            observed,
            expected,
            f"DCGM diagnostic level {level}: " + "; ".join(parts),
            "Read the warning text; a test that skips everywhere usually lacks its plugin (DCGM 4.x: install "
            "datacenter-gpu-manager-4-cuda<major> matching the driver's CUDA version) or runs without root",
        )
    return node_check("dcgm_diag", PASS, observed, expected)
