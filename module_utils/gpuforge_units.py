"""Numbers as the tools print them: the one set of helpers every gpuforge parser reads numeric cells with.

The tools print numbers in several forms, all read here:

- plain integers and decimals (``100``, ``-3``, ``2.50``);
- C's ``%g`` and ``%e`` (``1e+06``, ``1.2e+09``, ``5e-05``): nccl-tests prints its ``#wrong`` count with ``%6g``
  and its time and bandwidth cells, when they do not fit their width, with ``%.1e``/``%.0e``, and the average bus
  bandwidth with ``%g`` (NVIDIA/nccl-tests@v2.19.6:src/util.cu, lines 488-508 and 778), so a count of a million
  wrong elements reads ``1e+06``;
- hexadecimal with ``0x`` (perfquery's counters and masks, nvidia-smi's ``0x53``-style fields);
- a number with its unit after it (``16384 MiB``, ``250.00 W``, ``16x``, ``100 Gb/sec``): leading_number.

A number whose value is whole comes back as an int (``1e+06`` -> 1000000, ``100.0`` -> 100), so a count printed
in scientific notation still counts as a count; any other as a float. Words (``N/A``, ``[N/A]``, ``Not
Supported``, ``-``), NaN, infinities, booleans and None give None: an unreadable cell is absent, never 0.
Stdlib only; node Python 3.8+.
"""

from __future__ import annotations

import math
import re

__all__ = ["leading_integer", "leading_number", "to_integer", "to_number"]

# A decimal number as C prints it with %d, %f, %g or %e (sign, digits, point, exponent); or 0x hexadecimal.
_DECIMAL = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_HEX = r"[-+]?0[xX][0-9a-fA-F]+"
_WHOLE_RE = re.compile(rf"(?:{_HEX}|{_DECIMAL})")
_LEADING_UNIT_RE = re.compile(rf"\s*({_HEX}|{_DECIMAL})")


def _from_text(text: str):
    if text.lower().lstrip("+-").startswith("0x"):
        return int(text, 16)
    value = float(text)
    if math.isnan(value) or math.isinf(value):
        return None
    return int(value) if value.is_integer() else value


def to_number(value):
    """An int or float from a cell the whole of which is a number (surrounding white space aside); None for
    anything else. An int or float passed in comes back as it is (NaN and infinities as None)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return None if isinstance(value, float) and (math.isnan(value) or math.isinf(value)) else value
    if not isinstance(value, str) or not _WHOLE_RE.fullmatch(value.strip()):
        return None
    return _from_text(value.strip())


def to_integer(value):
    """to_number(value) when it is whole, as an int (``1e+06`` -> 1000000, ``8.0`` -> 8); None otherwise."""
    found = to_number(value)
    if found is None or (isinstance(found, float) and not found.is_integer()):
        return None
    return int(found)


def leading_number(value):
    """The number a cell starts with, before its unit (``16384 MiB`` -> 16384, ``250.00 W`` -> 250,
    ``1.5e+03 MB/s`` -> 1500, ``16x`` -> 16, ``0x53`` -> 83); None when it starts with no number."""
    if not isinstance(value, str):
        return to_number(value)
    match = _LEADING_UNIT_RE.match(value)
    if not match:
        return None
    return _from_text(match.group(1))


def leading_integer(value):
    """leading_number(value) as an int, its fraction dropped (``1410.5 MHz`` -> 1410); None without a number."""
    found = leading_number(value)
    return None if found is None else int(found)
