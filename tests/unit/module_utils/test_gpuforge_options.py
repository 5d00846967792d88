"""Kinds for the modules' free-form dict options: coercion of what -e hands a module, errors naming the path."""

from __future__ import annotations

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_options import (
    OptionError,
    anything,
    boolean,
    env_vars,
    integer,
    list_of,
    mapping_of,
    number,
    record,
    scalar_text,
    string,
)


def message(kind, value, path="opt"):
    with pytest.raises(OptionError) as info:
        kind(path, value)
    return str(info.value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(50, 50), (12.5, 12.5), ("50", 50.0), (" 12.5 ", 12.5), ("1e3", 1000.0), (0, 0)],
)
def test_number_keeps_numbers_and_coerces_numeric_strings(value, expected):
    result = number()("expect.min_busbw_gbyte_per_s", value)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("fifty", "must be a number, got 'fifty'"),
        (True, "must be a number, got True"),
        ([50], "must be a number, got [50]"),
        (None, "must be a number, got None"),
        ({"a": 1}, "must be a number, got {'a': 1}"),
        ("nan", "must be a finite number, got 'nan'"),
        (float("inf"), "must be a finite number, got inf"),
        (10**400, "must be a number, got 1000"),
    ],
)
def test_number_refuses_what_is_not_one(value, problem):
    assert message(number(), value, "expect.min_busbw_gbyte_per_s").startswith(
        f"expect.min_busbw_gbyte_per_s {problem}"
    )


def test_number_bounds():
    assert message(number(minimum=0), -1) == "opt must be at least 0, got -1"
    assert message(number(above=0), 0) == "opt must be greater than 0, got 0"
    assert message(number(maximum=1), "1.5") == "opt must be at most 1, got '1.5'"
    assert number(above=0, maximum=1)("opt", 1) == 1


@pytest.mark.parametrize(("value", "expected"), [(8, 8), ("8", 8), ("8.0", 8), (8.0, 8), (" 16 ", 16)])
def test_integer_coerces_integral_values(value, expected):
    result = integer()("opt", value)
    assert result == expected
    assert type(result) is int


@pytest.mark.parametrize("value", [8.5, "8.5", "eight", True, None, [8], "1k"])
def test_integer_refuses_the_rest(value):
    assert message(integer(), value).startswith("opt must be an integer, got ")


def test_integer_keeps_large_values_exact():
    assert integer()("opt", 2**63 + 1) == 2**63 + 1


@pytest.mark.parametrize(
    ("value", "expected"),
    [(True, True), (False, False), ("yes", True), ("No", False), ("true", True), ("off", False), (1, True), (0, False)],
)
def test_boolean_takes_ansible_spellings(value, expected):
    assert boolean()("opt", value) is expected


@pytest.mark.parametrize("value", ["maybe", 2, None, [True]])
def test_boolean_refuses_the_rest(value):
    assert message(boolean(), value).startswith("opt must be a boolean (true/false, yes/no), got ")


def test_string_options():
    assert string()("opt", "x") == "x"
    assert message(string(), 5) == "opt must be a string, got 5"
    assert string(numbers=True)("opt", 535) == "535"
    assert message(string(numbers=True), True) == "opt must be a string, got True"
    assert message(string(nonempty=True), " ") == "opt must not be empty"
    assert message(string(choices=("a", "b")), "c") == "opt must be one of a, b, got 'c'"


def test_scalar_text():
    assert scalar_text()("opt", True) == "yes"
    assert scalar_text()("opt", 1024) == "1024"
    assert scalar_text(lists=True)("opt", ["mlx5_0/1", "mlx5_1/1"]) == "mlx5_0/1 mlx5_1/1"
    assert message(scalar_text(), ["a"]).startswith("opt must be a string, number or boolean")
    assert message(scalar_text(lists=True), [["a"]]).startswith("opt[0] must be a string, number or boolean")
    assert message(scalar_text(), None).startswith("opt must be a string, number or boolean, got None")


def test_list_of_names_the_item():
    assert list_of(integer())("xid", ["48", 79]) == [48, 79]
    assert message(list_of(integer()), "48", "xid") == "xid must be a list, got '48'"
    assert message(list_of(integer()), [48, None], "xid") == "xid[1] must be an integer, got None"


def test_list_of_with_on_error_leaves_bad_items_out():
    noted = []
    assert list_of(integer(), on_error=noted.append)("gpus", [0, "x", 2]) == [0, 2]
    assert [str(error) for error in noted] == ["gpus[1] must be an integer, got 'x'"]


def test_mapping_of():
    speeds = mapping_of(number(), key=string(numbers=True))
    assert speeds("speeds", {"EDR": "100", 25: 25, "none": None}) == {"EDR": 100.0, "25": 25}
    assert message(speeds, {"EDR": "fast"}, "speeds") == "speeds.EDR must be a number, got 'fast'"
    assert message(speeds, ["EDR"], "speeds") == "speeds must be a dict, got ['EDR']"


def test_record_checks_known_keys_and_refuses_unknown_ones():
    kind = record({"min_busbw_gbyte_per_s": number(), "max_wrong": integer(minimum=0)})
    assert kind("expect", {"min_busbw_gbyte_per_s": "50", "max_wrong": None}) == {"min_busbw_gbyte_per_s": 50.0}
    assert message(kind, {"min_bus_bw": 50}, "expect") == (
        "expect.min_bus_bw is not a key expect takes (known: max_wrong, min_busbw_gbyte_per_s)"
    )
    assert message(kind, "fifty", "expect") == "expect must be a dict, got 'fifty'"


def test_record_required_and_extra_keys():
    kind = record({"name": string(), "ports": list_of(anything())}, required=("name",), extra=True)
    assert kind("hca", {"name": "mlx5_0", "comment": "slot 3"}) == {"name": "mlx5_0", "comment": "slot 3"}
    assert message(kind, {"ports": []}, "hcas[0]") == "hcas[0].name is required"


def test_record_with_on_error_leaves_bad_fields_out():
    noted = []
    pcie = record({"width": integer()}, extra=True, on_error=noted.append)
    gpu = record({"index": integer(), "pcie": pcie}, on_error=noted.append)
    assert gpu("gpu", {"index": "x", "pcie": {"width": "x16", "gen": 3}}) == {"pcie": {"gen": 3}}
    assert [str(error) for error in noted] == [
        "gpu.index must be an integer, got 'x'",
        "gpu.pcie.width must be an integer, got 'x16'",
    ]


def test_env_vars():
    env = env_vars()
    assert env("env", {"NCCL_IB_DISABLE": 1, "NCCL_SOCKET_IFNAME": "eth0", "X": 0.5}) == {
        "NCCL_IB_DISABLE": "1",
        "NCCL_SOCKET_IFNAME": "eth0",
        "X": "0.5",
    }
    assert message(env, {"NCCL_IB_DISABLE": True}, "env") == (
        "env.NCCL_IB_DISABLE is a boolean (True): quote it, or write 1 or 0, as programs read text"
    )
    assert message(env, {"A": None}, "env") == "env.A must be a string or a number, got None"
    assert message(env, {"A=B": "1"}, "env").startswith("env.A=B is not an environment variable name")
    assert message(env, {"": "1"}, "env").startswith("env. is not an environment variable name")
    assert message(env, {"A": "a\x00b"}, "env").startswith("env.A must be a string or a number")
    assert message(env, "A=1", "env") == "env must be a dict, got 'A=1'"
