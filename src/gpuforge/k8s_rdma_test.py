"""Judge the in-pod RDMA test of `gpuforge k8s verify` (roles/rdma_workload_access/templates/verify/).

A server and a client pod, on two nodes, each print marker lines that split their log into the HCA the RDMA shared
device plugin gave them, ``ibv_devinfo`` and ``ibstatus`` of its port, and ``ib_write_bw``'s output. The sections go
through the same parsers as the host checks (gpuforge_infiniband for ibv_devinfo/ibstatus, gpuforge_perftest for
ib_write_bw) and the pair becomes an ``ib_write_bw`` result in the shape the host benchmark writes to
``bench/<run>/summary.json`` (roles/gpuforge_bench/tasks/ib_pair.yml, schemas/bench-summary.schema.json), so the
same threshold table judges it (gpuforge_bench_attribution_floors, the caller's step) and the report shows it as a
``benchmark_run`` record of benchmark ib_write_bw. The ports' state is a ``k8s_check`` per node (``rdma_pod_port``).

Pure functions over the pods' JSON and logs; src/gpuforge/k8s_verify.py fetches them. Only the CLI uses it, so it lives
in the CLI's package, not in the collection's module_utils (docs/architecture.md, "module_utils by concern").
"""

from __future__ import annotations

from gpuforge.k8s_verify_judge import FAIL, PASS, check, pod_problems
from gpuforge.paths import collection_import

# The parsers are the collection's (the host checks run them on the nodes); this judge is the CLI's.
ParseError = collection_import("plugins.module_utils.gpuforge_errors").ParseError
parse_ibstatus = collection_import("plugins.module_utils.gpuforge_infiniband").parse_ibstatus
parse_ibv_devinfo = collection_import("plugins.module_utils.gpuforge_infiniband").parse_ibv_devinfo
pair_name = collection_import("plugins.module_utils.gpuforge_localize").pair_name
parse_perftest_bw = collection_import("plugins.module_utils.gpuforge_perftest").parse_perftest_bw

MARKER = "### gpuforge-rdma-test "
SECTIONS = ("ibv_devinfo", "ibstatus", "ib_write_bw")
# The results of the in-pod pairs form their own group beside the host pairs (group ib_write_bw).
GROUP = "k8s_pod"
UNIT = "Gb/s"
SOURCE_PORT = "ibv_devinfo and ibstatus inside the test pod (rdma-core, infiniband-diags): port Active, link up"

__all__ = ["GROUP", "MARKER", "SECTIONS", "judge_port", "pair_entry", "port_facts", "result_name", "split_log"]


def split_log(text):
    """``{hca, sections: {ibv_devinfo, ibstatus, ib_write_bw}, other}`` of a test pod's log (absent sections "")."""
    hca, current = None, "other"
    parts = {name: [] for name in (*SECTIONS, "other")}
    for line in (text or "").splitlines():
        if line.startswith(MARKER):
            word, _sep, rest = line[len(MARKER) :].partition(" ")
            if word == "hca":
                hca = None if rest.strip() in ("", "none") else rest.strip()
                current = "other"
            elif word in SECTIONS:
                current = word
            continue
        parts[current].append(line)
    return {
        "hca": hca,
        "sections": {name: "\n".join(parts[name]) for name in SECTIONS},
        "other": "\n".join(parts["other"]),
    }


def _port_of(parsed, hca, port):
    for ca in parsed.get("cas") or []:
        if ca.get("name") == hca:
            for entry in ca.get("ports") or []:
                if entry.get("port") == port:
                    return entry
    return {}


def port_facts(split, port=1):
    """The test port as both tools saw it: ``{hca, port, state, phys_state, rate_gbit_per_s, link_layer, devinfo_state,
    errors}`` (None where a tool said nothing), and ``infiniband``: the ibstatus port in the infiniband facts shape
    (``{hcas: [{name, ports}]}``) that gpuforge_bench_ib_port_links reads."""
    hca = split["hca"]
    facts = {"hca": hca, "port": port, "errors": []}
    status, devinfo = {}, {}
    if hca:
        try:
            status = _port_of(parse_ibstatus(split["sections"]["ibstatus"]), hca, port)
        except ParseError as exc:
            facts["errors"].append(f"ibstatus: {exc}")
        try:
            devinfo = _port_of(parse_ibv_devinfo(split["sections"]["ibv_devinfo"]), hca, port)
        except ParseError as exc:
            facts["errors"].append(f"ibv_devinfo: {exc}")
    for key in ("state", "phys_state", "rate_gbit_per_s", "link_layer"):
        facts[key] = status.get(key)
    facts["devinfo_state"] = devinfo.get("state")
    facts["link_layer"] = facts["link_layer"] or devinfo.get("link_layer")
    facts["infiniband"] = {"hcas": [{"name": hca, "ports": [{"port": port, **status}]}]} if status else {"hcas": []}
    return facts


def judge_port(node, role, pod, split, port=1):
    """``rdma_pod_port`` of one test pod's node: the plugin gave the pod an HCA and its port is Active and LinkUp."""
    facts = port_facts(split, port)
    observed = {key: facts[key] for key in ("hca", "port", "state", "phys_state", "rate_gbit_per_s", "link_layer")}
    observed.update(devinfo_state=facts["devinfo_state"], role=role, problems=pod_problems(pod or {}))
    expected = {"state": "Active", "phys_state": "LinkUp"}
    if not facts["hca"]:
        status = FAIL
        detail = "; ".join(observed["problems"]) or split["other"].strip() or "the pod printed nothing"
        remedy = (
            f"the {role} pod has no RDMA device ({detail}): check that the RDMA shared device plugin offers the "
            "resource on this node (rdma_allocatable) and that the pod image has ibv_devinfo and ibstatus"
        )
    elif facts["state"] == "Active" and facts["phys_state"] == "LinkUp":
        status, remedy = PASS, ""
    elif facts["state"] is None:
        status = FAIL
        remedy = (
            f"ibstatus printed nothing for {facts['hca']} port {port} in the {role} pod "
            f"({'; '.join(facts['errors']) or 'no port block'}): is infiniband-diags in the image?"
        )
    else:
        status = FAIL
        remedy = (
            f"{facts['hca']} port {port} is {facts['state']}/{facts['phys_state']} inside the pod: check the cable and "
            "switch port and that a subnet manager runs (ibstat on the node shows the same)"
        )
    return check("rdma_pod_port", "pod", status, observed, expected, SOURCE_PORT, remedy, node=node)


def result_name(server, client, hca, port=1):
    """The pair's result name: the host benchmark's (gpuforge_localize.pair_name) marked as in-pod."""
    return f"pod-{pair_name(server, client, hca or 'unknown', port)}"


def pair_entry(
    server, client, splits, pods, threshold, line_rate_gbit_per_s=None, expected_gbit_per_s=None, port=1, why=""
):
    """The pair as an ``ib_write_bw`` summary result before judging, as roles/gpuforge_bench/tasks/ib_pair.yml
    builds a host pair: value (Gb/s, ib_write_bw's average), expected, line rate, link speed, MB/sec, and, when
    the link speed has a threshold table entry, its floor (threshold in Gb/s, min_mib_per_s, threshold_source).

    ``splits``/``pods``: {"server": ..., "client": ...} (split_log of each log; each pod's JSON). ``threshold``:
    gpuforge_bench_ib_pair_threshold's answer for the pair. ``why``: set when the test could not run (no value).
    """
    hca = splits["client"]["hca"] or splits["server"]["hca"]
    rail = f"{hca}/{port}" if hca else None
    value, mib_per_s, errors = None, None, []
    if not why:
        try:
            parsed = parse_perftest_bw(splits["client"]["sections"]["ib_write_bw"])
            mib_per_s = parsed.get("bw_average_mib_per_s")
            value = parsed.get("bw_average_gbit_per_s")
            errors = list(parsed.get("errors") or [])
        except ParseError as exc:
            errors = [f"ib_write_bw: {exc}"]
        phase = ((pods.get("client") or {}).get("status") or {}).get("phase")
        if value is None:
            detail = "; ".join(errors) or f"no result table (client pod {phase or 'unknown'})"
            why = f"the in-pod ib_write_bw produced no bandwidth: {detail}"
            if any("MR" in error for error in errors):
                # IBM Redpaper REDP-5610 (section 3.4.3): an unprivileged pod fails so without a locked-memory limit.
                why += (
                    "; registering memory failed: the pod needs IPC_LOCK (rdma_workload_access) and, as a non-root "
                    "user, an unlimited memlock limit from the container runtime (openshift_gpu_operators_memlock)"
                )
    entry = {
        "name": result_name(server, client, hca, port),
        "group": GROUP,
        "nodes": [server, client],
        "hca": hca or "unknown",
        "port": port,
        "rail": rail or f"unknown/{port}",
        "round": 1,
        "inactive": [],
        "value": value,
        "unit": UNIT,
        "expected": expected_gbit_per_s if expected_gbit_per_s is not None else line_rate_gbit_per_s,
        "line_rate_gbit_per_s": line_rate_gbit_per_s,
        # No module judged the pair: the verdict is the summary's, from the threshold below.
        "module_verdict": None,
        "error": why or None,
        "link_speed": threshold.get("link_speed"),
        "mib_per_s": mib_per_s,
    }
    if threshold.get("min_gbit_per_s") is not None:
        entry.update(
            threshold=threshold["min_gbit_per_s"],
            min_mib_per_s=threshold.get("min_mib_per_s"),
            threshold_source=threshold.get("threshold_source"),
        )
    return entry
