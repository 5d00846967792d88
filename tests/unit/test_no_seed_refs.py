"""Reference documents are cited by title through docs/sources.md (issue 47, item 5).

Users have neither the numbered copies of the reference documents the project was started from nor the folder
beside the checkout that held them: a file that names a document by its number ("seed 001", `seed001_x.txt`,
a table cell `| 001 (...) |`) or sends the reader to `../shared` leaves them with nothing to open. Every tracked
file (and every new file git does not ignore) is read; a hit fails the test with the file, the line and what to
write instead.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "docs" / "sources.md"
THIS = Path(__file__).resolve().relative_to(ROOT).as_posix()

# "seed 001", "Seed 3", "seeds 001, 002", "seed001_dgx.txt", "tf_seed004_...", "SEED_002", "test_seed_000_..."
SEED_NUMBER = re.compile(r"(?i)(?<![a-z])seeds?(?:[ _-]?0{1,2}[0-4]|\s+[0-4])(?![0-9])")
# A table whose first column held the document's number: "| 001 (REDP-5610) section 4.4 |", "| 004 Table 2 |"
SEED_TABLE_CELL = re.compile(r"^\|\s*00[0-4](?:\s*\(|,|\s+(?:section|sections|Example|Examples|Table|Figure)\b)")
# The numbered text files themselves: 001_42a9d4e1431d3e7c.txt
SEED_FILE = re.compile(r"(?<![0-9a-f])00[0-4]_[0-9a-f]{16}\b")
# The folder beside the checkout (seeds, real outputs, reviews, vendor source archives)
OUTSIDE = re.compile(r"\.\./shared\b|/work/shared\b|(?<![\w./-])shared/(?:seeds|real-outputs|reviews|vendor-sources)\b")

# The only `../shared` a file may hold: a path relative to the file that stays inside the repository. Each entry is
# (folder the file is in, the text), and the path it names must exist in the repository.
ALLOWED_RELATIVE = {
    # Molecule scenarios import the writable-hardware play and include the fault-injection tasks of their sibling
    # folder molecule/shared/, written relative to the scenario: a repository path, not the folder beside it.
    ("molecule", "../shared/writable_hardware.yml"),
    ("molecule", "../shared/tasks/inject_faults.yml"),
}
# Files not read: this test (its patterns and examples are the forms it looks for).
SKIPPED = {THIS}

REWRITE = (
    "name the document by its title from docs/sources.md (e.g. 'IBM Redpaper REDP-5610', link "
    "docs/sources.md#ibm-redp-5610 from Markdown), and point at repository paths only"
)


def _files() -> list[str]:
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files are unknown")
    return sorted({name for name in out.decode("utf-8", "surrogateescape").split("\0") if name})


def _text(relative: str) -> str | None:
    path = ROOT / relative
    if not path.is_file() or path.stat().st_size > 4_000_000:
        return None
    data = path.read_bytes()
    if b"\0" in data:
        return None
    return data.decode("utf-8", "replace")


def _allowed_relative(relative: str, line: str, match: re.Match) -> bool:
    folder = Path(relative).parts[0] if len(Path(relative).parts) > 1 else ""
    for where, text in ALLOWED_RELATIVE:
        if folder == where and line.startswith(text, match.start()):
            target = ((ROOT / relative).parent / text).resolve()
            return target.is_relative_to(ROOT) and target.exists()
    return False


def findings(relative: str, text: str) -> list[str]:
    """`path:line: text` for every mention of a document number or of the folder beside the checkout."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        hits = [m for pattern in (SEED_NUMBER, SEED_TABLE_CELL, SEED_FILE) for m in pattern.finditer(line)]
        hits += [m for m in OUTSIDE.finditer(line) if not _allowed_relative(relative, line, m)]
        if hits:
            found.append(f"{relative}:{number}: {line.strip()[:160]}")
    return found


def test_no_file_names_a_document_by_number_or_sends_readers_outside_the_repository():
    found = []
    for relative in _files():
        if relative in SKIPPED:
            continue
        text = _text(relative)
        if text is not None:
            found += findings(relative, text)
    assert not found, f"{len(found)} line(s) to rewrite ({REWRITE}):\n" + "\n".join(found)


@pytest.mark.parametrize(
    "line",
    [
        "# seed 001: nvidia-smi lists GPUs 0-7",
        "as Seed 3 showed",
        "(seeds 001, 002)",
        'fixture("mmlscluster/seed001_Y.txt")',
        'fixture("resnet50/tf_seed004_t4_1vgpu.txt")',
        "SEED_002 = [",
        "def test_openshift_adds_the_seed_000_label():",
        "| 001 (REDP-5610) section 4.4 | NCCL all_reduce_perf |",
        "| 004 Table 2 | T4 vGPU |",
        "`/work/shared/seeds/001_42a9d4e1431d3e7c.txt`",
        "see ../shared/real-outputs/SOURCES.md",
        "(shared/real-outputs, leptonai/gpud)",
    ],
)
def test_the_patterns_catch_each_form(line):
    assert findings("roles/x/README.md", line)


@pytest.mark.parametrize(
    "line",
    [
        "IBM Redpaper REDP-5610 (docs/sources.md#ibm-redp-5610)",
        'parser.add_argument("--seed", type=int, default=0)',
        "torch.manual_seed(args.seed + launch['rank'])",
        "random seed 42 for the burn-in order",
        "| 0010 | a count |",
    ],
)
def test_the_patterns_leave_other_text(line):
    assert not findings("roles/x/README.md", line)


def test_a_relative_shared_path_passes_only_inside_the_repository():
    molecule = "molecule/ipoib/converge.yml"
    assert not findings(molecule, "- ansible.builtin.import_playbook: ../shared/writable_hardware.yml")
    # The same text from another folder, or a path the repository does not hold, is the folder beside the checkout.
    assert findings("playbooks/site.yml", "- ansible.builtin.import_playbook: ../shared/writable_hardware.yml")
    assert findings(molecule, "- ansible.builtin.import_playbook: ../shared/seeds/README.md")
    for folder, text in ALLOWED_RELATIVE:
        scenario = next(p for p in sorted((ROOT / folder).iterdir()) if (p / "molecule.yml").is_file())
        assert (scenario / text).resolve().exists(), f"{folder}: {text} no longer exists: drop it from ALLOWED_RELATIVE"


def test_links_into_sources_md_name_an_anchor_it_has():
    anchors = set(re.findall(r'<a id="([a-z0-9-]+)"></a>', SOURCES.read_text(encoding="utf-8")))
    assert {"redhat-supermicro-mlperf", "ibm-redp-5610", "dell-emc-ready-solutions-ai", "mellanox-isc-2019"} <= anchors
    assert "vmware-vgpu-pvrdma" in anchors
    broken = []
    for relative in _files():
        text = _text(relative) if relative.endswith(".md") else None
        for anchor in re.findall(r"sources\.md#([A-Za-z0-9_-]+)", text or ""):
            if anchor not in anchors:
                broken.append(f"{relative}: #{anchor}")
    assert not broken, "links to docs/sources.md anchors it does not have:\n" + "\n".join(broken)
