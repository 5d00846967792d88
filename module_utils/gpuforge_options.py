"""Check and coerce what is inside the free-form dict options of the gpuforge modules (expect, expected, env,
settings) and inside the facts a module is handed.

Ansible checks that such an option is a dict, not what the dict holds: a string where a number belongs
(``-e gpuforge_bench_nccl_min_busbw_gbyte_per_s=50`` hands the module "50"), a dict where a list belongs, a misspelt
key. The kinds here coerce what Ansible's own conversion of a typed option would accept (numeric strings,
yes/no strings) and raise OptionError naming the option path for anything else, so a module fails with
that message instead of a traceback, and never quietly skips a value it cannot use.

A kind is a function ``(path, value) -> value``; build one from the functions below and call it with the
option's name: ``EXPECT("expect", params["expect"])``. Stdlib only, like every module_utils file.
"""

from __future__ import annotations

import math
import re

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import OptionError

__all__ = [
    "OptionError",
    "anything",
    "boolean",
    "env_vars",
    "integer",
    "list_of",
    "mapping_of",
    "number",
    "record",
    "scalar_text",
    "show",
    "string",
]

_SHOW_MAX = 80
# The strings Ansible's own bool conversion accepts (ansible.module_utils.parsing.convert_bool).
_TRUE = ("y", "yes", "on", "1", "true", "t")
_FALSE = ("n", "no", "off", "0", "false", "f")
# What cannot be in an environment variable's name: '=' ends it, NUL ends the string, space splits it.
_BAD_ENV_NAME = re.compile(r"[=\s\x00]")


def show(value) -> str:
    """repr(value), shortened for a message."""
    text = repr(value)
    return text if len(text) <= _SHOW_MAX else text[: _SHOW_MAX - 3] + "..."


def _must_be_dict(path: str, value) -> None:
    if not isinstance(value, dict):
        raise OptionError(path, f"must be a dict, got {show(value)}")


def _to_float(path: str, value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise OptionError(path, f"must be {what}, got {show(value)}")
    try:
        result = float(value.strip() if isinstance(value, str) else value)
    except (ValueError, OverflowError):
        raise OptionError(path, f"must be {what}, got {show(value)}") from None
    if math.isnan(result) or math.isinf(result):
        raise OptionError(path, f"must be a finite number, got {show(value)}")
    return result


def _bounds(path: str, value, result, minimum, maximum, above) -> None:
    if minimum is not None and result < minimum:
        raise OptionError(path, f"must be at least {minimum}, got {show(value)}")
    if above is not None and result <= above:
        raise OptionError(path, f"must be greater than {above}, got {show(value)}")
    if maximum is not None and result > maximum:
        raise OptionError(path, f"must be at most {maximum}, got {show(value)}")


def number(minimum=None, maximum=None, above=None):
    """An int or float as given; a numeric string ("50", " 12.5", what ``-e key=50`` hands a module) becomes a
    float. Booleans, NaN, infinity and other strings are refused."""

    def check(path: str, value):
        result = _to_float(path, value, "a number")
        _bounds(path, value, result, minimum, maximum, above)
        return result if isinstance(value, str) else value

    return check


def integer(minimum=None, maximum=None):
    """An int. Integral floats and strings ("8", "8.0") are coerced; 8.5, booleans and words are not."""

    def check(path: str, value) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            result = value
        else:
            as_float = _to_float(path, value, "an integer")
            if not as_float.is_integer():
                raise OptionError(path, f"must be an integer, got {show(value)}")
            result = int(as_float)
        _bounds(path, value, result, minimum, maximum, None)
        return result

    return check


def boolean():
    """A bool; the strings and numbers Ansible's bool options accept (yes/no, true/false, on/off, 1/0)."""

    def check(path: str, value) -> bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, (int, float)) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
            return value.strip().lower() in _TRUE
        raise OptionError(path, f"must be a boolean (true/false, yes/no), got {show(value)}")

    return check


def string(choices=None, numbers=False, nonempty=False):
    """A str. numbers=True also takes an int or float and writes it as text (a driver branch, a name)."""

    def check(path: str, value) -> str:
        if isinstance(value, str):
            result = value
        elif numbers and isinstance(value, (int, float)) and not isinstance(value, bool):
            result = str(value)
        else:
            raise OptionError(path, f"must be a string, got {show(value)}")
        if nonempty and not result.strip():
            raise OptionError(path, "must not be empty")
        if choices is not None and result not in choices:
            raise OptionError(path, f"must be one of {', '.join(choices)}, got {show(value)}")
        return result

    return check


def scalar_text(lists=False):
    """A value written as text on a command line: a string or number as given, a boolean as yes/no, and with
    lists=True a list of those joined by spaces. None, dicts and nested lists are refused."""

    def one(path: str, value) -> str:
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, (str, int, float)):
            return str(value)
        raise OptionError(path, f"must be a string, number or boolean, got {show(value)}")

    def check(path: str, value) -> str:
        if lists and isinstance(value, (list, tuple)):
            return " ".join(one(f"{path}[{index}]", item) for index, item in enumerate(value))
        return one(path, value)

    return check


def anything():
    """Any value, unchecked (a list whose items are only ever shown, for example)."""

    def check(path: str, value):
        return value

    return check


def _store(result, slot, kind, where: str, item, on_error) -> None:
    """kind(where, item) into result[slot] (appended when result is a list); a failing item goes to on_error
    and is left out, or raises when there is no on_error."""
    try:
        checked = kind(where, item)
    except OptionError as exc:
        if on_error is None:
            raise
        on_error(exc)
        return
    if isinstance(result, list):
        result.append(checked)
    else:
        result[slot] = checked


def list_of(kind, on_error=None):
    """A list whose every item is of kind (item paths are ``path[i]``). on_error: as for record(), an item
    that does not pass is handed to it and left out."""

    def check(path: str, value) -> list:
        if not isinstance(value, (list, tuple)):
            raise OptionError(path, f"must be a list, got {show(value)}")
        result = []
        for index, item in enumerate(value):
            _store(result, None, kind, f"{path}[{index}]", item, on_error)
        return result

    return check


def mapping_of(kind, key=None, on_error=None):
    """A dict of any keys whose every value is of kind (value paths are ``path.key``); a None value is left
    out. key, when given, is a kind each key must pass; on_error as for record()."""

    def check(path: str, value) -> dict:
        _must_be_dict(path, value)
        result = {}
        for name, item in value.items():
            if item is None:
                continue
            where = f"{path}.{name}"
            try:
                slot = key(where, name) if key else name
            except OptionError as exc:
                if on_error is None:
                    raise
                on_error(exc)
                continue
            _store(result, slot, kind, where, item, on_error)
        return result

    return check


def record(fields: dict, required=(), extra=False, on_error=None):
    """A dict with the keys of fields, each checked by its kind; a key that is absent or None is left out.

    required: keys that must be there (not None). extra=True keeps keys fields does not name, unchecked
    (a spec merged from several inventory tables); otherwise such a key is refused, which catches typos.
    on_error: a function taking the OptionError of a field, for input that must not stop the caller
    (facts): the field is left out instead of the error being raised.
    """

    def check(path: str, value) -> dict:
        _must_be_dict(path, value)
        unknown = sorted(str(name) for name in value if name not in fields)
        if unknown and not extra:
            known = ", ".join(sorted(fields))
            raise OptionError(f"{path}.{unknown[0]}", f"is not a key {path} takes (known: {known})")
        for name in required:
            if value.get(name) is None:
                raise OptionError(f"{path}.{name}", "is required")
        result = {name: item for name, item in value.items() if name not in fields}
        for name, kind in fields.items():
            if value.get(name) is None:
                continue
            _store(result, name, kind, f"{path}.{name}", value[name], on_error)
        return result

    return check


def env_vars():
    """Environment variables: a dict of name -> string. Numbers are written as text; a boolean is refused
    (YAML's yes/true would reach the program as 'True', which NCCL and MPI read as 0)."""

    def check(path: str, value) -> dict:
        _must_be_dict(path, value)
        env = {}
        for name, item in value.items():
            where = f"{path}.{name}"
            if not isinstance(name, str) or not name or _BAD_ENV_NAME.search(name):
                raise OptionError(where, "is not an environment variable name (no '=', spaces or NUL)")
            if isinstance(item, bool):
                raise OptionError(where, f"is a boolean ({item}): quote it, or write 1 or 0, as programs read text")
            if isinstance(item, (int, float)):
                env[name] = str(item)
            elif isinstance(item, str) and "\x00" not in item:
                env[name] = item
            else:
                raise OptionError(where, f"must be a string or a number, got {show(item)}")
        return env

    return check
