"""Every program a module starts goes through gpuforge_run.Tool: no other file in library/ or module_utils/ calls
run_command, imports subprocess or starts a process any other way (os.system, os.popen, os.exec*/spawn*, pty).

The source is read as Python (ast), so a comment or a docstring that names run_command is not a call."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
RUNNER = ROOT / "module_utils" / "gpuforge_run.py"
FILES = sorted([*(ROOT / "library").glob("*.py"), *(ROOT / "module_utils").glob("*.py")])
PROCESS_MODULES = {"subprocess", "pty", "multiprocessing", "asyncio"}
OS_STARTERS = {"system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp"}


def process_starts(source: str) -> list:
    """'line N: what' for each way source starts a process other than through gpuforge_run.Tool."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"line {node.lineno}: import {a.name}" for a in node.names if a.name in PROCESS_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module in PROCESS_MODULES:
            found.append(f"line {node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Attribute):
            name = node.attr
            if name == "run_command":
                found.append(f"line {node.lineno}: .run_command")
            elif (
                isinstance(node.value, ast.Name)
                and node.value.id == "os"
                and (name in OS_STARTERS or name.startswith(("exec", "spawn")))
            ):
                found.append(f"line {node.lineno}: os.{name}")
    return found


def test_the_runner_is_the_only_file_that_starts_processes():
    offenders = {
        str(path.relative_to(ROOT)): process_starts(path.read_text(encoding="utf-8"))
        for path in FILES
        if path != RUNNER
    }
    offenders = {path: found for path, found in offenders.items() if found}
    assert not offenders, f"run these through gpuforge_run.Tool: {offenders}"


def test_the_scan_covers_the_tree_and_the_runner_itself_would_be_caught():
    assert len(FILES) > 50 and RUNNER in FILES
    assert process_starts(RUNNER.read_text(encoding="utf-8")), "the runner starts processes; the scan must see it"


@pytest.mark.parametrize(
    "source",
    [
        "rc, out, err = module.run_command(['ls'])",
        "self.module.run_command(argv, environ_update={})",
        "import subprocess",
        "from subprocess import run",
        "import os\nos.system('ls')",
        "import os\nos.execvp('ls', ['ls'])",
        "import os\nos.popen('ls')",
    ],
)
def test_each_way_of_starting_a_process_is_caught(source):
    assert process_starts(source)


def test_words_in_docs_are_not_calls():
    assert not process_starts('"""Runs run_command and subprocess through gpuforge_run."""\nx = "os.system"\n')
