"""managed_files: directories and files under tmp_path, run in-process (conftest.py's harness) - the bytes and
modes written, a converged second run, check mode, diff mode, and options refused before anything is written."""

from __future__ import annotations

import grp
import os
import platform
import pwd
import sys
from pathlib import Path

import pytest
from ansible.module_utils.common.warnings import get_warning_messages
from ansible_collections.gpuforge.cluster.plugins.modules import managed_files

HOST = platform.node()
DROPIN = "[Service]\nEnvironment=CONTAINER_RUNTIME=nvidia\n"
# No trailing newline, non-ASCII: written as given.
RUNTIME = '[crio.runtime]\ndefault_runtime = "nvidia"\n# Grüße, ΣGPU'
USER = pwd.getpwuid(os.getuid()).pw_name
GROUP = grp.getgrgid(os.getgid()).gr_name


@pytest.fixture
def run(ansible_module):
    def run(directories=None, files=None, expect_failure=False, check_mode=False, diff=False):
        args = {}
        if directories is not None:
            args["directories"] = directories
        if files is not None:
            args["files"] = files
        return ansible_module(managed_files, args, None, expect_failure, check_mode, diff)

    return run


class Tree:
    """A systemd drop-in directory (with a parent that does not exist yet) and two files, under tmp_path."""

    def __init__(self, root: Path):
        self.root = root
        self.dropin_dir = root / "etc" / "systemd" / "system" / "crio.service.d"
        self.conf_dir = root / "etc" / "crio" / "crio.conf.d"
        self.dropin = self.dropin_dir / "10-gpuforge.conf"
        self.runtime = self.conf_dir / "99-nvidia.conf"

    def directories(self, dropin_mode="0755", conf_mode="0750") -> list:
        return [
            {"path": str(self.dropin_dir), "mode": dropin_mode},
            {"path": str(self.conf_dir), "mode": conf_mode},
        ]

    def files(self, dropin=DROPIN, runtime=RUNTIME, dropin_mode="0644", runtime_mode="0600") -> list:
        return [
            {"path": str(self.dropin), "content": dropin, "mode": dropin_mode},
            {"path": str(self.runtime), "content": runtime, "mode": runtime_mode},
        ]

    def state(self) -> dict:
        """{relative path: (bytes or None, mode, mtime_ns)} of everything under the root."""
        found = {}
        for path in sorted(self.root.rglob("*")):
            info = path.lstat()
            data = path.read_bytes() if path.is_file() else None
            found[str(path.relative_to(self.root))] = (data, info.st_mode & 0o7777, info.st_mtime_ns)
        return found


@pytest.fixture
def tree(tmp_path):
    return Tree(tmp_path)


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o7777


# ---------------------------------------------------------------------------------------------------------
# Writing, then converged


def test_creates_directories_and_files_with_their_bytes_and_modes(run, tree):
    result = run(tree.directories(), tree.files())
    assert result["changed"] is True
    assert result["changed_paths"] == [str(tree.dropin_dir), str(tree.conf_dir), str(tree.dropin), str(tree.runtime)]
    assert "diff" not in result
    assert tree.dropin.read_bytes() == DROPIN.encode("utf-8")
    assert tree.runtime.read_bytes() == RUNTIME.encode("utf-8")
    # the modes asked for, whatever the umask took from makedirs' mode
    assert (mode(tree.dropin_dir), mode(tree.conf_dir)) == (0o755, 0o750)
    assert (mode(tree.dropin), mode(tree.runtime)) == (0o644, 0o600)
    # no temporary file of the atomic writes is left beside them
    assert sorted(p.name for p in tree.dropin_dir.iterdir()) == ["10-gpuforge.conf"]
    assert sorted(p.name for p in tree.conf_dir.iterdir()) == ["99-nvidia.conf"]


def test_second_run_changes_nothing(run, tree):
    run(tree.directories(), tree.files())
    before = tree.state()
    result = run(tree.directories(), tree.files(), diff=True)
    assert result["changed"] is False
    assert result["changed_paths"] == []
    assert result["diff"] == []
    assert tree.state() == before


def test_nothing_to_do_without_options(run):
    result = run()
    assert result["changed"] is False and result["changed_paths"] == []


def test_a_content_change_rewrites_only_that_file(run, tree):
    run(tree.directories(), tree.files())
    before = tree.state()
    changed = DROPIN + "Environment=NVIDIA_VISIBLE_DEVICES=all\n"
    result = run(tree.directories(), tree.files(dropin=changed), diff=True)
    assert result["changed"] is True
    assert result["changed_paths"] == [str(tree.dropin)]
    assert tree.dropin.read_text(encoding="utf-8") == changed
    assert mode(tree.dropin) == 0o644
    after = tree.state()
    untouched = [key for key in before if not key.endswith("10-gpuforge.conf") and not key.endswith("crio.service.d")]
    assert {key: after[key] for key in untouched} == {key: before[key] for key in untouched}
    path = str(tree.dropin)
    assert result["diff"] == [{"before_header": path, "after_header": path, "before": DROPIN, "after": changed}]


def test_a_file_emptied(run, tree):
    run(tree.directories(), tree.files())
    result = run(tree.directories(), tree.files(runtime=""))
    assert result["changed_paths"] == [str(tree.runtime)]
    assert tree.runtime.read_bytes() == b""


def test_a_mode_change_alone(run, tree):
    run(tree.directories(), tree.files())
    before = tree.runtime.stat().st_mtime_ns
    result = run(tree.directories(dropin_mode="0700"), tree.files(runtime_mode="0640"), diff=True)
    assert result["changed"] is True
    assert result["changed_paths"] == [str(tree.dropin_dir), str(tree.runtime)]
    assert mode(tree.dropin_dir) == 0o700 and mode(tree.runtime) == 0o640
    assert tree.runtime.read_bytes() == RUNTIME.encode("utf-8")
    assert tree.runtime.stat().st_mtime_ns == before  # chmod, not rewritten
    directory, runtime = str(tree.dropin_dir), str(tree.runtime)
    assert result["diff"] == [
        {"before": {"path": directory, "mode": "0755"}, "after": {"path": directory, "mode": "0700"}},
        {"before": {"path": runtime, "mode": "0600"}, "after": {"path": runtime, "mode": "0640"}},
    ]


def test_content_and_mode_change_together(run, tree):
    run(tree.directories(), tree.files())
    result = run(tree.directories(), tree.files(dropin="x\n", dropin_mode="0640"), diff=True)
    assert result["changed_paths"] == [str(tree.dropin)]
    assert tree.dropin.read_bytes() == b"x\n" and mode(tree.dropin) == 0o640
    path = str(tree.dropin)
    assert result["diff"] == [
        {"before": {"path": path, "mode": "0644"}, "after": {"path": path, "mode": "0640"}},
        {"before_header": path, "after_header": path, "before": DROPIN, "after": "x\n"},
    ]


def test_four_digit_modes(run, tree):
    result = run([{"path": str(tree.dropin_dir), "mode": "2775"}], [])
    assert result["changed"] is True
    assert mode(tree.dropin_dir) == 0o2775


def test_files_in_a_directory_that_is_there_need_no_directories(run, tree):
    tree.conf_dir.mkdir(parents=True)
    result = run(files=tree.files()[1:])
    assert result["changed_paths"] == [str(tree.runtime)]
    assert tree.runtime.read_bytes() == RUNTIME.encode("utf-8")


def test_the_current_owner_and_group_change_nothing(run, tree):
    run(tree.directories(), tree.files())
    before = tree.state()
    directories = [{**entry, "owner": USER, "group": GROUP} for entry in tree.directories()]
    files = [{**entry, "owner": USER, "group": GROUP} for entry in tree.files()]
    result = run(directories, files, diff=True)
    assert result["changed"] is False and result["changed_paths"] == [] and result["diff"] == []
    assert tree.state() == before
    # numeric ids too
    files = [{**entry, "owner": str(os.getuid()), "group": str(os.getgid())} for entry in tree.files()]
    assert run(directories, files)["changed"] is False


def test_new_paths_with_the_current_owner(run, tree):
    directories = [{**entry, "owner": USER, "group": GROUP} for entry in tree.directories()]
    files = [{**entry, "owner": USER} for entry in tree.files()]
    result = run(directories, files)
    assert len(result["changed_paths"]) == 4
    assert tree.runtime.stat().st_uid == os.getuid()


def test_a_parent_listed_after_its_child_counts_as_created(run, tree):
    parent = tree.dropin_dir.parent
    directories = [{"path": str(tree.dropin_dir), "mode": "0755"}, {"path": str(parent), "mode": "0700"}]
    check = run(directories, check_mode=True)
    result = run(directories)
    assert check["changed_paths"] == result["changed_paths"] == [str(tree.dropin_dir), str(parent)]
    assert mode(parent) == 0o700


# ---------------------------------------------------------------------------------------------------------
# Check mode, diff mode


def test_check_mode_writes_nothing_and_reports_what_would_change(run, tree):
    result = run(tree.directories(), tree.files(), check_mode=True, diff=True)
    assert result["changed"] is True
    assert result["changed_paths"] == [str(tree.dropin_dir), str(tree.conf_dir), str(tree.dropin), str(tree.runtime)]
    assert tree.state() == {}
    new_dir = result["diff"][0]
    assert new_dir == {
        "before": {"path": str(tree.dropin_dir), "state": "absent"},
        "after": {"path": str(tree.dropin_dir), "state": "directory", "mode": "0755"},
    }
    assert result["diff"][1]["after"]["mode"] == "0750"
    assert result["diff"][2:] == [
        {"before_header": str(tree.dropin), "after_header": str(tree.dropin), "before": "", "after": DROPIN},
        {"before_header": str(tree.runtime), "after_header": str(tree.runtime), "before": "", "after": RUNTIME},
    ]


def test_check_mode_matches_the_real_run(run, tree):
    run(tree.directories(), tree.files())
    args = (tree.directories(conf_mode="0755"), tree.files(dropin="new\n", runtime_mode="0644"))
    before = tree.state()
    check = run(*args, check_mode=True, diff=True)
    assert tree.state() == before
    real = run(*args, diff=True)
    assert check["changed_paths"] == real["changed_paths"] == [str(tree.conf_dir), str(tree.dropin), str(tree.runtime)]
    assert check["diff"] == real["diff"]
    assert run(*args)["changed"] is False


def test_check_mode_on_a_converged_tree(run, tree):
    run(tree.directories(), tree.files())
    result = run(tree.directories(), tree.files(), check_mode=True, diff=True)
    assert result["changed"] is False and result["changed_paths"] == [] and result["diff"] == []


def test_diff_of_a_new_directory_with_its_owner(run, tree):
    result = run([{"path": str(tree.conf_dir), "mode": "0755", "owner": USER, "group": GROUP}], diff=True)
    assert result["diff"] == [
        {
            "before": {"path": str(tree.conf_dir), "state": "absent"},
            "after": {"path": str(tree.conf_dir), "state": "directory", "mode": "0755", "owner": USER, "group": GROUP},
        }
    ]


def test_an_unknown_owner_fails_but_warns_in_check_mode(run, tree, capsys):
    tree.conf_dir.mkdir(parents=True)
    files = [{**tree.files()[1], "owner": "gpuforge-no-such-user"}]
    result = run(files=files, expect_failure=True)
    assert result["msg"] == (
        f"files[0].owner ({tree.runtime}): there is no user gpuforge-no-such-user on {HOST}: create the user before "
        "this task, or fix the name"
    )
    assert not tree.runtime.exists()
    # in check mode the task creating the user has not run either
    tree.runtime.write_text(RUNTIME, encoding="utf-8")
    tree.runtime.chmod(0o600)
    result = run(files=files, check_mode=True)
    assert result["changed_paths"] == [str(tree.runtime)]
    said = [*get_warning_messages(), capsys.readouterr().err]
    assert any("there is no user gpuforge-no-such-user" in text for text in said), said


# ---------------------------------------------------------------------------------------------------------
# Refused, before anything is written


def test_a_missing_parent_fails_naming_the_path(run, tree):
    result = run(tree.directories()[:1], tree.files(), expect_failure=True)
    parent = tree.conf_dir
    assert result["msg"] == (
        f"files[1].path: the directory of {tree.runtime}, {parent}, does not exist on {HOST}: list {parent} under "
        "directories (with its mode) so that it is created first"
    )
    assert tree.state() == {}  # the directory listed was not created either
    assert result["changed"] is False and result["changed_paths"] == []


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (420, 'YAML read an unquoted mode as the number 420: quote it, mode: "0644"'),
        ("644x", "got '644x'"),
        ("06444", "got '06444'"),
        ("64", "got '64'"),
        ("0o644", "got '0o644'"),
        ("u=rw,g=r", "got 'u=rw,g=r'"),
        (None, "got None"),
        (True, "got True"),
    ],
)
def test_a_bad_mode_fails(run, tree, value, fragment):
    files = [{**tree.files()[0], "mode": value}]
    result = run(tree.directories(), files, expect_failure=True)
    assert result["msg"].startswith(
        f'files[0].mode ({tree.dropin}) must be a quoted string of 3 or 4 octal digits such as "0644", got '
    )
    assert fragment in result["msg"]
    assert tree.state() == {}


@pytest.mark.parametrize(
    ("path", "fragment"),
    [
        ("etc/crio/crio.conf", "must be an absolute path (starting with /), got 'etc/crio/crio.conf'"),
        ("", "must be an absolute path, got ''"),
        ("/etc/crio/../crio.conf", "write /etc/crio.conf"),
        ("/etc/./crio.conf", "write /etc/crio.conf"),
        ("/etc//crio.conf", "write /etc/crio.conf"),
        ("//etc/crio.conf", "write /etc/crio.conf"),
        ("/etc/crio/", "write /etc/crio"),
        ("/etc/cr\x00io", "must not hold a NUL character"),
    ],
)
def test_a_bad_path_fails(run, tree, path, fragment):
    result = run(tree.directories(), [{"path": path, "content": "x", "mode": "0644"}], expect_failure=True)
    assert result["msg"].startswith("files[0].path must ")
    assert fragment in result["msg"]
    assert tree.state() == {}


def test_a_relative_directory_fails(run):
    result = run([{"path": "crio.conf.d", "mode": "0755"}], expect_failure=True)
    assert result["msg"] == "directories[0].path must be an absolute path (starting with /), got 'crio.conf.d'"


def test_a_path_listed_twice_fails(run, tree):
    files = [*tree.files(), {"path": str(tree.dropin), "content": "again\n", "mode": "0644"}]
    result = run(tree.directories(), files, expect_failure=True)
    assert result["msg"] == (
        f"files[2].path {tree.dropin} is listed a second time (files[0].path): list each path once"
    )
    assert tree.state() == {}
    directories = [*tree.directories(), {"path": str(tree.conf_dir), "mode": "0700"}]
    result = run(directories, expect_failure=True)
    assert "directories[2].path" in result["msg"] and "(directories[1].path)" in result["msg"]
    # a path both a directory and a file
    result = run(tree.directories(), [{"path": str(tree.conf_dir), "content": "", "mode": "0644"}], expect_failure=True)
    assert result["msg"] == (
        f"files[0].path {tree.conf_dir} is listed a second time (directories[1].path): list each path once"
    )


def test_a_directory_where_a_file_belongs_fails(run, tree):
    tree.dropin.mkdir(parents=True)
    result = run(tree.directories(), tree.files(), expect_failure=True)
    assert result["msg"] == (
        f"files[0].path: {tree.dropin} on {HOST} is a directory, not a file: remove it by hand or list it under "
        "directories"
    )
    assert not tree.conf_dir.exists()


def test_a_file_where_a_directory_belongs_fails(run, tree):
    tree.conf_dir.parent.mkdir(parents=True)
    tree.conf_dir.write_text("stray\n", encoding="utf-8")
    result = run(tree.directories(), expect_failure=True)
    assert result["msg"] == (
        f"directories[1].path: {tree.conf_dir} on {HOST} is a file, not a directory: remove it by hand or list it "
        "under files"
    )
    assert not tree.dropin_dir.exists()
    # nor can a directory be made below a file
    result = run([{"path": str(tree.conf_dir / "sub"), "mode": "0755"}], expect_failure=True)
    assert result["msg"] == (
        f"directories[0].path: cannot create {tree.conf_dir / 'sub'} on {HOST}: {tree.conf_dir} is not a directory"
    )


def test_a_symbolic_link_fails(run, tree):
    tree.conf_dir.mkdir(parents=True)
    target = tree.root / "elsewhere.conf"
    target.write_text(RUNTIME, encoding="utf-8")
    tree.runtime.symlink_to(target)
    result = run(tree.directories(), tree.files(), expect_failure=True)
    assert result["msg"] == (
        f"files[1].path: {tree.runtime} on {HOST} is a symbolic link (to {target}): list the path it points to "
        "instead, or remove the link"
    )


@pytest.mark.parametrize("value", ["", " root"])
def test_a_blank_owner_fails(run, tree, value):
    files = [{**tree.files()[0], "group": value}]
    result = run(tree.directories(), files, expect_failure=True)
    assert result["msg"].startswith(f"files[0].group ({tree.dropin}) must be a user or group name or id, got ")


def test_a_missing_required_suboption_fails(run, tree):
    result = run(files=[{"path": str(tree.dropin), "mode": "0644"}], expect_failure=True)
    assert "content" in result["msg"]
    result = run(files=[{"path": str(tree.dropin), "mode": None, "content": ""}], expect_failure=True)
    assert result["msg"].startswith(f"files[0].mode ({tree.dropin}) must be a quoted string")
    # Ansible hands a null str option over as '' (content: with nothing after it is an empty file)
    tree.dropin_dir.mkdir(parents=True)
    result = run(files=[{"path": str(tree.dropin), "content": None, "mode": "0644"}])
    assert tree.dropin.read_bytes() == b""


def test_an_unwritable_directory_fails_naming_the_path(run, tree, monkeypatch):
    tree.conf_dir.mkdir(parents=True)

    def refuse(module, path, data, mode, check=None):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(managed_files, "write_atomic", refuse)
    result = run(files=tree.files()[1:], expect_failure=True)
    assert result["msg"].startswith(f"files[0]: could not write {tree.runtime} on {HOST}: ")
    assert "Permission denied" in result["msg"]


def test_a_file_below_a_file_fails(run, tree):
    tree.conf_dir.parent.mkdir(parents=True)
    tree.conf_dir.write_text("stray\n", encoding="utf-8")
    result = run(files=tree.files()[1:], expect_failure=True)
    assert result["msg"] == (
        f"files[0].path: cannot write {tree.runtime} on {HOST}: {tree.conf_dir} is not a directory"
    )


# ---------------------------------------------------------------------------------------------------------
# validate: a command checks the new content before it replaces the file


def etc_state(tree) -> dict:
    """tree.state() of the etc tree only, without the directories' mtimes."""
    return {path: state[:2] if state[0] is None else state for path, state in tree.state().items() if path[:3] == "etc"}


@pytest.fixture
def recorder(tmp_path):
    """A validate command that records the path it was given and the bytes there, then exits with the code in
    the file `rc` beside it (0 when there is none)."""
    script = tmp_path / "record.py"
    log = tmp_path / "validated.log"
    script.write_text(
        "import pathlib, sys\n"
        f"log = pathlib.Path({str(log)!r})\n"
        "with log.open('a') as handle:\n"
        "    handle.write(sys.argv[1] + '\\n' + pathlib.Path(sys.argv[1]).read_text() + '\\n--\\n')\n"
        f"rc = pathlib.Path({str(tmp_path / 'rc')!r})\n"
        "sys.stderr.write('line 2: bad value\\n' if rc.exists() else '')\n"
        "sys.exit(int(rc.read_text()) if rc.exists() else 0)\n",
        encoding="utf-8",
    )
    return {"command": f"{sys.executable} {script} %s", "log": log, "rc": tmp_path / "rc"}


def test_validate_checks_the_new_content_in_a_temporary_file_beside_the_file(run, tree, recorder):
    files = tree.files()
    files[1]["validate"] = recorder["command"]
    result = run(tree.directories(), files)
    assert result["changed"] is True and tree.runtime.read_bytes() == RUNTIME.encode("utf-8")
    checked, content = recorder["log"].read_text(encoding="utf-8").split("\n", 1)
    assert Path(checked).parent == tree.conf_dir and Path(checked).name.startswith(".gpuforge-")
    assert content == RUNTIME + "\n--\n"
    assert sorted(p.name for p in tree.conf_dir.iterdir()) == ["99-nvidia.conf"]


def test_validate_runs_only_when_the_content_changes(run, tree, recorder):
    files = tree.files()
    files[1]["validate"] = recorder["command"]
    run(tree.directories(), files)
    recorder["rc"].write_text("1", encoding="utf-8")  # a failing check would fail the module if it ran
    result = run(tree.directories(), files)
    assert result["changed"] is False
    assert recorder["log"].read_text(encoding="utf-8").count("--") == 1


def test_a_failed_validate_leaves_the_file_and_the_ones_after_it(run, tree, recorder):
    run(tree.directories(), tree.files())
    recorder["rc"].write_text("3", encoding="utf-8")
    # Files keep their bytes, modes and mtimes; the directories' mtimes move (the temporary file came and went).
    before = etc_state(tree)
    files = tree.files(dropin=DROPIN + "# changed\n", runtime="broken")
    files[0]["validate"] = recorder["command"]
    result = run(tree.directories(), files, expect_failure=True)
    assert result["msg"].startswith(
        f"files[0]: the new content of {tree.dropin} on {HOST} did not pass validate ({sys.executable} "
    )
    assert "exit 3): line 2: bad value. The file was left as it was" in result["msg"]
    assert result["validate_rc"] == 3
    after = etc_state(tree)
    assert after == before  # neither file replaced, no temporary file left


def test_a_failed_validate_after_a_written_file_reports_it(run, tree, recorder):
    run(tree.directories(), tree.files())
    recorder["rc"].write_text("1", encoding="utf-8")
    files = tree.files(dropin=DROPIN + "# changed\n", runtime="broken")
    files[1]["validate"] = recorder["command"]
    result = run(tree.directories(), files, expect_failure=True)
    assert result["changed_paths"] == [str(tree.dropin)]
    assert tree.dropin.read_text(encoding="utf-8").endswith("# changed\n")
    assert tree.runtime.read_bytes() == RUNTIME.encode("utf-8")


def test_a_missing_validate_command_fails_naming_the_file(run, tree):
    files = tree.files()
    files[0]["validate"] = "/nonexistent/promtool check config %s"
    result = run(tree.directories(), files, expect_failure=True)
    assert result["msg"].startswith(f"files[0]: the new content of {tree.dropin} on {HOST} did not pass validate")
    assert "exit 127" in result["msg"]
    assert not tree.dropin.exists()
    assert sorted(p.name for p in tree.dropin_dir.iterdir()) == []


def test_check_mode_runs_no_validate(run, tree, recorder):
    recorder["rc"].write_text("1", encoding="utf-8")
    files = tree.files()
    files[0]["validate"] = recorder["command"]
    result = run(tree.directories(), files, check_mode=True)
    assert result["changed"] is True
    assert not recorder["log"].exists()


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("promtool check config", "must be a command holding %s (the file to check)"),
        ("", "must be a command holding %s"),
        ("sh -c 'unclosed %s", "cannot be split into words: No closing quotation"),
    ],
)
def test_a_bad_validate_fails_before_anything_is_written(run, tree, value, fragment):
    files = tree.files()
    files[1]["validate"] = value
    result = run(tree.directories(), files, expect_failure=True)
    assert result["msg"].startswith(f"files[1].validate ({tree.runtime}) ")
    assert fragment in result["msg"]
    assert not tree.root.joinpath("etc").exists()
