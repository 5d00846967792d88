"""Judge one GPU node against its expected hardware spec (pure functions, stdlib only).

Inputs are already-parsed facts: the `nvidia_smi` and `infiniband` dicts of the nvidia_smi_facts and
infiniband_facts modules, a parse_lsmod() result, a parse_xid_events() and a parse_sxid_events() list
(gpuforge_kernel) and the state of the nvidia-fabricmanager service.
The expected spec is checked first (check_expected: OptionError naming the key for a malformed one);
facts with a malformed field give a failed `*_readable` check naming the field, never an exception.
Every check is {name, status: PASS|WARN|FAIL, observed, expected, fault, remedy, caused_by}; check names are
a stable interface (docs: library/gpu_node_check.py RETURN). judge_node returns them with their node_check
records and the node's verdict (gpuforge_records.node_report, which reads gpuforge_records.node_verdicts). GPUs
are named by PCI bus ID (and serial where the board has one), never by index alone. A check that fails only
because another one failed (the count of GPUs when one fell off the bus, the Xid 79 that reports it) names that
check in caused_by and is left out of the verdict's failed_checks, so one fault counts once.
"""

from __future__ import annotations

import re

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import FAIL, PASS, WARN, node_check
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import OptionError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_kernel import ACTION_REMEDIES, xid_action
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_options import (
    anything,
    boolean,
    integer,
    list_of,
    mapping_of,
    number,
    record,
    string,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_pcie import (
    acs_enabled,
    aer_total,
    link_degraded,
    pci_address,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_perfquery import judge_link_flaps
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_records import node_report
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_registry import (
    CHECKS,
    EXPECTED_KINDS,
    LINK_LAYERS,
    numa_affinity,
)

__all__ = ["CHECK_NAMES", "EXPECTED", "LINK_LAYERS", "check_expected", "judge_node", "numa_affinity"]

# The checks judge_node emits, and the spec keys they read: from the check registry (gpuforge_registry).
CHECK_NAMES = tuple(name for check in CHECKS if check.judge is None for name in check.names)

# Clock event reasons that mean the hardware is protecting itself (not a software cap or idle clocks),
# judged by the share of samples they were active in (clock_event_reasons in the spec overrides this).
BAD_THROTTLE = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
# Xid action classes (gpuforge_kernel.XID_ACTIONS) that fail a node; the others warn, `ignore` is ok.
XID_FAIL_ACTIONS = ("reset_gpu", "reboot", "contact_vendor", "check_mechanicals", "update_software")
# A failing Xid of these codes is the kernel's report of a fault another check already failed on the same
# GPU: that check is its root cause (catalogue: 79 off the bus; 48/94/95 ECC; 63/64 remapping; NVLink).
XID_SYMPTOM_OF = {
    79: ("gpu_fallen_off_bus",),
    48: ("ecc_volatile_dbe", "ecc_aggregate", "row_remap"),
    94: ("ecc_volatile_dbe", "ecc_aggregate"),
    95: ("ecc_volatile_dbe", "ecc_aggregate"),
    63: ("row_remap",),
    64: ("row_remap",),
    74: ("nvlink_active", "nvlink_errors"),
}
PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")
FALLEN_OFF_MARKERS = ("fallen off the bus", "unable to determine the device handle")
# topo -m codes for a path that stays on one CPU socket (SYS crosses the inter-socket link).
SAME_SOCKET_CODES = ("PIX", "PXB", "PHB", "NODE")


# The expected spec: a SKU entry merged with a system entry and the global thresholds, so keys no check reads
# (gpu_sku, memory_mib, ...) are kept unchecked; the keys the registered checks read are coerced.
EXPECTED = record(EXPECTED_KINDS, extra=True)


def check_expected(expected) -> dict:
    """The expected spec with its values coerced ("8" -> 8, "no" -> False); OptionError names a malformed
    key, and a port link that expected.link_speeds does not define."""
    spec = EXPECTED("expected", expected)
    speeds = spec.get("link_speeds") or {}
    for h, hca in enumerate(spec.get("hcas") or []):
        for p, port in enumerate(hca.get("ports") or []):
            link = port.get("link")
            if link is not None and link not in speeds:
                known = ", ".join(sorted(speeds)) or "none given"
                raise OptionError(
                    f"expected.hcas[{h}].ports[{p}].link", f"{link!r} is not a key of expected.link_speeds ({known})"
                )
    return spec


def _facts_kinds(note):
    """Kinds for the fact fields the checks read (nvidia_smi, infiniband). A malformed field is handed to
    note and left out, so the checks see it as unknown and `*_readable` fails naming it."""

    def rec(fields, required=()):
        return record(fields, required=required, extra=True, on_error=note)

    count = integer(minimum=0)
    memory = {name: count for name in ("sram_correctable", "sram_uncorrectable", "dram_correctable")}
    memory["dram_uncorrectable"] = count
    gpu = rec(
        {
            "index": integer(minimum=0),
            "bus_id": string(numbers=True),
            "serial": string(numbers=True),
            "product_name": string(numbers=True),
            "persistence_mode": string(),
            "ecc": rec(
                {
                    "mode_current": string(),
                    "volatile": rec({"uncorrected": count}),
                    "aggregate": rec({**memory, "sram_threshold_exceeded": boolean()}),
                }
            ),
            "remapped_rows": rec(
                {"pending": boolean(), "failure": boolean(), "correctable": count, "uncorrectable": count}
            ),
            "retired_pages": rec({"single_bit": count, "double_bit": count, "pending": boolean()}),
            "pcie": rec({name: count for name in ("gen_max", "gen_current", "width_max", "width_current")}),
            "throttle_reasons": mapping_of(boolean(), on_error=note),
            "nvlink": rec({"active_links": count}),
            "nvlink_errors": list_of(rec({"link": count}, ("link",)), on_error=note),
            "clock_events": rec({"samples": count, "active": mapping_of(count, on_error=note)}),
            "numa_affinity": string(numbers=True),
            "fabric_state": string(),
            "fabric_status": string(),
            "nics": mapping_of(string(), key=string(numbers=True), on_error=note),
        }
    )
    port = rec(
        {
            "port": count,
            "state": string(),
            "phys_state": string(),
            "rate_gbit_per_s": number(minimum=0),
            "link_layer": string(),
        }
    )
    hca = rec({"name": string(numbers=True, nonempty=True), "ports": list_of(port, on_error=note)}, ("name",))
    errors = list_of(anything())
    lost = list_of(rec({"bus_id": string(numbers=True), "message": string()}), on_error=note)
    smi = rec(
        {
            "driver_version": string(numbers=True),
            "errors": errors,
            "gpus": list_of(gpu, on_error=note),
            "unreachable_gpus": lost,
        }
    )
    ib = rec({"errors": errors, "hcas": list_of(hca, on_error=note)})
    return smi, ib


def _clean_facts(nvidia_smi, infiniband):
    """(nvidia_smi, infiniband, problems of each): facts with malformed fields left out; None when not a dict."""
    smi_problems: list = []
    ib_problems: list = []
    smi_kind = _facts_kinds(lambda exc: smi_problems.append(str(exc)))[0]
    ib_kind = _facts_kinds(lambda exc: ib_problems.append(str(exc)))[1]
    smi = smi_kind("nvidia_smi", nvidia_smi) if isinstance(nvidia_smi, dict) else None
    ib = ib_kind("infiniband", infiniband) if isinstance(infiniband, dict) else None
    return smi, ib, smi_problems, ib_problems


def _sorted(keys):
    """Sorted GPU indices or names even when facts mix types (None, int, str) without raising."""
    return sorted(keys, key=lambda key: (0, key, "") if isinstance(key, int) else (1, 0, str(key)))


def _d(value):
    """value when it is a dict, else {} (malformed facts must not raise)."""
    return value if isinstance(value, dict) else {}


def gpu_key(gpu) -> str:
    """The name a GPU goes by in observed values: its PCI bus ID (GPU<index> only when there is none)."""
    bus = gpu.get("bus_id")
    return str(bus) if bus else f"GPU{gpu.get('index')}"


def _gpu_name(gpu) -> str:
    """Bus ID, index and serial of a board, for fault messages: 00000000:0A:00.0 (GPU 2, serial 0321...)."""
    extra = [f"GPU {gpu.get('index')}"] if gpu.get("index") is not None else []
    if gpu.get("serial"):
        extra.append(f"serial {gpu.get('serial')}")
    return f"{gpu_key(gpu)} ({', '.join(extra)})" if extra else gpu_key(gpu)


def bus_key(bus):
    """Domain:bus:device of a PCI address in one spelling: 00000000:0A:00.0 and 0000:0a:00 -> 0000:0a:00."""
    match = re.search(r"([0-9a-fA-F]+):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})", str(bus or ""))
    if not match:
        return None
    return f"{int(match.group(1), 16):04x}:{match.group(2).lower()}:{match.group(3).lower()}"


def _by_gpu(gpus, select):
    """{bus id: value} for GPUs where select(gpu) returns something truthy."""
    found = {}
    for gpu in gpus:
        value = select(gpu)
        if value:
            found[gpu_key(gpu)] = value
    return found


def _named(found, gpus):
    """The boards of a _by_gpu result, named for a fault message."""
    names = {gpu_key(g): _gpu_name(g) for g in gpus}
    return ", ".join(names.get(key, str(key)) for key in _sorted(found))


def _readable(name, facts, what, remedy, malformed=()):
    if not isinstance(facts, dict):
        return node_check(name, FAIL, None, "facts", f"could not read {what}: no facts were given", remedy)
    errors = [str(e) for e in facts.get("errors") or []]
    if errors:
        return node_check(name, FAIL, errors, [], f"could not read all of {what}: {'; '.join(errors)[:400]}", remedy)
    if malformed:
        fault = f"{what} hold malformed values, left out of the checks: {'; '.join(malformed)[:400]}"
        remedy = f"Pass the facts the module gathers, unchanged. {remedy}"
        return node_check(name, FAIL, list(malformed), [], fault, remedy)
    return node_check(name, PASS, [], [])


def _gpu_checks(smi, expected):
    gpus = [g for g in smi.get("gpus") or [] if isinstance(g, dict)]
    errors = " ".join(str(e) for e in smi.get("errors") or []).lower()
    lost = [g for g in smi.get("unreachable_gpus") or [] if isinstance(g, dict)]
    checks = []
    want_count = expected.get("gpu_count")
    count = len(gpus)
    # nvidia-smi still counts a GPU that fell off the bus as present: missing only because it fell off.
    short_by_lost = want_count is not None and count < want_count and count + len(lost) >= want_count
    checks.append(
        node_check(
            "gpu_count",
            PASS if want_count is None or count == want_count else FAIL,
            count,
            want_count,
            f"nvidia-smi lists {count} GPU(s), the spec has {want_count}",
            "Check lspci -d 10de: and the kernel log for missing boards (Xid 79); reseat or RMA the GPU",
            caused_by="gpu_fallen_off_bus" if short_by_lost else None,
        )
    )
    models = sorted({g.get("product_name") for g in gpus if g.get("product_name")})
    want_model = expected.get("gpu_model")
    checks.append(
        node_check(
            "gpu_model",
            PASS if want_model is None or models == [want_model] else FAIL,
            models,
            want_model,
            f"GPU model(s) {models or 'none readable'} instead of {want_model}",
            "Fix the node's gpuforge_expected_system or the hardware inventory",
        )
    )
    fallen = [str(g.get("bus_id")) for g in lost] or (
        ["bus ID not given"] if any(marker in errors for marker in FALLEN_OFF_MARKERS) else []
    )
    checks.append(
        node_check(
            "gpu_fallen_off_bus",
            FAIL if fallen else PASS,
            fallen,
            [],
            f"nvidia-smi cannot reach GPU(s) {', '.join(fallen)} (fallen off the bus / no device handle); "
            "the other GPUs were read and judged",
            "Drain the node, look for Xid 79 on that bus in the kernel log, then power-cycle the node "
            "(a warm reset does not bring the board back); reseat or RMA the GPU if it falls off again",
        )
    )
    branch = expected.get("driver_branch")
    driver = smi.get("driver_version")
    observed_branch = str(driver).split(".", 1)[0] if driver else None
    checks.append(
        node_check(
            "driver_branch",
            PASS if branch is None or observed_branch == str(branch) else FAIL,
            driver,
            None if branch is None else str(branch),
            f"driver {driver or 'unreadable'} is not on branch {branch}",
            "Install the expected branch with the gpuforge_nvidia_driver role and reboot",
        )
    )
    if expected.get("persistence_mode", True):
        off = _by_gpu(gpus, lambda g: g.get("persistence_mode") != "Enabled" and (g.get("persistence_mode") or "?"))
        checks.append(
            node_check(
                "persistence_mode",
                FAIL if off else PASS,
                off,
                "Enabled",
                f"persistence mode not enabled on {_named(off, gpus)}",
                "Enable and start nvidia-persistenced",
            )
        )
    if expected.get("ecc", True):
        off = _by_gpu(gpus, lambda g: _d(g.get("ecc")).get("mode_current") != "Enabled" and "not Enabled")
        checks.append(
            node_check(
                "ecc_enabled",
                FAIL if off else PASS,
                off,
                "Enabled",
                f"ECC not enabled on {_named(off, gpus)}",
                "nvidia-smi -e 1 on those GPUs, then reboot",
            )
        )
    dbe = _by_gpu(gpus, lambda g: _d(_d(g.get("ecc")).get("volatile")).get("uncorrected") or 0)
    checks.append(
        node_check(
            "ecc_volatile_dbe",
            FAIL if dbe else PASS,
            dbe,
            0,
            f"volatile uncorrectable (double-bit) ECC errors on {_named(dbe, gpus)}",
            "Drain the node and reset the GPU (nvidia-smi -r) or reboot; RMA if they come back",
        )
    )
    if expected.get("ecc", True):
        checks.append(_ecc_aggregate_check(gpus, expected))
    checks.append(_row_remap_check(gpus, expected))
    limit = expected.get("retired_pages_max")

    def retired(gpu):
        pages = _d(gpu.get("retired_pages"))
        total = (pages.get("single_bit") or 0) + (pages.get("double_bit") or 0)
        over = limit is not None and total >= limit
        return f"{total} retired" if over else (f"{total} retired, pending" if pages.get("pending") else "")

    bad_pages = _by_gpu(gpus, retired)
    checks.append(
        node_check(
            "retired_pages",
            FAIL if bad_pages else PASS,
            bad_pages,
            f"< {limit}, none pending" if limit is not None else "none pending",
            f"page retirement over limit or pending on {_named(bad_pages, gpus)}",
            "Reset the GPU to apply pending retirements; at the limit the board must be replaced",
        )
    )

    def pcie(gpu):
        link = _d(gpu.get("pcie"))
        gen_max = expected.get("pcie_gen_max") or link.get("gen_max")
        width_max = expected.get("pcie_width_max") or link.get("width_max")
        gen, width = link.get("gen_current"), link.get("width_current")
        # The link drops its generation when idle (power saving); width never should.
        if width is None or width_max is None or width < width_max or (link.get("gen_max") or 0) < (gen_max or 0):
            return f"Gen{gen} x{width} (max Gen{link.get('gen_max')} x{link.get('width_max')})"
        return ""

    degraded = _by_gpu(gpus, pcie)
    checks.append(
        node_check(
            "pcie_link",
            FAIL if degraded else PASS,
            degraded,
            f"Gen{expected.get('pcie_gen_max')} x{expected.get('pcie_width_max')}",
            f"PCIe link below its maximum on {_named(degraded, gpus)}",
            "Reseat the GPU/riser and check the slot; compare lspci -vv LnkSta with LnkCap",
        )
    )
    checks.append(_throttle_check(gpus, expected))
    links = expected.get("nvlink_links") or 0
    if links:
        checks += _nvlink_checks(gpus, links, expected, isinstance(smi.get("nvlink"), dict))
    return checks


def _ecc_aggregate_check(gpus, expected):
    """Lifetime SRAM/DRAM ECC counts (Ampere+) against the spec's limits; SRAM Threshold Exceeded fails."""
    limits = {
        "sram_uncorrectable": expected.get("sram_uncorrectable_max"),
        "sram_correctable": expected.get("sram_correctable_max"),
        "dram_correctable": expected.get("dram_errors_max"),
        "dram_uncorrectable": expected.get("dram_errors_max"),
    }

    def over(gpu):
        aggregate = _d(_d(gpu.get("ecc")).get("aggregate"))
        found = [
            f"{name} {aggregate.get(name)} > {limit}"
            for name, limit in limits.items()
            if limit is not None and aggregate.get(name) is not None and aggregate.get(name) > limit
        ]
        if aggregate.get("sram_threshold_exceeded"):
            found.append("SRAM threshold exceeded")
        return ", ".join(found)

    bad = _by_gpu(gpus, over)
    return node_check(
        "ecc_aggregate",
        FAIL if bad else PASS,
        bad,
        {f"{name}_max": limit for name, limit in limits.items() if limit is not None},
        f"lifetime (aggregate) ECC errors over the limit on {_named(bad, gpus)}",
        "Drain the node and RMA the board: SRAM uncorrectable errors or a high SRAM/DRAM error count mean "
        "failing memory (collect nvidia-bug-report.sh for the case)",
    )


def _row_remap_check(gpus, expected):
    """Row remapper state (Ampere+; NVIDIA "NVIDIA A100 GPU Memory Error Management"): a pending remap
    needs a GPU reset to take effect, a remapping failure means a bank ran out of spare rows (replace the
    board), and remaps caused by uncorrectable errors over the limit mean the board is wearing out."""
    limit = expected.get("remap_uncorrectable_max")
    remedies = {
        "pending": "reset the GPU (nvidia-smi -r -i <bus id>) or reboot so the pending remap takes effect",
        "failure": "RMA the board: a row remapping failed (no spare row left in a bank)",
        "uncorrectable": "RMA the board: it has more uncorrectable-error remaps than the limit",
    }
    kinds = set()

    def state(gpu):
        rows = _d(gpu.get("remapped_rows"))
        found = []
        if rows.get("pending"):
            found.append("pending")
        if rows.get("failure"):
            found.append("failure")
        unc = rows.get("uncorrectable")
        if limit is not None and unc is not None and unc > limit:
            found.append(f"{unc} uncorrectable remaps > {limit}")
        kinds.update("uncorrectable" if f.endswith(f"> {limit}") else f for f in found)
        return ", ".join(found)

    remap = _by_gpu(gpus, state)
    return node_check(
        "row_remap",
        FAIL if remap else PASS,
        remap,
        "none pending or failed" + (f", uncorrectable remaps <= {limit}" if limit is not None else ""),
        f"row remapping pending/failed/over the limit on {_named(remap, gpus)}",
        "Drain the node; " + "; ".join(remedies[k] for k in ("pending", "failure", "uncorrectable") if k in kinds),
    )


def _throttle_check(gpus, expected):
    """HW slowdown / thermal / power brake judged on the share of clock-event samples they were active in,
    not on one reading (a GPU passes through them briefly under load)."""
    reasons = expected.get("clock_event_reasons") or list(BAD_THROTTLE)
    limit = expected.get("clock_event_max_fraction")
    limit = 0.1 if limit is None else limit
    need = expected.get("clock_event_min_samples") or 1
    sampled = [g for g in gpus if _d(g.get("clock_events")).get("samples")]
    over, seen, short = {}, {}, {}
    for gpu in sampled:
        events = _d(gpu.get("clock_events"))
        samples = events.get("samples") or 0
        if samples < need:
            short[gpu_key(gpu)] = f"{samples} sample(s)"
        rates = {r: _d(events.get("active")).get(r, 0) / samples for r in reasons if _d(events.get("active")).get(r)}
        text = ", ".join(f"{r} {round(rate, 3)} ({_d(events.get('active'))[r]}/{samples})" for r, rate in rates.items())
        if any(rate > limit for rate in rates.values()):
            over[gpu_key(gpu)] = text
        elif rates:
            seen[gpu_key(gpu)] = text
    if not sampled:  # facts without samples: one snapshot cannot give a rate, so it can only warn
        snapshot = _by_gpu(gpus, lambda g: ",".join(r for r in reasons if _d(g.get("throttle_reasons")).get(r)) or "")
        return node_check(
            "throttle",
            WARN if snapshot else PASS,
            snapshot,
            f"share of samples <= {limit} per reason ({', '.join(reasons)})",
            f"{_named(snapshot, gpus)} show {'/'.join(reasons)} in one snapshot; no samples to judge a rate",
            "Gather facts with clock_event_samples > 0 (nvidia_smi_facts) to judge it over a window",
        )
    status = FAIL if over else (WARN if seen or short else PASS)
    return node_check(
        "throttle",
        status,
        {**seen, **short, **over},
        f"share of samples <= {limit} per reason ({', '.join(reasons)}), >= {need} samples",
        f"clock event reasons active in more than {limit} of the samples on {_named(over, gpus)}"
        if over
        else f"clock event reasons seen below the limit, or too few samples, on {_named({**seen, **short}, gpus)}",
        "Check cooling, fans and airflow (HW thermal), the PSU and power-brake signal (HW power brake); "
        "nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER under load; RMA if it persists",
    )


def _nvlink_checks(gpus, links, expected, view_read=False):
    """view_read: the facts hold the nvlink --status view (top-level `nvlink`). A GPU absent from a view that
    was read has no NVLink: 0 links (nvlink --status lists only GPUs with links, and prints nothing and exits 0
    when none has any: the 580.159.04 H200 VM capture in tests/fixtures/nvidia-smi)."""

    def nvlink(gpu):
        if gpu.get("nvlink") is None:  # absent from the view (merge gives None), or no view at all
            return f"0 of {links} active" if view_read else "NVLink state not read (no nvidia-smi nvlink --status view)"
        state = _d(gpu.get("nvlink"))
        active = state.get("active_links")
        if active == links:
            return ""
        down = [
            link.get("link") for link in state.get("links") or [] if isinstance(link, dict) and not link.get("active")
        ]
        return f"{active} of {links} active" + (f", inactive links {down}" if down else "")

    down = _by_gpu(gpus, nvlink)
    checks = [
        node_check(
            "nvlink_active",
            FAIL if down else PASS,
            down,
            links,
            f"{_named(down, gpus)} do not have {links} active NVLinks",
            "nvidia-smi nvlink --status; reset the GPUs, reseat the baseboard if links stay down",
        )
    ]
    limits = expected.get("nvlink_error_max") or {}

    def counters(gpu):
        found = []
        for link in gpu.get("nvlink_errors") or []:
            if not isinstance(link, dict):
                continue
            for name, value in sorted(link.items()):
                limit = limits.get(name)
                if name != "link" and limit is not None and isinstance(value, int) and value > limit:
                    found.append(f"link {link.get('link')} {name} {value} > {limit}")
        return ", ".join(found)

    bad = _by_gpu(gpus, counters)
    checks.append(
        node_check(
            "nvlink_errors",
            FAIL if bad else PASS,
            bad,
            {f"{name} per link": f"<= {limit}" for name, limit in sorted(limits.items())},
            f"NVLink error counters over the per-link limit on {_named(bad, gpus)}",
            "Reset the counters (nvidia-smi nvlink -ec) and rerun the NVLink/NCCL test; if they grow again, "
            "drain the node and reseat or RMA the board (recovery errors mean the link retrains)",
        )
    )
    return checks


def _xid_check(events, expected, gpus, lost, failing):
    """Each Xid judged by the action NVIDIA's Xid catalogue gives it (gpuforge_kernel.xid_action): actions in
    expected.xid_fail_actions fail, restart_app / not_given / unknown codes warn, ignore is ok. Codes in
    expected.xid_fatal (gpuforge_expected_xid_fatal) always fail.

    An Xid 45 that names its cause ("caused by previous Xid 149") counts for that cause on the same GPU
    (named_by_xid_45): the catalogue ignores Xid 45 because the earlier Xid is judged itself, and that earlier line
    may have left the kernel's ring buffer while the Xid 45s that followed it are still there."""
    fatal = set(expected.get("xid_fatal") or [])
    fail_actions = set(expected.get("xid_fail_actions") or XID_FAIL_ACTIONS)
    boards = {bus_key(g.get("bus_id")): g for g in gpus}
    boards.update({bus_key(g.get("bus_id")): {"bus_id": g.get("bus_id")} for g in lost if isinstance(g, dict)})
    grouped: dict = {}
    for event in events:
        if not isinstance(event, dict) or not isinstance(event.get("code"), int):
            continue
        cause = event.get("caused_by_code") if event["code"] == 45 else None
        named = isinstance(cause, int) and not isinstance(cause, bool)
        key = (bus_key(event.get("pci_bus")), cause if named else event["code"])
        if key not in grouped:
            action = xid_action(key[1])
            board = boards.get(key[0])
            grouped[key] = {
                "gpu": _gpu_name(board) if board else str(event.get("pci_bus")),
                "code": key[1],
                "description": action["description"],
                "catalogue_action": action["catalogue_action"],
                "action": action["action"],
                "count": 0,
            }
        if named:
            grouped[key]["named_by_xid_45"] = grouped[key].get("named_by_xid_45", 0) + 1
        else:
            grouped[key]["count"] += 1
    failing_events, warning_events, causes = [], [], set()
    for (bus, code), seen in sorted(grouped.items(), key=lambda item: (item[0][1], str(item[0][0]))):
        if code in fatal or seen["action"] in fail_actions:
            failing_events.append(seen)
            roots = [name for name in XID_SYMPTOM_OF.get(code, ()) if bus in failing.get(name, set())]
            causes.add(roots[0] if roots else None)
        elif seen["action"] != "ignore":
            warning_events.append(seen)
    status = FAIL if failing_events else (WARN if warning_events else PASS)
    shown = failing_events or warning_events
    caused_by = None if None in causes or not causes else ",".join(sorted(causes))
    remedy = "; ".join(
        sorted({f"Xid {e['code']} ({e['action']}): {ACTION_REMEDIES.get(e['action'], '')}" for e in shown})
    )
    return node_check(
        "xid",
        status,
        list(grouped.values()),
        "no Xid needing action (NVIDIA Xid catalogue" + (f"; always fatal: {sorted(fatal)})" if fatal else ")"),
        "Xid in the kernel log: "
        + "; ".join(
            f"{e['code']} {e['description'] or 'not in the catalogue'} on {e['gpu']}"
            + (f" (named by {e['named_by_xid_45']} Xid 45 line(s))" if e.get("named_by_xid_45") else "")
            for e in shown
        ),
        remedy + " (https://docs.nvidia.com/deploy/xid-errors/)",
        caused_by=caused_by,
    )


# NVIDIA Fabric Manager User Guide, "NVSwitch SXid Errors"
# (https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html): non-fatal SXids are
# informational (running CUDA jobs go on, possibly slower); after a fatal one the GPUs behind the port (a port to a
# GPU) or every job (a port between baseboards) are aborted until the GPUs and NVSwitches are reset.
SXID_FATAL_REMEDY = (
    "Drain the node. Stop the GPU applications and nvidia-fabricmanager (systemctl stop nvidia-fabricmanager), reset "
    "all GPUs and NVSwitches with nvidia-smi -r (without -i: a fatal SXid on a port between GPU baseboards needs every "
    "GPU and NVSwitch reset), start nvidia-fabricmanager again; if the SXid comes back, reboot or power-cycle the "
    "node and open a case with NVIDIA or the system vendor for the switch named (NVIDIA Fabric Manager User Guide, "
    "'Fatal SXid Errors')"
)
SXID_NONFATAL_REMEDY = (
    "Non-fatal SXids are informational: running jobs go on but may slow down or stall briefly (NVIDIA Fabric Manager "
    "User Guide, 'Non-Fatal SXid Errors'). Watch the kernel log for the switch and link named; rerun the NVLink/NCCL "
    "test and treat the switch as failing if they repeat or turn fatal"
)
SXID_UNCLASSIFIED_REMEDY = (
    "Only the raw SXid information is in the log (its Fatal/Non-fatal line is missing): read the full kernel log "
    "around it (journalctl -k | grep SXid) and judge it by that line"
)


def _sxid_check(events):
    """NVSwitch SXid events (gpuforge_kernel.parse_sxid_events) by the guide's classification: any fatal SXid fails,
    a non-fatal one warns, as does a code whose classification is not in the log (only raw-information lines)."""
    grouped: dict = {}
    for event in events:
        if not isinstance(event, dict) or not isinstance(event.get("code"), int):
            continue
        fatal = event.get("fatal")
        key = (str(event.get("switch")), str(event.get("pci")), event["code"], fatal)
        seen = grouped.setdefault(
            key,
            {
                "switch": f"{event.get('switch')} (PCI {event.get('pci')})",
                "code": event["code"],
                "severity": {True: "fatal", False: "non-fatal"}.get(fatal, "unclassified"),
                "links": [],
                "message": event.get("message") or "",
                "count": 0,
            },
        )
        seen["count"] += event.get("count") or 1
        if isinstance(event.get("link"), int) and event["link"] not in seen["links"]:
            seen["links"].append(event["link"])
    observed = [grouped[key] for key in sorted(grouped, key=lambda k: (k[3] is not True, k[2], k[0], k[1]))]
    fatal = [e for e in observed if e["severity"] == "fatal"]
    others = [e for e in observed if e["severity"] != "fatal"]
    shown = fatal or others

    def text(e):
        links = f" on link(s) {', '.join(str(n) for n in e['links'])}" if e["links"] else ""
        return f"SXid {e['code']} ({e['severity']}, {e['count']}x) on {e['switch']}{links}: {e['message']}"

    remedies = []
    if fatal:
        remedies.append(SXID_FATAL_REMEDY)
    if any(e["severity"] == "non-fatal" for e in shown):
        remedies.append(SXID_NONFATAL_REMEDY)
    if any(e["severity"] == "unclassified" for e in shown):
        remedies.append(SXID_UNCLASSIFIED_REMEDY)
    return node_check(
        "sxid",
        FAIL if fatal else (WARN if others else PASS),
        observed,
        "no fatal SXid (NVSwitch errors in the kernel log; non-fatal ones warn)",
        "NVSwitch errors in the kernel log: " + "; ".join(text(e) for e in shown),
        "; ".join(remedies),
    )


FABRIC_MANAGER_REMEDY = (
    "Install nvidia-fabricmanager of exactly the driver's version (nv-fabricmanager --version must print the "
    "driver's release: 'the version of fabricmanager must match the NVIDIA driver installed', "
    "NVIDIA/yum-packaging-fabric-manager README) and start it: systemctl enable --now nvidia-fabricmanager; read "
    "journalctl -u nvidia-fabricmanager and /var/log/fabricmanager.log when it does not stay up. GPUs whose fabric "
    "state does not reach Completed once it runs: stop the GPU applications and the fabric manager, reset the GPUs "
    "(nvidia-smi -r), start the fabric manager again (NVIDIA Fabric Manager User Guide)"
)


def _fabric_manager_check(service, gpus, unreadable):
    """The nvidia-fabricmanager service (systemctl is-active) must be active, and every GPU that reports a fabric
    state (nvidia-smi -q "Fabric"; N/A elsewhere) must be Completed with status Success. None when neither was read
    and nothing failed to read."""
    service = str(service).strip() if service is not None else None
    states = {}
    for gpu in gpus:
        state, status = gpu.get("fabric_state"), gpu.get("fabric_status")
        if state is None and status is None:
            continue
        if state != "Completed" or status not in (None, "Success"):
            states[gpu_key(gpu)] = f"{state or 'N/A'}/{status or 'N/A'}"
    reported = [g for g in gpus if g.get("fabric_state") is not None or g.get("fabric_status") is not None]
    if service is None and not reported and not unreadable:
        return None
    observed = {"nvidia-fabricmanager": service if service is not None else "unknown", **states}
    faults = []
    if service is not None and service != "active":
        faults.append(f"the nvidia-fabricmanager service is {service}, not active")
    if service is None and unreadable:
        faults.append(f"the nvidia-fabricmanager service state could not be read ({unreadable})")
    if states:
        faults.append(
            "GPU fabric state/status not Completed/Success on "
            + ", ".join(f"{_gpu_name(g)}: {states[gpu_key(g)]}" for g in gpus if gpu_key(g) in states)
        )
    remedy = FABRIC_MANAGER_REMEDY
    if service is None and unreadable and not states:
        remedy = "Run systemctl is-active nvidia-fabricmanager on the node (systemd) or pass fabric_manager. " + remedy
    return node_check(
        "fabric_manager",
        FAIL if faults else PASS,
        observed,
        {"nvidia-fabricmanager": "active", "GPU fabric state/status": "Completed/Success (where reported)"},
        "NVSwitch system: " + "; ".join(faults),
        remedy,
    )


def _ib_checks(ib, expected):
    hcas = {h.get("name"): h for h in ib.get("hcas") or [] if isinstance(h, dict)}
    want = expected.get("hcas") or []
    checks = []
    missing = [h.get("name") for h in want if h.get("name") not in hcas]
    checks.append(
        node_check(
            "hcas_present",
            FAIL if missing else PASS,
            _sorted(hcas),
            [h.get("name") for h in want],
            f"HCA(s) {missing} not found",
            "Check lspci -d 15b3:, the mlx5_core driver and firmware (mlxfwmanager)",
        )
    )
    speeds = expected.get("link_speeds") or {}
    want = [
        {**h, "ports": [{**speeds.get(p.get("link"), {}), **p} for p in h.get("ports") or [{"port": 1}]]} for h in want
    ]
    bad_state, bad_rate = {}, {}
    for hca in want:
        ports = _d(hcas.get(hca.get("name"))).get("ports") or []
        present = {p.get("port"): p for p in ports if isinstance(p, dict)}
        for port in hca["ports"]:
            key = f"{hca.get('name')}/{port.get('port', 1)}"
            seen = present.get(port.get("port", 1))
            if seen is None:
                bad_state[key] = "HCA absent" if hca.get("name") in missing else "absent"
                continue
            up = seen.get("state") == "Active" and seen.get("phys_state") in (None, "LinkUp")
            if not up:
                bad_state[key] = f"{seen.get('state')}/{seen.get('phys_state')}"
            rate = (seen.get("rate_gbit_per_s"), seen.get("link_layer"))
            # A port that is not up reports a placeholder rate (ibstat: 10); its fault is the state alone.
            want_rate = (port.get("rate_gbit_per_s") if up else None, port.get("link_layer"))
            if any(w is not None and w != s for w, s in zip(want_rate, rate)):
                bad_rate[key] = f"{rate[0]} Gb/s {rate[1]}"
    # The ports of an HCA that is not there are down because of it: hcas_present names the fault.
    checks.append(
        node_check(
            "ib_port_state",
            FAIL if bad_state else PASS,
            bad_state,
            "Active/LinkUp",
            f"port(s) {sorted(bad_state)} not Active/LinkUp",
            "Check cable and switch port; on InfiniBand make sure a subnet manager (opensm/UFM) runs",
            caused_by="hcas_present" if bad_state and set(bad_state.values()) == {"HCA absent"} else None,
        )
    )
    checks.append(
        node_check(
            "ib_port_rate",
            FAIL if bad_rate else PASS,
            bad_rate,
            {
                f"{h.get('name')}/{p.get('port', 1)}": f"{p.get('rate_gbit_per_s')} Gb/s {p.get('link_layer')}"
                for h in want
                for p in h.get("ports") or []
            },
            f"port(s) {sorted(bad_rate)} at the wrong rate or link layer",
            "Check cable type/length, switch port speed and mlxconfig LINK_TYPE_P1",
        )
    )
    return checks


def _peermem_check(lsmod):
    names = set(_d(_d(lsmod).get("modules")))
    loaded = [m for m in PEERMEM_MODULES if m in names]
    return node_check(
        "peermem_loaded",
        PASS if loaded else FAIL,
        loaded,
        "nvidia_peermem or nv_peer_mem",
        "GPUDirect RDMA module not loaded",
        "modprobe nvidia-peermem; 'disagrees about version of symbol' in dmesg means the driver was built "
        "before MLNX_OFED: reinstall the driver after OFED",
    )


def _affinity_check(smi, expected):
    gpus = {g.get("index"): g for g in smi.get("gpus") or [] if isinstance(g, dict)}
    bad = {}
    for group in expected.get("numa_affinity") or []:
        numa = str(group.get("numa"))
        for index in group.get("gpus") or []:
            gpu = gpus.get(index)
            if gpu is None:
                bad[f"GPU{index}"] = "absent"
                continue
            if gpu.get("numa_affinity") is not None and str(gpu.get("numa_affinity")) != numa:
                bad[f"GPU{index}"] = f"NUMA {gpu.get('numa_affinity')}"
            for hca in group.get("hcas") or []:
                code = _d(gpu.get("nics")).get(hca)
                if code not in SAME_SOCKET_CODES:
                    bad[f"GPU{index}<->{hca}"] = code or "no path"
    return node_check(
        "gpu_hca_affinity",
        FAIL if bad else PASS,
        bad,
        [f"GPU{g.get('gpus')}<->{g.get('hcas')} NUMA {g.get('numa')}" for g in expected.get("numa_affinity") or []],
        f"GPU/HCA NUMA affinity differs from the spec: {sorted(bad)}",
        "Check the HCA slot placement and BIOS NUMA settings against the system's topology",
    )


# What a PCIe fault means and what to do about it (remedies of the pcie_* checks).
PCIE_LINK_REMEDY = (
    "Reseat the adapter (and its riser or cable), check the slot's lane setting (bifurcation) and link speed in "
    "the BIOS, and compare lspci -vvv -s <bus> LnkSta with LnkCap after a reboot; move or RMA the card if the "
    "link stays below its capability"
)
PCIE_AER_REMEDY = (
    "Read the AER lines of the kernel log for the device and its root port (journalctl -k | grep -i aer), reseat "
    "the card and riser and check the slot; uncorrectable (non-fatal or fatal) errors mean the link lost data: "
    "drain the node and RMA the card or the riser if they come back after a reboot"
)
PCIE_ACS_REMEDY = (
    "Disable ACS on bare metal: turn off ACS / PCIe isolation (and the IOMMU for P2P) in the BIOS, or clear the "
    "ACS control register of each bridge at boot (setpci -s <bridge> ECAP_ACS+0x6.w=0000); NCCL troubleshooting "
    "guide, 'PCI Access Control Services (ACS)' "
    "(https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html#pci-access-control-services-acs)"
)


def _pcie_devices(pcie, gpus, lost):
    """({address: name} of the GPUs, of the HCAs, {address: key in observed}): GPUs from nvidia-smi (named and
    keyed by their bus ID as nvidia-smi spells it), HCAs from pcie.hcas (else the Mellanox InfiniBand/Ethernet
    controllers lspci lists), named by HCA and keyed by PCI address."""
    boards, keys = {}, {}
    for gpu in gpus:
        address = pci_address(gpu.get("bus_id"))
        if address:
            boards[address], keys[address] = _gpu_name(gpu), gpu_key(gpu)
    for gpu in lost:
        address = pci_address(gpu.get("bus_id"))
        if address:
            boards.setdefault(address, f"{gpu.get('bus_id')} (GPU)")
            keys.setdefault(address, str(gpu.get("bus_id")))
    hcas = {pci_address(a): str(n) for a, n in _d(pcie.get("hcas")).items() if pci_address(a)}
    if not hcas:
        for address, device in _d(pcie.get("lspci")).items():
            text = str(_d(device).get("description") or "").lower()
            if address and "mellanox" in text and ("infiniband controller" in text or "ethernet controller" in text):
                hcas[address] = address
    keys.update({address: address for address in hcas})
    return boards, hcas, keys


def _pcie_checks(pcie, gpus, lost, expected, failing):
    """The PCIe checks (lspci LnkCap/LnkSta of the HCAs, the kernel's link-limited reports, AER counters, ACS
    on bridges); pcie: {lspci: gpuforge_pcie.parse_lspci(), hcas: {address: hca name}, limited:
    parse_link_limited(), aer: {address: {correctable|nonfatal|fatal: parse_aer()}}, upstream: {address:
    [bridge addresses above it]}}."""
    gpu_names, hca_names, keys = _pcie_devices(pcie, gpus, lost)
    devices = _d(pcie.get("lspci"))
    checks = []
    degraded = {}
    for address, name in sorted(hca_names.items()):
        device = devices.get(address)
        if device is None:
            continue  # an HCA lspci does not list is hcas_present's fault
        why = link_degraded(device)
        if why:
            degraded[keys[address]] = f"{name}: {why}"
    checks.append(
        node_check(
            "pcie_link_hca",
            FAIL if degraded else PASS,
            degraded,
            "LnkSta speed and width = LnkCap (lspci -vvv)",
            "HCA PCIe link below the adapter's capability on " + "; ".join(degraded.values()),
            PCIE_LINK_REMEDY,
        )
    )
    names = {**gpu_names, **hca_names}
    gpu_link_failed = set(failing.get("pcie_link", set()))  # bus_key spelling
    reports, others = {}, {}
    causes = set()
    for report in pcie.get("limited") or []:
        if not isinstance(report, dict) or not report.get("address"):
            continue
        address = report["address"]
        text = (
            f"{report.get('available_gbit_per_s')} Gb/s available, limited by {report.get('speed_gts'):g} GT/s "
            f"x{report.get('width')} at {report.get('limited_at')} "
            f"(capable of {report.get('capable_gbit_per_s')} Gb/s, "
            f"{report.get('capable_speed_gts'):g} GT/s x{report.get('capable_width')})"
        )
        if address in names:
            reports[keys[address]] = f"{names[address]}: {text}"
            if keys[address] in degraded:
                causes.add("pcie_link_hca")
            elif bus_key(address) in gpu_link_failed:
                causes.add("pcie_link")
            else:
                causes.add(None)
        else:
            others[address] = text
    status = FAIL if reports else (WARN if others else PASS)
    caused_by = None if None in causes or not causes else ",".join(sorted(causes))
    checks.append(
        node_check(
            "pcie_link_limited",
            status,
            {**others, **reports},
            "no 'available PCIe bandwidth, limited by' report for a GPU or HCA in the kernel log",
            "the kernel reports a downtrained PCIe link for "
            + "; ".join(reports.values() if reports else (f"{a}: {v}" for a, v in others.items())),
            PCIE_LINK_REMEDY + ("" if reports else " (the device is neither a GPU nor an HCA of this node)"),
            caused_by=caused_by,
        )
    )
    checks.append(_aer_check(pcie, names, keys, expected))
    if not expected.get("virtual"):
        checks.append(_acs_check(pcie, devices, names))
    return checks


def _aer_check(pcie, names, keys, expected):
    correctable_max = expected.get("pcie_aer_correctable_max")
    uncorrectable_max = expected.get("pcie_aer_uncorrectable_max") or 0
    over, seen = {}, {}
    for address, files in sorted(_d(pcie.get("aer")).items()):
        key = pci_address(address)
        if key not in names:
            continue
        totals = {kind: aer_total(_d(files).get(kind), kind) for kind in ("correctable", "nonfatal", "fatal")}
        text = ", ".join(f"{kind} {count}" for kind, count in totals.items() if count)
        uncorrectable = totals["nonfatal"] + totals["fatal"]
        if uncorrectable > uncorrectable_max or (
            correctable_max is not None and totals["correctable"] > correctable_max
        ):
            over[keys[key]] = f"{names[key]}: {text}"
        elif text:
            seen[keys[key]] = f"{names[key]}: {text}"
    limit = f"correctable <= {correctable_max}, " if correctable_max is not None else ""
    return node_check(
        "pcie_aer",
        FAIL if over else (WARN if seen else PASS),
        {**seen, **over},
        f"{limit}non-fatal + fatal <= {uncorrectable_max} (sysfs aer_dev_*)",
        "PCIe AER errors over the limit on " + "; ".join(over.values())
        if over
        else "PCIe AER errors below the limit on " + "; ".join(seen.values()),
        PCIE_AER_REMEDY,
    )


def _acs_check(pcie, devices, names):
    """ACS on the bridges above the GPUs and HCAs (pcie.upstream), or on every bridge lspci lists when the
    topology is not known."""
    upstream = _d(pcie.get("upstream"))
    if upstream:
        bridges = {}
        for address in sorted(names):
            for bridge in filter(None, map(pci_address, upstream.get(address) or [])):
                bridges.setdefault(bridge, []).append(address)
    else:
        bridges = {a: [] for a, d in devices.items() if a and _d(d).get("bridge")}
    enabled = {}
    for bridge, below in sorted(bridges.items()):
        flags = acs_enabled(_d(devices.get(bridge)).get("acs_ctl"))
        if flags:
            shown = ", ".join(names.get(b, b) for b in below)
            enabled[bridge] = "+ ".join(flags) + "+" + (f" (above {shown})" if shown else "")
    return node_check(
        "pcie_acs",
        FAIL if enabled else PASS,
        enabled,
        "ACSCtl all '-' on the PCIe bridges above the GPUs and HCAs (bare metal)",
        "PCIe ACS is enabled on bridge(s) "
        + "; ".join(f"{a}: {v}" for a, v in enabled.items())
        + ": peer-to-peer traffic (GPUDirect RDMA, GPU P2P) is redirected through the root complex",
        PCIE_ACS_REMEDY,
    )


def judge_node(
    nvidia_smi,
    infiniband,
    lsmod,
    xid_events,
    expected,
    unreadable=None,
    link_flaps=None,
    pcie=None,
    sxid_events=None,
    fabric_manager=None,
    node=None,
    system=None,
):
    """Run every check; returns {checks, records, verdict, healthy, failed_checks, caused_failures, reasons}: the
    checks, their node_check records (named by node and system) and the node's verdict, as
    gpuforge_records.node_verdicts gives it for those records.

    NVSwitch systems (expected.nvswitch true): sxid_events (gpuforge_kernel.parse_sxid_events of the kernel log)
    are judged by `sxid`, and fabric_manager (the word `systemctl is-active nvidia-fabricmanager` prints: active,
    inactive, failed, activating, ...; None when not read) with the GPUs' fabric state by `fabric_manager`; with
    unreadable["fabric_manager"] the service state is unknown. Neither check is emitted on other systems.

    link_flaps: {netdev: link-down events} of the kernel log (gpuforge_perfquery.parse_link_flaps), judged
    by `ib_link_flaps` against expected.ib_link_flaps_max when the spec has HCAs.

    pcie: the PCIe inputs of _pcie_checks (lspci, hcas, limited, aer, upstream), judged by `pcie_link_hca`,
    `pcie_link_limited`, `pcie_aer` and `pcie_acs` (not on a virtual machine: expected.virtual); with
    unreadable["lspci"] only `lspci_readable` fails and the lspci-based checks are left out.

    unreadable: {source name: message} for inputs that could not be read (e.g. {"lsmod": "..."});
    such a source yields a failed `<source>_readable` check and the checks built on it are skipped.
    A malformed expected spec raises OptionError (check_expected); None is an empty spec.
    """
    expected = check_expected(expected if expected is not None else {})
    unreadable = dict(unreadable or {})
    nvidia_smi, infiniband, smi_malformed, ib_malformed = _clean_facts(nvidia_smi, infiniband)
    smi_readable = _readable(
        "nvidia_smi_readable",
        nvidia_smi,
        "the nvidia-smi facts",
        "Run nvidia-smi -q -x on the node; see the message for the cause",
        smi_malformed,
    )
    smi = nvidia_smi if isinstance(nvidia_smi, dict) else {}
    errors = [str(e).lower() for e in smi.get("errors") or []]
    if errors and not smi_malformed and all(any(m in e for m in FALLEN_OFF_MARKERS) for e in errors):
        smi_readable["caused_by"] = "gpu_fallen_off_bus"  # facts of old: the lost GPU's error is all there is
    checks = [smi_readable]
    checks += _gpu_checks(smi, expected)
    if expected.get("hcas"):
        checks.append(
            _readable(
                "infiniband_readable",
                infiniband,
                "the InfiniBand facts",
                "Install infiniband-diags (ibstat) and check the mlx5 drivers",
                ib_malformed,
            )
        )
        checks += _ib_checks(infiniband if isinstance(infiniband, dict) else {}, expected)
    for source, what, remedy in (
        # A VM image can lack kmod altogether (the lent H200 machine did): say what to install first.
        (
            "lsmod",
            "lsmod output",
            "Install kmod (it provides lsmod), or run lsmod by hand on the node to see why it fails",
        ),
        (
            "kernel_log",
            "the kernel log",
            "Read it by hand on the node (journalctl -k, or dmesg as root) and check permissions",
        ),
    ):
        if source in unreadable:
            checks.append(
                node_check(
                    f"{source}_readable", FAIL, None, what, f"could not read {what}: {unreadable[source]}", remedy
                )
            )
        else:
            checks.append(node_check(f"{source}_readable", PASS, True, what))
    gpus = [g for g in smi.get("gpus") or [] if isinstance(g, dict)]
    lost = [g for g in smi.get("unreachable_gpus") or [] if isinstance(g, dict)]
    failing = {c["name"]: _failing_buses(c, gpus, lost) for c in checks if c["status"] == FAIL}
    if "kernel_log" not in unreadable:
        checks.append(_xid_check(xid_events or [], expected, gpus, lost, failing))
    if (
        expected.get("hcas")
        and expected.get("ib_link_flaps_max") is not None
        and link_flaps is not None
        and "kernel_log" not in unreadable
    ):
        checks.append(judge_link_flaps(link_flaps, expected["ib_link_flaps_max"]))
    if expected.get("nvswitch") and "kernel_log" not in unreadable:
        checks.append(_sxid_check(sxid_events or []))
    if expected.get("nvswitch"):
        fabric = _fabric_manager_check(fabric_manager, gpus, unreadable.get("fabric_manager"))
        if fabric is not None:
            checks.append(fabric)
    if expected.get("peermem", True) and "lsmod" not in unreadable:
        checks.append(_peermem_check(lsmod))
    if pcie is not None:
        checks += _pcie_inputs_checks(pcie, gpus, lost, expected, failing, unreadable)
    if expected.get("numa_affinity"):
        affinity = _affinity_check(smi, expected)
        observed = _d(affinity["observed"])
        absent = [k for k, v in observed.items() if v == "absent"]
        present_hcas = {h.get("name") for h in _d(infiniband).get("hcas") or [] if isinstance(h, dict)}
        # GPU<->HCA pairs whose HCA is missing (hcas_present's fault): the HCA cannot be near any GPU.
        hca_gone = [k for k in observed if "<->" in k and k.split("<->", 1)[1] not in present_hcas]
        failed_names = {c["name"] for c in checks if c["status"] == FAIL}
        if affinity["status"] == FAIL:
            if lost and len(absent) == len(observed):
                affinity["caused_by"] = "gpu_fallen_off_bus"
            elif "gpu_count" in failed_names:
                # nvidia-smi renumbers the GPUs after one is gone: the spec's indexes no longer name the same
                # boards, so the affinity cannot be judged until the count is right.
                affinity["caused_by"] = "gpu_count"
            elif hca_gone and len(hca_gone) == len(observed) and "hcas_present" in failed_names:
                affinity["caused_by"] = "hcas_present"
        checks.append(affinity)
    return {"checks": checks, **node_report(checks, node or "node", system)}


def _pcie_inputs_checks(pcie, gpus, lost, expected, failing, unreadable):
    pcie = _d(pcie)
    if "lspci" in unreadable:
        readable = node_check(
            "lspci_readable",
            FAIL,
            None,
            "lspci -vvv output",
            f"could not read lspci -vvv: {unreadable['lspci']}",
            "Install pciutils and run the check as root (capabilities are hidden from other users)",
        )
        return [readable, *_pcie_checks({**pcie, "lspci": {}}, gpus, lost, {**expected, "virtual": True}, failing)[1:]]
    return [
        node_check("lspci_readable", PASS, True, "lspci -vvv output"),
        *_pcie_checks(pcie, gpus, lost, expected, failing),
    ]


def _failing_buses(check, gpus, lost) -> set:
    """Bus keys a failed per-GPU check names (observed keyed by bus id; gpu_fallen_off_bus: a list)."""
    observed = check.get("observed")
    keys = observed if isinstance(observed, list) else list(_d(observed))
    return {bus_key(k) for k in keys if bus_key(k)}
