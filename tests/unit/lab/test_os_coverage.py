"""The OS coverage record: task files read from Molecule logs, vars files from the shapes' facts."""

from pathlib import Path

from gpuforge.lab import os_coverage

LOG = """\
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
