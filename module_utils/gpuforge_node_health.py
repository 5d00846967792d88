"""Judge one GPU node against its expected hardware spec (pure functions, stdlib only).

Inputs are already-parsed facts: the `nvidia_smi` and `infiniband` dicts of the nvidia_smi_facts and
infiniband_facts modules, a parse_lsmod() result and a parse_xid_events() list (gpuforge_kernel).
The expected spec is checked first (check_expected: OptionError naming the key for a malformed one);
facts with a malformed field give a failed `*_readable` check naming the field, never an exception.
Every check is {name, status: ok|warn|fail, observed, expected, fault, remedy}; check names are a
stable interface (docs: library/gpu_node_check.py RETURN).
"""

from __future__ import annotations

try:
    from ansible.module_utils.gpuforge_errors import OptionError
    from ansible.module_utils.gpuforge_options import (
        anything,
        boolean,
        integer,
        list_of,
        mapping_of,
        number,
        record,
        string,
    )
except ImportError:  # module_utils/ is on sys.path (unit tests, CLI)
    from gpuforge_errors import OptionError
    from gpuforge_options import anything, boolean, integer, list_of, mapping_of, number, record, string

__all__ = ["CHECK_NAMES", "EXPECTED", "check_expected", "judge_node", "summarize"]

CHECK_NAMES = (
    "nvidia_smi_readable",
    "infiniband_readable",
    "lsmod_readable",
    "kernel_log_readable",
    "gpu_count",
    "gpu_model",
    "gpu_fallen_off_bus",
    "driver_branch",
    "persistence_mode",
    "ecc_enabled",
    "ecc_volatile_dbe",
    "row_remap",
    "retired_pages",
    "pcie_link",
    "throttle",
    "xid",
    "nvlink_active",
    "hcas_present",
    "ib_port_state",
    "ib_port_rate",
    "peermem_loaded",
    "gpu_hca_affinity",
)

# Throttle reasons that mean the hardware is protecting itself (not a software cap or idle clocks).
BAD_THROTTLE = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")
PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")
FALLEN_OFF_MARKERS = ("fallen off the bus", "unable to determine the device handle")
# topo -m codes for a path that stays on one CPU socket (SYS crosses the inter-socket link).
SAME_SOCKET_CODES = ("PIX", "PXB", "PHB", "NODE")


LINK_LAYERS = ("InfiniBand", "Ethernet")  # as ibstat prints them

_PORT = record(
    {
        "port": integer(minimum=1),
        "link": string(numbers=True, nonempty=True),
        "rate_gbps": number(above=0),
        "link_layer": string(choices=LINK_LAYERS),
    }
)
# The expected spec: a SKU entry merged with a system entry and the global thresholds, so keys this
# judge does not read (gpu_sku, memory_mib, ...) are kept unchecked; the keys it reads are coerced.
EXPECTED = record(
    {
        "gpu_count": integer(minimum=0),
        "gpu_model": string(),
        "driver_branch": string(numbers=True),
        "persistence_mode": boolean(),
        "ecc": boolean(),
        "retired_pages_max": integer(minimum=0),
        "pcie_gen_max": integer(minimum=1),
        "pcie_width_max": integer(minimum=1),
        "nvlink_links": integer(minimum=0),
        "xid_fatal": list_of(integer(minimum=0)),
        "hcas": list_of(record({"name": string(numbers=True, nonempty=True), "ports": list_of(_PORT)}, ("name",))),
        "link_speeds": mapping_of(
            record({"rate_gbps": number(above=0), "link_layer": string(choices=LINK_LAYERS)}),
            key=string(numbers=True),
        ),
        "peermem": boolean(),
        "numa_affinity": list_of(
            record(
                {
                    "gpus": list_of(integer(minimum=0)),
                    "hcas": list_of(string(numbers=True, nonempty=True)),
                    "numa": integer(minimum=0),
                },
                required=("gpus", "numa"),
            )
        ),
    },
    extra=True,
)


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
    gpu = rec(
        {
            "index": integer(minimum=0),
            "product_name": string(numbers=True),
            "persistence_mode": string(),
            "ecc": rec({"mode_current": string(), "volatile": rec({"uncorrected": count})}),
            "remapped_rows": rec({"pending": boolean(), "failure": boolean()}),
            "retired_pages": rec({"single_bit": count, "double_bit": count, "pending": boolean()}),
            "pcie": rec({name: count for name in ("gen_max", "gen_current", "width_max", "width_current")}),
            "throttle_reasons": mapping_of(boolean(), on_error=note),
            "nvlink": rec({"active_links": count}),
            "numa_affinity": string(numbers=True),
            "nics": mapping_of(string(), key=string(numbers=True), on_error=note),
        }
    )
    port = rec(
        {
            "port": count,
            "state": string(),
            "phys_state": string(),
            "rate_gbps": number(minimum=0),
            "link_layer": string(),
        }
    )
    hca = rec({"name": string(numbers=True, nonempty=True), "ports": list_of(port, on_error=note)}, ("name",))
    errors = list_of(anything())
    smi = rec({"driver_version": string(numbers=True), "errors": errors, "gpus": list_of(gpu, on_error=note)})
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


def _check(name, status, observed, expected, fault="", remedy=""):
    return {
        "name": name,
        "status": status,
        "observed": observed,
        "expected": expected,
        "fault": fault if status != "ok" else "",
        "remedy": remedy if status != "ok" else "",
    }


def _by_gpu(gpus, select):
    """{gpu index: value} for GPUs where select(gpu) returns something truthy."""
    found = {}
    for gpu in gpus:
        value = select(gpu)
        if value:
            found[gpu.get("index")] = value
    return found


def _readable(name, facts, what, remedy, malformed=()):
    if not isinstance(facts, dict):
        return _check(name, "fail", None, "facts", f"could not read {what}: no facts were given", remedy)
    errors = [str(e) for e in facts.get("errors") or []]
    if errors:
        return _check(name, "fail", errors, [], f"could not read all of {what}: {'; '.join(errors)[:400]}", remedy)
    if malformed:
        fault = f"{what} hold malformed values, left out of the checks: {'; '.join(malformed)[:400]}"
        remedy = f"Pass the facts the module gathers, unchanged. {remedy}"
        return _check(name, "fail", list(malformed), [], fault, remedy)
    return _check(name, "ok", [], [])


def _gpu_checks(smi, expected):
    gpus = [g for g in smi.get("gpus") or [] if isinstance(g, dict)]
    errors = " ".join(str(e) for e in smi.get("errors") or []).lower()
    checks = []
    want_count = expected.get("gpu_count")
    count = len(gpus)
    checks.append(
        _check(
            "gpu_count",
            "ok" if want_count is None or count == want_count else "fail",
            count,
            want_count,
            f"nvidia-smi lists {count} GPU(s), the spec has {want_count}",
            "Check lspci -d 10de: and the kernel log for missing boards (Xid 79); reseat or RMA the GPU",
        )
    )
    models = sorted({g.get("product_name") for g in gpus if g.get("product_name")})
    want_model = expected.get("gpu_model")
    checks.append(
        _check(
            "gpu_model",
            "ok" if want_model is None or models == [want_model] else "fail",
            models,
            want_model,
            f"GPU model(s) {models or 'none readable'} instead of {want_model}",
            "Fix the node's gpuforge_expected_system or the hardware inventory",
        )
    )
    fallen = any(marker in errors for marker in FALLEN_OFF_MARKERS)
    checks.append(
        _check(
            "gpu_fallen_off_bus",
            "fail" if fallen else "ok",
            fallen,
            False,
            "nvidia-smi cannot reach a GPU (fallen off the bus / no device handle)",
            "Drain the node, look for Xid 79 in the kernel log, then reseat or power-cycle the GPU",
        )
    )
    branch = expected.get("driver_branch")
    driver = smi.get("driver_version")
    observed_branch = str(driver).split(".", 1)[0] if driver else None
    checks.append(
        _check(
            "driver_branch",
            "ok" if branch is None or observed_branch == str(branch) else "fail",
            driver,
            None if branch is None else str(branch),
            f"driver {driver or 'unreadable'} is not on branch {branch}",
            "Install the expected branch with the gpuforge_nvidia_driver role and reboot",
        )
    )
    if expected.get("persistence_mode", True):
        off = _by_gpu(gpus, lambda g: g.get("persistence_mode") != "Enabled" and (g.get("persistence_mode") or "?"))
        checks.append(
            _check(
                "persistence_mode",
                "fail" if off else "ok",
                off,
                "Enabled",
                f"persistence mode not enabled on GPU(s) {_sorted(off)}",
                "Enable and start nvidia-persistenced",
            )
        )
    if expected.get("ecc", True):
        off = _by_gpu(gpus, lambda g: _d(g.get("ecc")).get("mode_current") != "Enabled" and "not Enabled")
        checks.append(
            _check(
                "ecc_enabled",
                "fail" if off else "ok",
                off,
                "Enabled",
                f"ECC not enabled on GPU(s) {_sorted(off)}",
                "nvidia-smi -e 1 on those GPUs, then reboot",
            )
        )
    dbe = _by_gpu(gpus, lambda g: _d(_d(g.get("ecc")).get("volatile")).get("uncorrected") or 0)
    checks.append(
        _check(
            "ecc_volatile_dbe",
            "fail" if dbe else "ok",
            dbe,
            0,
            f"volatile uncorrectable (double-bit) ECC errors on GPU(s) {_sorted(dbe)}",
            "Drain the node and reset the GPU (nvidia-smi -r) or reboot; RMA if they come back",
        )
    )

    def remap_state(gpu):
        rows = _d(gpu.get("remapped_rows"))
        state = [k for k in ("pending", "failure") if rows.get(k)]
        return ",".join(state)

    remap = _by_gpu(gpus, remap_state)
    checks.append(
        _check(
            "row_remap",
            "fail" if remap else "ok",
            remap,
            "none pending or failed",
            f"row remapping pending/failed on GPU(s) {_sorted(remap)}",
            "Drain the node and reset the GPU so the remap takes effect; a remap failure means RMA",
        )
    )
    limit = expected.get("retired_pages_max")

    def retired(gpu):
        pages = _d(gpu.get("retired_pages"))
        total = (pages.get("single_bit") or 0) + (pages.get("double_bit") or 0)
        over = limit is not None and total >= limit
        return f"{total} retired" if over else (f"{total} retired, pending" if pages.get("pending") else "")

    bad_pages = _by_gpu(gpus, retired)
    checks.append(
        _check(
            "retired_pages",
            "fail" if bad_pages else "ok",
            bad_pages,
            f"< {limit}, none pending" if limit is not None else "none pending",
            f"page retirement over limit or pending on GPU(s) {_sorted(bad_pages)}",
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
        _check(
            "pcie_link",
            "fail" if degraded else "ok",
            degraded,
            f"Gen{expected.get('pcie_gen_max')} x{expected.get('pcie_width_max')}",
            f"PCIe link below its maximum on GPU(s) {_sorted(degraded)}",
            "Reseat the GPU/riser and check the slot; compare lspci -vv LnkSta with LnkCap",
        )
    )
    throttled = _by_gpu(gpus, lambda g: ",".join(r for r in BAD_THROTTLE if _d(g.get("throttle_reasons")).get(r)) or "")
    checks.append(
        _check(
            "throttle",
            "fail" if throttled else "ok",
            throttled,
            "no HW/thermal/power-brake slowdown",
            f"GPU(s) {_sorted(throttled)} throttled by hardware",
            "Check cooling, fans and PSU/power-brake signals (nvidia-smi -q -d PERFORMANCE,TEMPERATURE)",
        )
    )
    links = expected.get("nvlink_links") or 0
    if links:

        def nvlink(gpu):
            active = _d(gpu.get("nvlink")).get("active_links")
            return "" if active == links else f"{active} active"

        down = _by_gpu(gpus, nvlink)
        checks.append(
            _check(
                "nvlink_active",
                "fail" if down else "ok",
                down,
                links,
                f"GPU(s) {_sorted(down)} do not have {links} active NVLinks",
                "nvidia-smi nvlink --status; reset the GPUs, reseat the baseboard if links stay down",
            )
        )
    return checks


def _xid_check(events, expected):
    fatal = set(expected.get("xid_fatal") or [])
    seen = _sorted({e.get("code") for e in events if isinstance(e, dict)})
    bad = [c for c in seen if c in fatal]
    status = "fail" if bad else ("warn" if seen else "ok")
    return _check(
        "xid",
        status,
        seen,
        "no Xid" if not fatal else f"no Xid (fatal: {sorted(fatal)})",
        f"Xid {bad or seen} in the kernel log",
        "Look up the Xid in NVIDIA's catalogue; drain the node and reset/reboot, RMA on repeat 48/79/95",
    )


def _ib_checks(ib, expected):
    hcas = {h.get("name"): h for h in ib.get("hcas") or [] if isinstance(h, dict)}
    want = expected.get("hcas") or []
    checks = []
    missing = [h.get("name") for h in want if h.get("name") not in hcas]
    checks.append(
        _check(
            "hcas_present",
            "fail" if missing else "ok",
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
                bad_state[key] = "absent"
                continue
            up = seen.get("state") == "Active" and seen.get("phys_state") in (None, "LinkUp")
            if not up:
                bad_state[key] = f"{seen.get('state')}/{seen.get('phys_state')}"
            rate = (seen.get("rate_gbps"), seen.get("link_layer"))
            # A port that is not up reports a placeholder rate (ibstat: 10); its fault is the state alone.
            want_rate = (port.get("rate_gbps") if up else None, port.get("link_layer"))
            if any(w is not None and w != s for w, s in zip(want_rate, rate)):
                bad_rate[key] = f"{rate[0]} Gb/s {rate[1]}"
    checks.append(
        _check(
            "ib_port_state",
            "fail" if bad_state else "ok",
            bad_state,
            "Active/LinkUp",
            f"port(s) {sorted(bad_state)} not Active/LinkUp",
            "Check cable and switch port; on InfiniBand make sure a subnet manager (opensm/UFM) runs",
        )
    )
    checks.append(
        _check(
            "ib_port_rate",
            "fail" if bad_rate else "ok",
            bad_rate,
            {
                f"{h.get('name')}/{p.get('port', 1)}": f"{p.get('rate_gbps')} Gb/s {p.get('link_layer')}"
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
    return _check(
        "peermem_loaded",
        "ok" if loaded else "fail",
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
    return _check(
        "gpu_hca_affinity",
        "fail" if bad else "ok",
        bad,
        [f"GPU{g.get('gpus')}<->{g.get('hcas')} NUMA {g.get('numa')}" for g in expected.get("numa_affinity") or []],
        f"GPU/HCA NUMA affinity differs from the spec: {sorted(bad)}",
        "Check the HCA slot placement and BIOS NUMA settings against the system's topology",
    )


def judge_node(nvidia_smi, infiniband, lsmod, xid_events, expected, unreadable=None):
    """Run every check; returns {checks, healthy, failed}.

    unreadable: {source name: message} for inputs that could not be read (e.g. {"lsmod": "..."});
    such a source yields a failed `<source>_readable` check and the checks built on it are skipped.
    A malformed expected spec raises OptionError (check_expected); None is an empty spec.
    """
    expected = check_expected(expected if expected is not None else {})
    unreadable = dict(unreadable or {})
    nvidia_smi, infiniband, smi_malformed, ib_malformed = _clean_facts(nvidia_smi, infiniband)
    checks = [
        _readable(
            "nvidia_smi_readable",
            nvidia_smi,
            "the nvidia-smi facts",
            "Run nvidia-smi -q -x on the node; see the message for the cause",
            smi_malformed,
        ),
    ]
    smi = nvidia_smi if isinstance(nvidia_smi, dict) else {}
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
    for source, what in (("lsmod", "lsmod output"), ("kernel_log", "the kernel log")):
        if source in unreadable:
            checks.append(
                _check(
                    f"{source}_readable",
                    "fail",
                    None,
                    what,
                    f"could not read {what}: {unreadable[source]}",
                    "Run it by hand on the node and check permissions",
                )
            )
        else:
            checks.append(_check(f"{source}_readable", "ok", True, what))
    if "kernel_log" not in unreadable:
        checks.append(_xid_check(xid_events or [], expected))
    if expected.get("peermem", True) and "lsmod" not in unreadable:
        checks.append(_peermem_check(lsmod))
    if expected.get("numa_affinity"):
        checks.append(_affinity_check(smi, expected))
    return summarize(checks)


def summarize(checks):
    failed = [c["name"] for c in checks if c["status"] == "fail"]
    return {"checks": checks, "healthy": not failed, "failed_checks": failed}
