"""module_utils/ and library/ run on the managed node's Python, not the controller's 3.11.

ansible-core 2.19 supports targets from Python 3.8 (RHEL 9's python3 is 3.9), so those files must not use
3.9+/3.10+ features such as zip(strict=), match statements or runtime `X | Y` unions. Three guards:

- vermin with the very command line of `make lint` (read from the Makefile), plus proof that it has teeth;
- an AST scan for the few runtime constructs vermin cannot see (it knows no variable's type);
- the module_utils unit tests under an older CPython when one is installed (GPUFORGE_OLD_PYTHON, or the
  interpreter the setup step leaves in .gpuforge/python3.9); skipped, with the reason, where there is none.
"""

from __future__ import annotations

import ast
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from hang_guard import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]
MANAGED_DIRS = ("module_utils", "library")
BIN = Path(sys.executable).parent
OLD_PYTHON_DEFAULT = ROOT / ".gpuforge" / "python3.9" / "bin" / "python3.9"


def _lint_vermin_command() -> list[str]:
    """The vermin line of the Makefile's lint target, split into argv."""
    lines = [line.strip() for line in (ROOT / "Makefile").read_text(encoding="utf-8").splitlines()]
    found = [line for line in lines if line.startswith("vermin ")]
    assert len(found) == 1, f"expected one vermin line in the Makefile's lint target, found {found}"
    return shlex.split(found[0])


def _vermin(*paths: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """Run the venv's vermin with make lint's options on ``paths`` (make lint's own paths when none)."""
    argv = _lint_vermin_command()
    options = [arg for arg in argv[1:] if arg.startswith("-")]
    targets = [str(p) for p in paths] or [arg for arg in argv[1:] if not arg.startswith("-")]
    return subprocess.run(
        [str(BIN / "vermin"), *options, *targets], cwd=cwd, capture_output=True, text=True, timeout=HANG_GUARD_S
    )


def _managed_files() -> list[Path]:
    files = sorted(path for name in MANAGED_DIRS for path in (ROOT / name).glob("*.py"))
    assert len(files) > 10, files
    return files


# ---------------------------------------------------------------------------------------------------
# vermin


def test_make_lint_checks_both_managed_dirs_for_python_38():
    argv = _lint_vermin_command()
    assert "--target=3.8-" in argv
    assert "--violations" in argv
    # Annotations are never evaluated (every file has `from __future__ import annotations`, ruff's FA102
    # enforces it); --eval-annotations would flag every `list[str] | None` annotation.
    assert "--eval-annotations" not in argv
    assert set(MANAGED_DIRS) <= set(argv)


def test_managed_code_has_no_vermin_violations():
    result = _vermin()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "requires" not in result.stdout, result.stdout


@pytest.mark.parametrize(
    ("source", "needs"),
    [
        ("def pairs(a, b):\n    return list(zip(a, b, strict=True))\n", "'zip(strict)' requires !2, 3.10"),
        ("def kind(x):\n    match x:\n        case 1:\n            return 1\n", "pattern matching requires !2, 3.10"),
        ("import functools\n\n\n@functools.cache\ndef f():\n    return 1\n", "'functools.cache' member requires"),
        ("def merge():\n    a = {'y': 2}\n    return a | {'x': 1}\n", "dict union (dict | dict) requires !2, 3.9"),
        ("from zoneinfo import ZoneInfo\n", "'zoneinfo' module requires !2, 3.9"),
        ("with (open('a') as a, open('b') as b):\n    pass\n", "with parentheses require !2, 3.9"),
    ],
    ids=["zip-strict", "match", "functools-cache", "dict-union", "zoneinfo", "with-parentheses"],
)
def test_vermin_check_has_teeth(tmp_path, source, needs):
    probe = tmp_path / "probe.py"
    probe.write_text("from __future__ import annotations\n\n" + source, encoding="utf-8")
    result = _vermin(probe, cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert needs in result.stdout
    assert "Target versions not met:   3.8-" in result.stdout


def test_vermin_check_accepts_postponed_annotations(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from __future__ import annotations\n\n\n"
        "def f(x: list[str] | None, y: dict[str, int | None]) -> tuple[int, ...] | None:\n"
        "    if (n := len(x or [])) > 1:\n"
        "        return (n,)\n"
        "    return None\n",
        encoding="utf-8",
    )
    result = _vermin(probe, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


# ---------------------------------------------------------------------------------------------------
# What vermin cannot see: it knows literals' types (and names bound to them), not parameters'.

_BUILTIN_GENERICS = {"list", "dict", "tuple", "set", "frozenset", "type"}
_TYPE_NAMES = _BUILTIN_GENERICS | {"int", "str", "float", "bool", "bytes", "object"}
_NEW_STR_METHODS = {"removeprefix", "removesuffix"}  # 3.9


def _is_dict(node: ast.AST) -> bool:
    return isinstance(node, (ast.Dict, ast.DictComp)) or (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict"
    )


def _is_type_operand(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return node.value is None
    if isinstance(node, ast.Name):
        return node.id in _TYPE_NAMES
    return isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in _TYPE_NAMES


def runtime_problems(source: str) -> list[str]:
    """Runtime uses of 3.9+/3.10+ features outside annotations (which stay unevaluated)."""
    tree = ast.parse(source)
    in_annotation: set[int] = set()
    for node in ast.walk(tree):
        for field in ("annotation", "returns"):
            annotation = getattr(node, field, None)
            if annotation is not None:
                in_annotation.update(id(child) for child in ast.walk(annotation))
    problems: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in in_annotation:
            continue
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in _BUILTIN_GENERICS:
            problems.append((node.lineno, f"{node.value.id}[...] outside an annotation needs 3.9"))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            if _is_type_operand(node.left) and _is_type_operand(node.right):
                problems.append((node.lineno, "a runtime `X | Y` type union needs 3.10"))
            elif _is_dict(node.left) or _is_dict(node.right):
                problems.append((node.lineno, "dict | dict needs 3.9"))
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.BitOr) and _is_dict(node.value):
            problems.append((node.lineno, "dict |= dict needs 3.9"))
        elif isinstance(node, ast.Attribute) and node.attr in _NEW_STR_METHODS:
            problems.append((node.lineno, f"str.{node.attr} needs 3.9"))
    return [f"line {line}: {problem}" for line, problem in sorted(problems)]


@pytest.mark.parametrize("path", _managed_files(), ids=lambda path: f"{path.parent.name}/{path.name}")
def test_managed_code_has_no_runtime_39_constructs(path):
    assert runtime_problems(path.read_text(encoding="utf-8")) == []


def test_runtime_scan_has_teeth():
    source = (
        "from __future__ import annotations\n\n\n"
        "def f(x: list[str] | None, name: str) -> dict[str, int] | None:\n"
        "    Rows = list[dict]\n"
        "    if isinstance(x, int | None):\n"
        "        return None\n"
        "    seen = {name.removeprefix('gpu'): len(Rows)}\n"
        "    seen |= {'x': 1}\n"
        "    return x | dict(seen)\n"
    )
    assert runtime_problems(source) == [
        "line 5: list[...] outside an annotation needs 3.9",
        "line 6: a runtime `X | Y` type union needs 3.10",
        "line 8: str.removeprefix needs 3.9",
        "line 9: dict |= dict needs 3.9",
        "line 10: dict | dict needs 3.9",
    ]


# ---------------------------------------------------------------------------------------------------
# ruff lints the managed dirs for 3.8 (pyproject.toml's per-file-target-version)


def _ruff(path: str, source: str) -> str:
    result = subprocess.run(
        [str(BIN / "ruff"), "check", "--no-cache", "--output-format", "concise", "--stdin-filename", path, "-"],
        cwd=ROOT,
        input=source,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    return result.stdout + result.stderr


@pytest.mark.parametrize("directory", MANAGED_DIRS)
def test_ruff_lints_managed_code_for_python_38(directory):
    match = "def kind(x):\n    match x:\n        case 1:\n            return 1\n    return 0\n"
    assert "Cannot use `match` statement on Python 3.8" in _ruff(f"{directory}/probe.py", match)
    no_future = "def f(x: list[str]) -> int:\n    return len(x)\n"
    assert "FA102" in _ruff(f"{directory}/probe.py", no_future)
    plain_zip = "def pairs(a, b):\n    return list(zip(a, b))\n"
    assert "B905" not in _ruff(f"{directory}/probe.py", plain_zip)
    # The controller's code stays on 3.11 rules.
    assert "B905" in _ruff("src/gpuforge/probe.py", plain_zip)


# ---------------------------------------------------------------------------------------------------
# The module_utils unit tests under an older interpreter


def _old_python() -> Path | None:
    configured = os.environ.get("GPUFORGE_OLD_PYTHON")
    if configured:
        path = Path(configured)
        assert path.is_file(), f"GPUFORGE_OLD_PYTHON={configured} does not exist"
        return path
    return OLD_PYTHON_DEFAULT if OLD_PYTHON_DEFAULT.is_file() else None


def _old_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON") and k != "VIRTUAL_ENV"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def test_module_utils_tests_pass_under_the_oldest_python():
    python = _old_python()
    if python is None:
        pytest.skip(f"no older Python: set GPUFORGE_OLD_PYTHON or run the setup step that fills {OLD_PYTHON_DEFAULT}")
    version = subprocess.run(
        [str(python), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        env=_old_env(),
        timeout=HANG_GUARD_S,
    )
    assert version.returncode == 0, version.stderr
    assert tuple(int(part) for part in version.stdout.split(".")) < (3, 10), version.stdout

    # Every managed file must at least compile there (library/ needs ansible to import, so compile only).
    compiled = subprocess.run(
        [str(python), "-c", "import sys; [compile(open(p).read(), p, 'exec') for p in sys.argv[1:]]"]
        + [str(path) for path in _managed_files()],
        capture_output=True,
        text=True,
        env=_old_env(),
        timeout=HANG_GUARD_S,
    )
    assert compiled.returncode == 0, compiled.stderr

    # The parsers' own tests; the ones built on the lab simulators (controller-side code, PyYAML) and the
    # filter plugin check stay with the controller's Python.
    tests = ROOT / "tests" / "unit" / "module_utils"
    controller_side = ("node_sim_helpers", "\nimport yaml\n", "from gpuforge.lab import")
    ignore = [
        f"--ignore={path}"
        for path in sorted(tests.glob("test_*.py"))
        if any(marker in path.read_text() for marker in controller_side)
    ]
    result = subprocess.run(
        [
            str(python),
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "not lab",
            *ignore,
            "--deselect",
            "tests/unit/module_utils/test_gpuforge_bench_attribution.py::test_filter_plugin_exposes_the_function",
            str(tests),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=_old_env(),
        timeout=HANG_GUARD_S,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert " passed" in result.stdout
