"""gpuforge_units: the one set of number helpers the parsers read numeric cells with, on every form the tools
print (plain, C's %g/%e as nccl-tests prints them, 0x hexadecimal, a number before its unit)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_nccl_tests import parse_nccl_tests
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_units import (
    leading_integer,
    leading_number,
    to_integer,
    to_number,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("100", 100),
        ("-3", -3),
        (" 2.50 ", 2.5),
        ("100.0", 100),
        ("1e+06", 1000000),  # nccl-tests' %6g of a wrong-element count (NVIDIA/nccl-tests@v2.19.6 src/util.cu:508)
        ("1.2e+09", 1200000000),
        ("2e-07", 2e-07),  # the %e error column of nccl-tests' older tables
        ("5.1e+03", 5100),
        (".5", 0.5),
        ("0x53", 0x53),
        ("0X00FF", 255),
        (7, 7),
        (2.5, 2.5),
    ],
)
def test_to_number_reads_every_form(text, value):
    found = to_number(text)
    assert found == value
    assert isinstance(found, int) is (float(value).is_integer() and not isinstance(text, float))


@pytest.mark.parametrize(
    "text", ["N/A", "[N/A]", "Not Supported", "-", "", "nan", "inf", "12 MiB", "1,024", None, True, math.nan, [1]]
)
def test_what_is_not_a_number_is_none_never_zero(text):
    assert to_number(text) is None


def test_to_integer_takes_whole_values_only():
    assert to_integer("1e+06") == 1000000 and isinstance(to_integer("8.0"), int)
    assert to_integer("0x10") == 16
    assert to_integer("2.5") is None and to_integer("N/A") is None and to_integer(False) is None


@pytest.mark.parametrize(
    ("text", "value"),
    [("16384 MiB", 16384), ("250.00 W", 250), ("16x", 16), ("0x53", 83), ("1.5e+03 MB/s", 1500), ("100 Gb/sec", 100)],
)
def test_leading_number_reads_the_number_before_its_unit(text, value):
    assert leading_number(text) == value


def test_leading_integer_drops_the_fraction_and_keeps_none():
    assert leading_integer("1410.5 MHz") == 1410
    assert leading_integer("N/A") is None and leading_number("MiB 12") is None


def test_nccl_tests_counts_printed_in_scientific_notation_still_count():
    # A v2.19-layout row whose #wrong cells nccl-tests printed with %6g: 1e+06 and 1.2e+07 wrong elements.
    header = (
        "#                                                              out-of-place                       in-place\n"
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw"
        " #wrong\n"
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)"
        "  (GB/s)\n"
    )
    row = (
        "   8388608       2097152     float     sum      -1   1.2e+04    0.70    1.31  1e+06   1.1e+04    0.76"
        "    1.43 1.2e+07\n"
    )
    parsed = parse_nccl_tests(header + row)
    run = parsed["rows"][0]["out_of_place"]
    assert run["wrong"] == 1000000 and isinstance(run["wrong"], int)
    assert run["time_us"] == 12000
    assert parsed["rows"][0]["in_place"]["wrong"] == 12000000


def test_the_error_column_of_a_real_legacy_table_is_read():
    # IBM Redpaper REDP-5610 Example 4-1 (tests/fixtures/nccl-tests/SOURCES.md): the error column prints %e.
    text = (FIXTURES / "nccl-tests" / "redp5610_ex4-1_1x8xv100_nvlink_legacy.txt").read_text(encoding="utf-8")
    rows = parse_nccl_tests(text)["rows"]
    assert rows[0]["size"] == 8
    assert rows[0]["out_of_place"]["error"] == pytest.approx(2e-07)
