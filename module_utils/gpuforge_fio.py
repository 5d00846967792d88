"""fio storage benchmark: the command line of gpuforge's four jobs, the parser of ``fio --output-format=json``
and the verdict against per-site thresholds.

Units, from the fio(1) manual (fio 3.33, Debian bookworm), section "JSON OUTPUT"
(https://manpages.debian.org/bookworm/fio/fio.1.en.html): "The runtime value is reported in msec and the bw
value is reported in 1024 bytes per second units" (KiB/s); latencies are in nanoseconds (``clat_ns``), and
``clat_ns.percentile`` is keyed by the percentile as text (``"99.000000"``). fio prints error lines such as
``fio: pid=..., err=2/file:...`` on stdout before the JSON document (captured in
tests/fixtures/fio/fio-3.33_ext4_job_error_unlink.txt), so the parser reads from the first ``{``.

Thresholds: the site's (what it measured on its own storage, or its vendor's figures for it) win key by key over
the floors gpuforge ships per storage kind (DEFAULT_THRESHOLDS: the sequential read a reference design's training
node needed, from the documents docs/sources.md names); a job with no threshold from either is reported, not
judged.

Stdlib only, Python 3.8; gpuforge_errors and gpuforge_options ship with it.
"""

from __future__ import annotations

import json

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import FAIL, PASS, bench_check
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import worst_status as overall_status
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_options import number, record
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_units import to_number

__all__ = [
    "DEFAULT_THRESHOLDS",
    "EXPECT",
    "JOBS",
    "STORAGE_KINDS",
    "fio_command",
    "judge_fio",
    "overall_status",
    "parse_fio",
    "thresholds_for",
]


# gpuforge's jobs: name -> (fio rw=, block-size kind, the direction fio reports it under).
JOBS = {
    "seq_read": ("read", "seq", "read"),
    "seq_write": ("write", "seq", "write"),
    "rand_read": ("randread", "rand", "read"),
    "rand_write": ("randwrite", "rand", "write"),
}

# The thresholds of one target (a mount point or local scratch): a floor per job in the job's own unit
# (MiB/s for sequential jobs, IOPS for random ones) and an optional ceiling on the 99th percentile of the
# completion latency of each random job, in microseconds. Every key is optional.
EXPECT = record(
    {
        "seq_read_mib_per_s": number(above=0),
        "seq_write_mib_per_s": number(above=0),
        "rand_read_iops": number(above=0),
        "rand_write_iops": number(above=0),
        "rand_read_p99_us": number(above=0),
        "rand_write_p99_us": number(above=0),
    }
)
# job -> (the floor's key, the measured field it bounds, unit)
_FLOORS = {
    "seq_read": ("seq_read_mib_per_s", "bw_mib_s", "MiB/s"),
    "seq_write": ("seq_write_mib_per_s", "bw_mib_s", "MiB/s"),
    "rand_read": ("rand_read_iops", "iops", "IOPS"),
    "rand_write": ("rand_write_iops", "iops", "IOPS"),
}
_CEILINGS = {"rand_read": "rand_read_p99_us", "rand_write": "rand_write_p99_us"}

# The storage kinds of the benchmark's targets (roles/gpuforge_bench, filter gpuforge_bench_fio_targets): NFS
# (over IPoIB in the reference designs), IBM Spectrum Scale, local scratch, a site's extra target.
STORAGE_KINDS = ("nfs", "gpfs", "scratch", "extra")
# The floors gpuforge ships per storage kind: what one training node of a reference design read from that storage
# while its GPUs ran at full speed, so a node below it starves its GPUs. Only sequential reads have such a figure in
# the documents; the other jobs stay the site's to set (reported, not judged, until it does). Each entry: the
# thresholds (units in the names) and their source, cited by the document's title (docs/sources.md).
DEFAULT_THRESHOLDS = {
    # Dell EMC Ready Solutions for AI, section 3.1.5: ResNet-50 on one PowerEdge C4140 (4x V100-SXM2) trained at
    # 2,940 images/s reading 2,680 Mb/s (Table 7, profiled on the Isilon F800: 335 MB/s = 319.6 MiB/s), and trained
    # at the same rate from the NFS share the head node exports over IPoIB ("no perceptible difference").
    "nfs": (
        {"seq_read_mib_per_s": 319},
        "Dell EMC Ready Solutions for AI, section 3.1.5 and Table 7: ResNet-50 on one node reads 2,680 Mb/s, "
        "the same from NFS over IPoIB",
    ),
    # IBM Redpaper REDP-5610, section 4.5: ResNet-50 on one DGX-1 (8x V100) at 7,096 images/s (synthetic data: the
    # GPUs' own rate, which the Spectrum Scale file system must keep up with), at 0.113 MB per ILSVRC2012 image
    # (Dell EMC Ready Solutions for AI, section 3.1.5): 7,096 x 0.113 MB/s = 801.8 MB/s = 764.7 MiB/s.
    "gpfs": (
        {"seq_read_mib_per_s": 764},
        "IBM Redpaper REDP-5610, section 4.5: ResNet-50 at 7,096 images/s on one DGX-1, x 0.113 MB per ILSVRC2012 "
        "image (Dell EMC Ready Solutions for AI, section 3.1.5)",
    ),
    # Local scratch (the NVMe scratch option of Dell EMC Ready Solutions for AI, section 3.1.5) feeds the same node
    # as the shared storage it stands in for: the same per-node read.
    "scratch": (
        {"seq_read_mib_per_s": 319},
        "Dell EMC Ready Solutions for AI, section 3.1.5 and Table 7: ResNet-50 on one node reads 2,680 Mb/s "
        "(local NVMe scratch among the storage compared)",
    ),
}
SITE_SOURCE = "site threshold gpuforge_bench_fio_thresholds"


def thresholds_for(site=None, kind=None):
    """(expect, {key: source}) of one target: the site's thresholds (``site``, already the target's own or the
    site's ``default``) over the floors gpuforge ships for the storage ``kind``, key by key (one precedence:
    site > default)."""
    shipped, source = DEFAULT_THRESHOLDS.get(kind or "", ({}, ""))
    expect = dict(shipped)
    sources = {key: f"gpuforge default for {kind}: {source}" for key in shipped}
    for key, value in (site or {}).items():
        if value is not None:
            expect[key] = value
            sources[key] = SITE_SOURCE
    return expect, sources


def fio_command(
    fio: str,
    directory: str,
    filename: str,
    size: str,
    runtime: int,
    jobs: list,
    seq_block_size: str = "1M",
    rand_block_size: str = "4k",
    ioengine: str = "libaio",
    iodepth: int = 16,
    direct: bool = True,
) -> list:
    """argv of one fio run: the jobs one after another (``stonewall``) on one test file in ``directory``.

    ``time_based`` with ``runtime`` makes each job run that many seconds whatever the size (reads loop over
    the file); ``direct`` (O_DIRECT) keeps the page cache out of the numbers, as Dell EMC Ready Solutions for AI
    dropped the caches before each run.
    """
    unknown = [job for job in jobs if job not in JOBS]
    if unknown or not jobs:
        raise ValueError(f"jobs must be a non-empty list of {', '.join(JOBS)}; got {jobs!r}")
    argv = [
        fio,
        "--output-format=json",
        f"--directory={directory}",
        f"--filename={filename}",
        f"--size={size}",
        f"--runtime={int(runtime)}",
        "--time_based",
        f"--ioengine={ioengine}",
        f"--iodepth={int(iodepth)}",
        f"--direct={1 if direct else 0}",
    ]
    sizes = {"seq": seq_block_size, "rand": rand_block_size}
    for job in jobs:
        rw, kind, _direction = JOBS[job]
        argv += [f"--name={job}", f"--rw={rw}", f"--bs={sizes[kind]}", "--stonewall"]
    return argv


def _direction(section) -> dict | None:
    """bw (KiB/s) -> MiB/s, iops, runtime, bytes and the 99th-percentile completion latency in µs."""
    if not isinstance(section, dict):
        return None
    bw_kib = to_number(section.get("bw"))
    clat = section.get("clat_ns") if isinstance(section.get("clat_ns"), dict) else {}
    percentiles = clat.get("percentile") if isinstance(clat.get("percentile"), dict) else {}
    p99 = to_number(percentiles.get("99.000000"))
    mean = to_number(clat.get("mean"))
    return {
        "bw_kib_s": bw_kib,
        "bw_mib_s": None if bw_kib is None else round(bw_kib / 1024.0, 2),
        "iops": None if to_number(section.get("iops")) is None else round(float(section["iops"]), 2),
        "io_bytes": to_number(section.get("io_bytes")),
        "runtime_ms": to_number(section.get("runtime")),
        "clat_mean_us": None if mean is None else round(mean / 1000.0, 2),
        "clat_p99_us": None if p99 is None else round(p99 / 1000.0, 2),
    }


def parse_fio(text: str) -> dict:
    """The fio JSON document of ``text`` -> {fio_version, jobs: [{name, rw, bs, error, direction, read,
    write, ...}], notices (non-JSON lines fio printed first), errors}. Raises ParseError without one."""
    text = text or ""
    start = text.find("{")
    if start < 0:
        raise ParseError("no JSON document in the fio output (was it run with --output-format=json?)")
    try:
        document, _end = json.JSONDecoder().raw_decode(text[start:])
    except ValueError as exc:
        raise ParseError(f"the fio JSON document is unreadable: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("jobs"), list):
        raise ParseError("the fio JSON document has no 'jobs' list")
    notices = [line.strip() for line in text[:start].splitlines() if line.strip()]
    jobs, errors = [], []
    for index, job in enumerate(document["jobs"]):
        if not isinstance(job, dict):
            errors.append(f"jobs[{index}] is not an object")
            continue
        options = job.get("job options") if isinstance(job.get("job options"), dict) else {}
        name = str(job.get("jobname") or options.get("name") or f"job{index}")
        rw = str(options.get("rw") or "")
        known = JOBS.get(name)
        direction = known[2] if known else ("write" if "write" in rw else "read")
        entry = {
            "name": name,
            "rw": rw or (known[0] if known else ""),
            "bs": options.get("bs"),
            "error": job.get("error") if isinstance(job.get("error"), int) else None,
            "direction": direction,
            "read": _direction(job.get("read")),
            "write": _direction(job.get("write")),
        }
        entry["measured"] = entry[direction]
        if entry["error"]:
            errors.append(f"job {name}: fio error {entry['error']}")
        jobs.append(entry)
    return {
        "kind": "fio",
        "fio_version": document.get("fio version"),
        "global_options": document.get("global options") if isinstance(document.get("global options"), dict) else {},
        "jobs": jobs,
        "notices": notices,
        "errors": errors,
    }


def judge_fio(result: dict, expect: dict | None = None, target: str = "") -> list:
    """One check per job: fail when fio reported an error for it or measured nothing, or when a threshold
    of ``expect`` (see EXPECT) is missed; a job with no threshold gets no check (reported, not judged).
    A value of the wrong type or an unknown key raises OptionError."""
    expect = EXPECT("expect", expect or {})
    where = f" on {target}" if target else ""
    checks = []
    for job in result.get("jobs", []):
        name = job["name"]
        measured = job.get("measured") or {}
        if job.get("error"):
            checks.append(
                bench_check(
                    f"fio_{name}",
                    FAIL,
                    f"fio error {job['error']}",
                    "no error",
                    f"fio could not run {name}{where}: read the notices (errno {job['error']}); check the "
                    "directory is writable and has room for the test file",
                )
            )
            continue
        if not measured.get("io_bytes"):
            checks.append(
                bench_check(
                    f"fio_{name}",
                    FAIL,
                    measured.get("io_bytes"),
                    "> 0 bytes moved",
                    f"fio moved no data in {name}{where}: check the runtime and that the file system is not full",
                )
            )
            continue
        floor_key, field, unit = _FLOORS.get(name, (None, None, None))
        if floor_key and expect.get(floor_key) is not None:
            observed = measured.get(field)
            floor = expect[floor_key]
            status = PASS if observed is not None and observed >= floor else FAIL
            checks.append(
                bench_check(
                    f"fio_{name}",
                    status,
                    observed,
                    f">= {floor:g} {unit} ({floor_key})",
                    ""
                    if status == PASS
                    else f"{name}{where} is below the threshold: check the mount options (NFS rsize/wsize, "
                    "proto=rdma), the network path (IPoIB link, ib_write_bw) and the server's load",
                )
            )
        ceiling_key = _CEILINGS.get(name)
        if ceiling_key and expect.get(ceiling_key) is not None:
            observed = measured.get("clat_p99_us")
            ceiling = expect[ceiling_key]
            status = PASS if observed is not None and observed <= ceiling else FAIL
            checks.append(
                bench_check(
                    f"fio_{name}_p99",
                    status,
                    observed,
                    f"<= {ceiling:g} us ({ceiling_key})",
                    "" if status == PASS else f"{name}{where}: the 99th-percentile completion latency is too high",
                )
            )
    return checks
