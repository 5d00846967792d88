"""GPU and InfiniBand health metrics for node-exporter's textfile collector (installed by gpuforge's
gpu_monitoring role; runs from gpuforge-gpu-metrics.timer as root).

Reads, once per run:
- `nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits`: one CSV row per GPU. Field names are
  those of `nvidia-smi --help-query-gpu` (NVIDIA, "nvidia-smi - NVIDIA System Management Interface program",
  https://docs.nvidia.com/deploy/nvidia-smi/index.html). A field this driver does not know ('Field "x" is
  not a valid field to query.', exit 2) is dropped and the query repeated, so one script serves old and new
  drivers (R535 renamed clocks_throttle_reasons.* to clocks_event_reasons.*).
- the kernel log (`dmesg`) for "NVRM: Xid (PCI:<bus>): <code>, ..." lines (NVIDIA, "Xid Errors",
  https://docs.nvidia.com/deploy/xid-errors/index.html);
- InfiniBand port state from /sys/class/infiniband/<hca>/ports/<n>/{state,phys_state,link_layer} (the
  files node-exporter's infiniband collector reads), or from `ibstat` where that tree is absent.

Writes Prometheus text exposition format to a temporary file in the output directory and renames it over
the output, so node-exporter never reads half a file. Configuration: a JSON file (first argument),
written by the role. Python 3.8+, standard library only (it runs on managed nodes).
"""

import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

# (metric name, nvidia-smi field or alternatives newest first, help, scale). Scale turns MiB into bytes.
MIB = 1048576.0
GPU_FIELDS = [
    ("temperature_celsius", ["temperature.gpu"], "GPU core temperature (nvidia-smi temperature.gpu).", 1.0),
    ("utilization_percent", ["utilization.gpu"], "GPU utilization (nvidia-smi utilization.gpu).", 1.0),
    ("memory_used_bytes", ["memory.used"], "Framebuffer memory used (nvidia-smi memory.used).", MIB),
    ("memory_total_bytes", ["memory.total"], "Framebuffer memory total (nvidia-smi memory.total).", MIB),
    ("power_draw_watts", ["power.draw"], "Board power draw (nvidia-smi power.draw).", 1.0),
    ("power_limit_watts", ["power.limit"], "Enforced power limit (nvidia-smi power.limit).", 1.0),
    (
        "ecc_uncorrected_volatile_errors",
        ["ecc.errors.uncorrected.volatile.total"],
        "Uncorrectable (double-bit) ECC errors since the driver loaded.",
        1.0,
    ),
    (
        "ecc_corrected_volatile_errors",
        ["ecc.errors.corrected.volatile.total"],
        "Corrected (single-bit) ECC errors since the driver loaded.",
        1.0,
    ),
    (
        "thermal_slowdown_active",
        ["clocks_event_reasons.hw_thermal_slowdown", "clocks_throttle_reasons.hw_thermal_slowdown"],
        "1 while HW thermal slowdown holds the clocks down.",
        1.0,
    ),
    ("pcie_link_width_current", ["pcie.link.width.current"], "Current PCIe link width (lanes).", 1.0),
    ("pcie_link_width_max", ["pcie.link.width.max"], "Maximum PCIe link width (lanes).", 1.0),
]
# Memory repairs waiting for a GPU reset: remapped rows on Ampere and later, retired pages before.
REPAIR_FIELDS = [("row_remap", "remapped_rows.pending"), ("page_retirement", "retired_pages.pending")]
IDENTITY_FIELDS = ["index", "uuid", "name", "pci.bus_id", "driver_version"]

INVALID_FIELD = re.compile(r'Field "([^"]+)" is not a valid field to query')
UNREACHABLE = re.compile(r"Unable to determine the device handle for GPU")
XID = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.\d)?\): (\d+),")
IBSTAT_CA = re.compile(r"^CA '([^']+)'")
IBSTAT_PORT = re.compile(r"^\s+Port (\d+):")
IBSTAT_VALUE = re.compile(r"^\s+(State|Physical state|Link layer): (.+)$")


def run(argv, timeout):
    """(exit code, stdout, stderr); 127 when the program is missing, 124 on timeout."""
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=dict(os.environ, LC_ALL="C"),
            check=False,
        )
    except FileNotFoundError:
        return 127, "", f"{argv[0]}: not found"
    except subprocess.TimeoutExpired:
        return 124, "", f"{argv[0]}: timed out after {timeout}s"
    return proc.returncode, proc.stdout, proc.stderr


def escape(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class Exposition:
    """Metric families in text exposition format: HELP and TYPE once per family, samples below."""

    def __init__(self):
        self.families = {}

    def add(self, name, help_text, labels, value):
        family = self.families.setdefault(name, {"help": help_text, "samples": []})
        family["samples"].append((labels, value))

    def text(self):
        lines = []
        for name in sorted(self.families):
            family = self.families[name]
            lines.append("# HELP {} {}".format(name, family["help"]))
            lines.append(f"# TYPE {name} gauge")
            for labels, value in family["samples"]:
                rendered = ",".join(f'{key}="{escape(val)}"' for key, val in sorted(labels.items()))
                lines.append(f"{name}{{{rendered}}} {float(value)!r}" if rendered else f"{name} {float(value)!r}")
        return "\n".join(lines) + "\n"


def number(text):
    """nvidia-smi value -> float, or None for [N/A], [Not Supported] and the like."""
    text = text.strip()
    if text in ("Active", "Yes", "Enabled"):
        return 1.0
    if text in ("Not Active", "No", "Disabled"):
        return 0.0
    try:
        return float(text)
    except ValueError:
        return None


def query_gpus(nvidia_smi, fields, timeout):
    """(rows as dicts keyed by the fields that worked, unreachable GPU count, exit code, dropped fields)."""
    wanted = list(fields)
    dropped = []
    while True:
        code, out, err = run([nvidia_smi, "--query-gpu=" + ",".join(wanted), "--format=csv,noheader,nounits"], timeout)
        invalid = INVALID_FIELD.search(err + out)
        if code == 2 and invalid and invalid.group(1) in wanted and invalid.group(1) not in IDENTITY_FIELDS:
            wanted.remove(invalid.group(1))
            dropped.append(invalid.group(1))
            continue
        break
    rows = []
    unreachable = 0
    for line in out.splitlines():
        if UNREACHABLE.search(line):
            unreachable += 1
            continue
        values = [value.strip() for value in line.split(",")]
        if code in (0, 15) and len(values) == len(wanted):
            rows.append({field: values[position] for position, field in enumerate(wanted)})
    return rows, unreachable, code, dropped


def gpu_metrics(expo, config):
    timeout = float(config.get("timeout_seconds", 20))
    fields = list(IDENTITY_FIELDS)
    for _name, alternatives, _help, _scale in GPU_FIELDS:
        fields.extend(alternatives)
    fields.extend(field for _mechanism, field in REPAIR_FIELDS)
    rows, unreachable, code, dropped = query_gpus(config.get("nvidia_smi", "nvidia-smi"), fields, timeout)
    expo.add("gpuforge_nvidia_smi_exit_code", "Exit code of nvidia-smi --query-gpu (0: all GPUs answered).", {}, code)
    for field in dropped:
        expo.add(
            "gpuforge_nvidia_smi_field_unsupported", "1 for a query field this driver rejects.", {"field": field}, 1
        )
    expo.add("gpuforge_gpus_listed", "GPUs nvidia-smi lists (fallen-off-bus GPUs are not counted).", {}, len(rows))
    expo.add(
        "gpuforge_gpu_unreachable", "GPUs nvidia-smi cannot get a handle for (fallen off the bus).", {}, unreachable
    )
    expected = config.get("expected_gpus")
    if expected is not None:
        expo.add("gpuforge_gpus_expected", "GPUs this node should have (gpuforge inventory).", {}, expected)
    for row in rows:
        labels = {"gpu": row["index"], "uuid": row["uuid"]}
        info = dict(labels, name=row["name"], pci_bus_id=row["pci.bus_id"], driver_version=row["driver_version"])
        expo.add("gpuforge_gpu_info", "GPU identity (value 1).", info, 1)
        for name, alternatives, help_text, scale in GPU_FIELDS:
            present = [field for field in alternatives if field in row]
            value = number(row[present[0]]) if present else None
            if value is not None:
                expo.add("gpuforge_gpu_" + name, help_text, labels, value * scale)
        for mechanism, field in REPAIR_FIELDS:
            value = number(row[field]) if field in row else None
            if value is not None:
                expo.add(
                    "gpuforge_gpu_memory_repair_pending",
                    "1 while a row remap or page retirement waits for a GPU reset.",
                    dict(labels, mechanism=mechanism),
                    value,
                )


def xid_metrics(expo, config):
    code, out, _err = run(config.get("dmesg", ["dmesg"]), float(config.get("timeout_seconds", 20)))
    expo.add("gpuforge_kernel_log_read_exit_code", "Exit code of the kernel log read (dmesg).", {}, code)
    fatal = {str(item) for item in config.get("xid_fatal", [])}
    counts = {}
    for match in XID.finditer(out if code == 0 else ""):
        key = (match.group(1).lower(), match.group(2))
        counts[key] = counts.get(key, 0) + 1
    for (pci, xid), count in sorted(counts.items()):
        labels = {"pci_bus_id": pci, "xid": xid, "fatal": "true" if xid in fatal else "false"}
        expo.add("gpuforge_gpu_xid_events", "NVRM Xid lines in the kernel log, per GPU and code.", labels, count)


def _sysfs_value(path):
    with open(path) as handle:
        text = handle.read().strip()
    # state: "4: ACTIVE", phys_state: "5: LinkUp", link_layer: "InfiniBand"
    return text.split(": ", 1)[1] if ": " in text else text


def ib_ports_sysfs(root):
    ports = []
    for port_dir in sorted(glob.glob(os.path.join(root, "*", "ports", "*"))):
        hca = port_dir.split(os.sep)[-3]
        port = os.path.basename(port_dir)
        ports.append(
            {
                "hca": hca,
                "port": port,
                "state": _sysfs_value(os.path.join(port_dir, "state")),
                "phys_state": _sysfs_value(os.path.join(port_dir, "phys_state")),
                "link_layer": _sysfs_value(os.path.join(port_dir, "link_layer")),
            }
        )
    return ports


def ib_ports_ibstat(text):
    ports = []
    hca = None
    current = None
    for line in text.splitlines():
        match = IBSTAT_CA.match(line)
        if match:
            hca, current = match.group(1), None
            continue
        match = IBSTAT_PORT.match(line)
        if match and hca:
            current = {"hca": hca, "port": match.group(1), "state": "", "phys_state": "", "link_layer": ""}
            ports.append(current)
            continue
        match = IBSTAT_VALUE.match(line)
        if match and current is not None:
            key = {"State": "state", "Physical state": "phys_state", "Link layer": "link_layer"}[match.group(1)]
            current[key] = match.group(2).strip()
    return ports


def ib_metrics(expo, config):
    root = config.get("sysfs_infiniband", "/sys/class/infiniband")
    if glob.glob(os.path.join(root, "*", "ports", "*")):
        ports, source = ib_ports_sysfs(root), "sysfs"
    else:
        code, out, _err = run([config.get("ibstat", "ibstat")], float(config.get("timeout_seconds", 20)))
        ports, source = (ib_ports_ibstat(out) if code == 0 else []), "ibstat"
    for port in ports:
        labels = {"hca": port["hca"], "port": port["port"], "link_layer": port["link_layer"]}
        expo.add(
            "gpuforge_ib_port_active", "1 when the port state is ACTIVE.", labels, port["state"].upper() == "ACTIVE"
        )
        info = dict(labels, state=port["state"], phys_state=port["phys_state"], source=source)
        expo.add("gpuforge_ib_port_info", "InfiniBand/RoCE port state (value 1).", info, 1)


def collect(config):
    expo = Exposition()
    if config.get("gpus", True):
        gpu_metrics(expo, config)
        xid_metrics(expo, config)
    if config.get("infiniband", True):
        ib_metrics(expo, config)
    expo.add(
        "gpuforge_gpu_metrics_timestamp_seconds", "When gpuforge-gpu-metrics last wrote this file.", {}, time.time()
    )
    return expo.text()


def write_atomically(path, text):
    directory = os.path.dirname(path) or "."
    handle, temporary = tempfile.mkstemp(prefix=".gpuforge-gpu-metrics.", dir=directory)
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: gpuforge-gpu-metrics CONFIG.json\n")
        return 2
    with open(argv[1]) as handle:
        config = json.load(handle)
    text = collect(config)
    if config.get("output"):
        write_atomically(config["output"], text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
