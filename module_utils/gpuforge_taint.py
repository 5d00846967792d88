"""The kernel taint check: /proc/sys/kernel/tainted, parsed and judged (stdlib only, Python 3.8+).

The file holds one decimal number, a bit mask; each bit is a reason the kernel marked itself tainted, and the mark
stays until the next boot (Linux kernel documentation, "Tainted kernels",
https://docs.kernel.org/admin-guide/tainted-kernels.html, "Table for decoding tainted state": bit, letter,
meaning). A GPU node is always tainted by the NVIDIA driver (bit 0 P, a proprietary module; bit 12 O, built out of
tree; bit 13 E, unsigned where module signing is on), and by MLNX_OFED's modules: those bits say nothing about the
node's health. The bits that do are the spec's: ``kernel_taint_fail_bits`` (default: 4 M, a machine check
exception; 5 B, a bad page referenced; 7 D, the kernel oopsed or hit a BUG) and ``kernel_taint_warn_bits``
(default: 1 F and 3 R, a module force-loaded or force-unloaded; 9 W, the kernel issued a warning; 14 L, a soft
lockup).
"""

from __future__ import annotations

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import FAIL, PASS, WARN, node_check
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError

__all__ = ["TAINT_FLAGS", "judge_taint", "parse_tainted", "taint_flags"]

# bit -> (letter, meaning), "Tainted kernels", table for decoding tainted state.
TAINT_FLAGS = {
    0: ("P", "proprietary module was loaded"),
    1: ("F", "module was force loaded"),
    2: ("S", "kernel running on an out of specification system"),
    3: ("R", "module was force unloaded"),
    4: ("M", "processor reported a Machine Check Exception (MCE)"),
    5: ("B", "bad page referenced or some unexpected page flags"),
    6: ("U", "taint requested by userspace application"),
    7: ("D", "kernel died recently, i.e. there was an OOPS or BUG"),
    8: ("A", "ACPI table overridden by user"),
    9: ("W", "kernel issued warning"),
    10: ("C", "staging driver was loaded"),
    11: ("I", "workaround for bug in platform firmware applied"),
    12: ("O", "externally-built (out-of-tree) module was loaded"),
    13: ("E", "unsigned module was loaded"),
    14: ("L", "soft lockup occurred"),
    15: ("K", "kernel has been live patched"),
    16: ("X", "auxiliary taint, defined for and used by distros"),
    17: ("T", "kernel was built with the struct randomization plugin"),
    18: ("N", "an in-kernel test has been run"),
}
DEFAULT_FAIL_BITS = (4, 5, 7)
DEFAULT_WARN_BITS = (1, 3, 9, 14)
REMEDY = (
    "The taint stays until the next boot. Find the event that set it in this boot's kernel log "
    "(journalctl -k -b | grep -iE 'mce|machine check|bad page|BUG:|Oops|WARNING:|soft lockup'), fix its cause (a "
    "machine check or a bad page: the vendor's memory and CPU diagnostics, replace the failing part; an oops or a "
    "warning: the driver or kernel release that raised it), then reboot the node to clear the flag (Linux kernel "
    "documentation, 'Tainted kernels')"
)


def parse_tainted(text: str) -> int:
    """The bit mask /proc/sys/kernel/tainted holds (one decimal number); ParseError for anything else."""
    value = (text or "").strip()
    if not value.isdigit():
        raise ParseError(f"/proc/sys/kernel/tainted holds {value[:40]!r}, not a decimal number")
    return int(value)


def taint_flags(mask: int) -> dict:
    """{bit: "<letter>: <meaning>"} of the bits set in mask (a bit the table does not know: "?: bit <n>")."""
    found = {}
    for bit in range(mask.bit_length()):
        if mask >> bit & 1:
            letter, meaning = TAINT_FLAGS.get(bit, ("?", f"bit {bit}"))
            found[bit] = f"{letter}: {meaning}"
    return found


def judge_taint(sources: dict, expected: dict) -> dict:
    """The kernel_taint check over sources["tainted"] (the file's text, or gpuforge_registry.Unreadable): a bit of
    expected.kernel_taint_fail_bits fails, one of kernel_taint_warn_bits warns, the others (the driver's P, O, E)
    pass; a file that cannot be read or parsed fails, naming why."""
    from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_registry import Unreadable

    fail_bits = sorted(expected.get("kernel_taint_fail_bits", DEFAULT_FAIL_BITS))
    warn_bits = sorted(expected.get("kernel_taint_warn_bits", DEFAULT_WARN_BITS))
    wanted = {"fail_bits": fail_bits, "warn_bits": warn_bits}
    text = sources.get("tainted")
    try:
        if isinstance(text, Unreadable) or text is None:
            raise ParseError(str(text or "no /proc/sys/kernel/tainted was read"))
        mask = parse_tainted(text)
    except ParseError as exc:
        fix = "Read /proc/sys/kernel/tainted on the node (cat it: it is world-readable on Linux)"
        return node_check("kernel_taint", FAIL, None, wanted, f"kernel taint unknown: {exc}", fix)
    flags = taint_flags(mask)
    failing = {bit: flag for bit, flag in flags.items() if bit in fail_bits}
    warning = {bit: flag for bit, flag in flags.items() if bit in warn_bits}
    shown = failing or warning
    status = FAIL if failing else (WARN if warning else PASS)
    observed = {"value": mask, "flags": {str(bit): flag for bit, flag in flags.items()}}
    fault = f"kernel tainted ({mask}): " + "; ".join(f"bit {bit} {flag}" for bit, flag in shown.items())
    return node_check("kernel_taint", status, observed, wanted, fault, REMEDY)
