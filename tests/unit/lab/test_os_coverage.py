"""The OS coverage record: task files read from Molecule logs, vars files from the shapes' facts."""

from pathlib import Path

import pytest
import yaml

from gpuforge.lab import os_coverage

LOG = """\
  \x1b[2m\u2502\x1b[0m TASK [nvidia_driver : Load the OS variables (distribution first, then OS
  \x1b[2m\u2502\x1b[0m   family)] ***
  \x1b[2m\x1b[32m\u2502\x1b[0m \x1b[0;32mok: [gpuforge-mol-os-rhel9]\x1b[0m
  \x1b[2m\x1b[32m\u2502\x1b[0m \x1b[0;32mok: [gpuforge-mol-os-ubuntu2204]\x1b[0m
  \x1b[2m\u2502\x1b[0m TASK [nvidia_driver : Install the driver packages]
  \x1b[2m\u2502\x1b[0m included: /work/main/roles/nvidia_driver/tasks/setup-RedHat.yml for gpuforge-mol-os-rhel9
  \x1b[2m\u2502\x1b[0m included: /work/main/roles/nvidia_driver/tasks/setup-Debian.yml for
  \x1b[2m\u2502\x1b[0m   gpuforge-mol-os-ubuntu2204
  included: /work/main/roles/nvidia_driver/tasks/verify.yml for gpuforge-mol-os-rhel9, gpuforge-mol-os-ubuntu2204
"""


def test_included_os_task_files_are_recorded_per_shape():
    shapes = os_coverage.platform_shapes("os_shapes")
    assert shapes == {
        "gpuforge-mol-os-rhel9": "rhel9",
        "gpuforge-mol-os-ubuntu2204": "ubuntu2204",
        "gpuforge-mol-os-ubuntu2404": "ubuntu2404",
    }
    assert os_coverage.executed_task_files(LOG, shapes) == {
        ("roles/nvidia_driver/tasks/setup-RedHat.yml", "rhel9"),
        ("roles/nvidia_driver/tasks/setup-Debian.yml", "ubuntu2204"),
    }


# As Molecule's box wrapped them in a CI run of 2026-12-04 (a longer checkout path): "included:" alone on its line,
# a path split inside a word, a loop item after the host, hosts continued on the next line.
WRAPPED = """\
  \x1b[2m\u2502\x1b[0m included:
  \x1b[2m\u2502\x1b[0m   /tmp/citest/main/roles/nvidia_container_toolkit/tasks/setup-Debian.yml
  \x1b[2m\u2502\x1b[0m   for gpuforge-mol-os-ubuntu2204
  \x1b[2m\u2502\x1b[0m
  \x1b[2m\u2502\x1b[0m included:
  \x1b[2m\u2502\x1b[0m   /tmp/citest/main/roles/nvidia_container_toolkit/tasks/runtime-RedHat.ym
  \x1b[2m\u2502\x1b[0m   l for gpuforge-mol-os-rhel9 => (item=containerd)
  \x1b[2m\u2502\x1b[0m included:
  \x1b[2m\u2502\x1b[0m   /tmp/citest/main/roles/container_runtime_limits/tasks/setup-Debian.yml
  \x1b[2m\u2502\x1b[0m   for gpuforge-mol-os-rhel9,
  \x1b[2m\u2502\x1b[0m   gpuforge-mol-os-ubuntu2404
  \x1b[2m\u2502\x1b[0m TASK [container_runtime_limits : Read the limit]
"""


def test_wrapped_include_lines_are_joined_again():
    shapes = os_coverage.platform_shapes("os_shapes")
    assert os_coverage.executed_task_files(WRAPPED, shapes) == {
        ("roles/nvidia_container_toolkit/tasks/setup-Debian.yml", "ubuntu2204"),
        ("roles/nvidia_container_toolkit/tasks/runtime-RedHat.yml", "rhel9"),
        ("roles/container_runtime_limits/tasks/setup-Debian.yml", "rhel9"),
        ("roles/container_runtime_limits/tasks/setup-Debian.yml", "ubuntu2404"),
    }


def test_vars_file_follows_the_first_found_convention():
    ubuntu = {"distribution": "Ubuntu", "os_family": "Debian"}
    assert os_coverage.vars_file_loaded("nvidia_driver", ubuntu) == "roles/nvidia_driver/vars/Ubuntu.yml"
    assert os_coverage.vars_file_loaded("slurm", ubuntu) == "roles/slurm/vars/Debian.yml"
    rhel = {"distribution": "RedHat", "os_family": "RedHat"}
    assert os_coverage.vars_file_loaded("nvidia_driver", rhel) == "roles/nvidia_driver/vars/RedHat.yml"


def test_record_leaves_out_failed_scenarios_and_lists_what_never_ran(tmp_path: Path):
    (tmp_path / "os_shapes.log").write_text(LOG, encoding="utf-8")
    record = os_coverage.record(tmp_path)
    assert record["task_files"]["roles/nvidia_driver/tasks/setup-RedHat.yml"] == ["rhel9"]
    assert record["vars_files_derived"]["roles/nvidia_driver/vars/Ubuntu.yml"] == ["ubuntu2204"]
    assert "roles/nvidia_driver/tasks/setup-RedHat.yml" not in record["task_files_never_executed"]
    assert "roles/slurm/tasks/setup-RedHat.yml" in record["task_files_never_executed"]
    (tmp_path / "os_shapes.failed").write_text("", encoding="utf-8")
    assert "roles/nvidia_driver/tasks/setup-RedHat.yml" in os_coverage.record(tmp_path)["task_files_never_executed"]


# Ansible's lines as Molecule's box shows them (.gpuforge/molecule/apptainer.log): a header wrapped at the box's
# width, its stars and the profile_tasks time on lines of their own, each result colored.
BOX = "  \x1b[2m\u2502\x1b[0m "
OK = "  \x1b[2m\x1b[32m\u2502\x1b[0m \x1b[0;32mok: [{}]\x1b[0m"
CHANGED = "  \x1b[2m\x1b[33m\u2502\x1b[0m \x1b[0;33mchanged: [{}]\x1b[0m"
SKIPPING = "  \x1b[2m\x1b[36m\u2502\x1b[0m \x1b[0;36mskipping: [{}]\x1b[0m"
RHEL9, UBUNTU2204, UBUNTU2404 = "gpuforge-mol-os-rhel9", "gpuforge-mol-os-ubuntu2204", "gpuforge-mol-os-ubuntu2404"
FIXTURE_ROLES = Path(__file__).parent / "fixtures" / "os_coverage" / "roles"


def boxed(*lines: str) -> str:
    """Log text of these lines, each a box line unless it is a result line already."""
    return "".join((line if "\u2502" in line else BOX + line) + "\n" for line in lines)


def header(role_and_name: str, *continued: str) -> list[str]:
    """A TASK header as the box prints it: wrapped lines go on indented, then the stars and the time."""
    return [
        f"TASK [{role_and_name}",
        *(f"  {piece}" for piece in continued),
        "  ****",
        "Friday 04 December 2026  11:22:05 +0000 (0:00:00.067)       0:00:04.895",
        "  *******",
    ]


@pytest.fixture
def shapes() -> dict[str, str]:
    return os_coverage.platform_shapes("os_shapes")


@pytest.fixture
def demo_role(monkeypatch: pytest.MonkeyPatch) -> None:
    """roles/ is the fixture's, with one role "demo" (tests/unit/lab/fixtures/os_coverage/roles/demo)."""
    monkeypatch.setattr(os_coverage, "ROLES", FIXTURE_ROLES)


def test_a_role_imported_with_tasks_from_counts_for_the_hosts_its_tasks_ran_on(shapes):
    # nvidia_driver's setup-Debian.yml imports vendor_repository with tasks_from: setup-Debian: no "included:" line,
    # only the imported tasks' headers. The name is a template ("... - {{ vendor_repository_name }}") printed
    # rendered, and the box wraps it inside a word.
    log = boxed(
        *header("vendor_repository : Add the repository, trusting only its k", "ey - cuda]"),
        CHANGED.format(UBUNTU2204),
        SKIPPING.format(UBUNTU2404),
        "",
        *header("vendor_repository : Refuse an incomplete repository definition]"),
        OK.format(RHEL9),
    )
    assert os_coverage.executed_task_files(log, shapes) == {
        ("roles/vendor_repository/tasks/setup-Debian.yml", "ubuntu2204"),
        ("roles/vendor_repository/tasks/setup-RedHat.yml", "rhel9"),
    }


def test_a_skipped_task_or_a_handler_after_it_is_no_run_of_its_file(shapes):
    log = boxed(
        *header("vendor_repository : Download the signing key (sha256 checked) - epel]"),
        SKIPPING.format(RHEL9),
        "",
        # As the real log has it: the task runs on no host (it notifies), then its handler changes something.
        *header(
            "vendor_repository : Refresh the package index now if the repository",
            "changed - {{ vendor_repository_name }}]",
        ),
        "",
        "RUNNING HANDLER [vendor_repository : Refresh the apt package index]",
        "  ************",
        CHANGED.format(UBUNTU2204),
        "",
        "PLAY RECAP *********************************************************************",
        f"{RHEL9} : ok=12 changed=3 unreachable=0 failed=0 skipped=9 rescued=0 ignored=0",
    )
    assert os_coverage.executed_task_files(log, shapes) == set()
    assert os_coverage.executed_task_files(log.replace("skipping: [", "ok: ["), shapes) == {
        ("roles/vendor_repository/tasks/setup-RedHat.yml", "rhel9")
    }


def test_the_argument_check_of_an_entry_point_names_its_file(shapes):
    log = boxed(
        *header(
            "vendor_repository : Validating arguments against arg spec",
            "'setup-RedHat' - Add one signed dnf repository (RHEL), for a role already",
            "in its RedHat tasks]",
        ),
        OK.format(RHEL9),
        *header("vendor_repository : Validating arguments against arg spec 'epel' -", "Add EPEL]"),
        OK.format(UBUNTU2404),
    )
    assert os_coverage.executed_task_files(log, shapes) == {("roles/vendor_repository/tasks/setup-RedHat.yml", "rhel9")}


def test_a_name_two_files_of_the_role_have_counts_for_neither(shapes):
    # nfs_client's setup-Debian.yml and setup-RedHat.yml both have "Install the NFS client packages".
    log = boxed(*header("nfs_client : Install the NFS client packages]"), CHANGED.format(UBUNTU2204))
    assert os_coverage.executed_task_files(log, shapes) == set()


def test_tasks_in_blocks_failed_delegated_and_looped_results_count(shapes, demo_role):
    log = boxed(
        # In setup-Debian.yml's block; a fatal task ran too (and its rescue after it).
        *header("demo : Write the apt source for stable]"),
        f'fatal: [{UBUNTU2204}]: FAILED! => {{"changed": false, "msg": "Destination',
        '  directory /etc/apt/sources.list.d does not exist"}',
        *header("demo : Explain the failed apt source]"),
        f'failed: [{UBUNTU2404}] (item=demo) => {{"msg": "the apt source could not be written"}}',
        "...ignoring",
    )
    assert os_coverage.executed_task_files(log, shapes) == {
        ("roles/demo/tasks/setup-Debian.yml", "ubuntu2204"),
        ("roles/demo/tasks/setup-Debian.yml", "ubuntu2404"),
    }
    always = boxed(*header("demo : Clean the apt cache]"), OK.format(f"{UBUNTU2204} -> localhost"))
    assert os_coverage.executed_task_files(always, shapes) == {("roles/demo/tasks/setup-Debian.yml", "ubuntu2204")}
    loop = boxed(*header("demo : Configure dnf]"), CHANGED.format(RHEL9) + " => (item=demo)")
    # main.yml's import_tasks is named "Configure dnf" too, but an import prints no header of its own.
    assert os_coverage.executed_task_files(loop, shapes) == {("roles/demo/tasks/setup-RedHat.yml", "rhel9")}


def test_a_name_written_out_wins_over_a_template_that_matches_it(shapes, demo_role):
    # main.yml and setup-Debian.yml both have "Install the packages": which one ran cannot be told.
    same_name = boxed(*header("demo : Install the packages]"), CHANGED.format(UBUNTU2204))
    assert os_coverage.executed_task_files(same_name, shapes) == set()
    # setup-Debian.yml's "Load {{ demo_module }}" matches main.yml's "Load the OS variables" too.
    loading = boxed(*header("demo : Load the OS variables]"), OK.format(UBUNTU2204))
    assert os_coverage.executed_task_files(loading, shapes) == set()
    assert os_coverage.roles_loading_vars(loading, shapes) == {("demo", "ubuntu2204")}
    module = boxed(*header("demo : Load br_netfilter]"), CHANGED.format(UBUNTU2204))
    assert os_coverage.executed_task_files(module, shapes) == {("roles/demo/tasks/setup-Debian.yml", "ubuntu2204")}
    assert os_coverage.roles_loading_vars(module, shapes) == set()


def test_the_vars_file_follows_the_names_the_role_tries(demo_role):
    # demo tries vars/<os_family>.yml only: its vars/Ubuntu.yml is never loaded, on Ubuntu either.
    ubuntu = {"distribution": "Ubuntu", "os_family": "Debian"}
    assert os_coverage.vars_file_loaded("demo", ubuntu) == "roles/demo/vars/Debian.yml"
    assert os_coverage.vars_file_loaded("demo", {"os_family": "RedHat"}) == "roles/demo/vars/RedHat.yml"
    assert os_coverage.vars_file_loaded("demo", {"distribution": "Ubuntu"}) is None


def test_vars_are_derived_for_a_role_without_os_task_files_when_its_include_vars_ran(tmp_path: Path):
    log = boxed(
        # container_runtime_limits and jupyterhub have vars/<OS>.yml but no *-<OS>.yml task file.
        *header("container_runtime_limits : Load the OS variables]"),
        OK.format(RHEL9),
        OK.format(UBUNTU2204),
        *header("jupyterhub : Load OS-specific variables]"),
        OK.format(UBUNTU2404),
        # roce_qos loads its vars only for ports (when:); skipped, nothing is loaded.
        *header("roce_qos : Load the OS variables]"),
        SKIPPING.format(UBUNTU2204),
        # benchmark_tools entered at image.yml (tasks_from) does not run main.yml's include_vars.
        *header("benchmark_tools : Create the build context folders]"),
        CHANGED.format(UBUNTU2204),
    )
    (tmp_path / "os_shapes.log").write_text(log, encoding="utf-8")
    record = os_coverage.record(tmp_path)
    assert record["vars_files_derived"] == {
        "roles/container_runtime_limits/vars/Debian.yml": ["ubuntu2204"],
        "roles/container_runtime_limits/vars/RedHat.yml": ["rhel9"],
        "roles/jupyterhub/vars/Debian.yml": ["ubuntu2404"],
    }
    assert record["task_files"] == {}
    assert {"roles/roce_qos/vars/Debian.yml", "roles/benchmark_tools/vars/Debian.yml"} <= set(
        record["vars_files_never_loaded"]
    )
    # What scripts/molecule_lanes.sh writes to os-coverage.yml.
    assert list(yaml.safe_load(yaml.safe_dump(record, sort_keys=False))) == [
        "task_files",
        "vars_files_derived",
        "task_files_never_executed",
        "vars_files_never_loaded",
    ]


def test_every_role_with_os_vars_has_an_include_vars_the_record_reads():
    facts = yaml.safe_load(os_coverage.FACTS.read_text(encoding="utf-8"))
    shape_facts = [entry["facts"] for entry in facts.values()] + [os_coverage.SHAPE_FACTS_DEBIAN12]
    roles = {path.split("/")[1] for path in os_coverage.os_vars_files()}
    unread = sorted(role for role in roles if not any(os_coverage.vars_file_loaded(role, f) for f in shape_facts))
    assert unread == []


def test_a_full_run_fails_on_an_unlisted_unexecuted_file_and_on_a_listed_one_that_ran():
    found = {
        "task_files_never_executed": ["roles/a/tasks/setup-RedHat.yml", "roles/b/tasks/setup-RedHat.yml"],
        "vars_files_never_loaded": ["roles/a/vars/RedHat.yml"],
    }
    listed = ["roles/a/tasks/setup-RedHat.yml", "roles/a/vars/RedHat.yml", "roles/c/vars/Ubuntu.yml"]
    problems = os_coverage.check_complete(found, listed)
    assert len(problems) == 2
    assert problems[0].startswith("roles/b/tasks/setup-RedHat.yml: no Molecule scenario executed it")
    assert problems[1].startswith("roles/c/vars/Ubuntu.yml: a scenario executed it now; remove its line")
    assert os_coverage.check_complete(found, [*listed[:2], "roles/b/tasks/setup-RedHat.yml"]) == []


def test_the_list_of_unexecuted_files_names_only_existing_os_files():
    listed = os_coverage.not_yet_executed()
    assert len(listed) == len(set(listed))
    assert set(listed) <= set(os_coverage.os_task_files()) | set(os_coverage.os_vars_files())


def test_main_exits_1_naming_the_problems_only_with_complete(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(os_coverage, "not_yet_executed", lambda: [])
    assert os_coverage.main([str(tmp_path)]) == 0  # no logs: every OS file unexecuted, a record only
    assert os_coverage.main([str(tmp_path), "--complete"]) == 1
    assert "no Molecule scenario executed it" in capsys.readouterr().err
