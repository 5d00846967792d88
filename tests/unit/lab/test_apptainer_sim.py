"""Simulated apptainer (lab/sim/gpuforge_sim/apptainer.py): the real tool's version lines, its exec option parsing,
bind path checks and messages, --nv through nvliblist.conf or nvidia-container-cli, and the command run on the node."""

from __future__ import annotations

import io
import json
import os

import pytest
import yaml
from gpuforge_sim import apptainer

from gpuforge.paths import LAB_DIR

PACKAGES = yaml.safe_load((LAB_DIR / "packages" / "packages.yml").read_text(encoding="utf-8"))
LAB_FILES = PACKAGES["data_files"]["/usr/bin/apptainer"]


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A node with the lab package's apptainer.conf and nvliblist.conf, version 1.5.3, and an empty PATH dir."""
    conf = tmp_path / "etc"
    conf.mkdir()
    (conf / "apptainer.conf").write_text(LAB_FILES["/etc/apptainer/apptainer.conf"], encoding="utf-8")
    (conf / "nvliblist.conf").write_text(LAB_FILES["/etc/apptainer/nvliblist.conf"], encoding="utf-8")
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "apptainer.json").write_text(json.dumps({"version": "1.5.3"}), encoding="utf-8")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    image = tmp_path / "image.sandbox"
    image.mkdir()
    monkeypatch.setenv("GPUFORGE_LAB_APPTAINER_CONF", str(conf))
    monkeypatch.setenv("GPUFORGE_LAB_LIB", str(lib))
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.delenv("APPTAINER_BIND", raising=False)
    return {"conf": conf / "apptainer.conf", "bin": bin_dir, "image": str(image), "tmp": tmp_path}


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    rc = apptainer.main(argv, out, err)
    return rc, out.getvalue(), err.getvalue()


def tool(directory, name, text):
    path = directory / name
    path.write_text("#!/bin/sh\n" + text, encoding="utf-8")
    path.chmod(0o755)
    return path


def test_version_lines_are_the_real_tools(node):
    assert run(["--version"]) == (0, "apptainer version 1.5.3\n", "")
    assert run(["version"]) == (0, "1.5.3\n", "")


def test_lab_conf_is_parsed_with_the_package_bind_paths(node):
    conf = apptainer.read_conf()
    assert conf["bind path"] == ["/etc/localtime", "/etc/hosts"]
    assert conf["use nvidia-container-cli"] == "no"
    assert conf["always use nv"] == "no"


def test_exec_runs_the_command_on_the_node_with_binds_in_its_environment(node, capfd):
    with node["conf"].open("a", encoding="utf-8") as handle:
        handle.write(f"bind path = {node['tmp']}\nbind path = /var/tmp:/scratch\n")
    rc, _, err = run(
        ["exec", "-B", f"{node['tmp']}/bin:/opt/bin", node["image"], "printenv", "GPUFORGE_SIM_APPTAINER_BINDS"]
    )
    assert rc == 0 and err == ""
    assert capfd.readouterr().out.strip().split(",") == [
        "/etc/localtime:/etc/localtime",
        "/etc/hosts:/etc/hosts",
        f"{node['tmp']}:{node['tmp']}",
        "/var/tmp:/scratch",
        f"{node['tmp']}/bin:/opt/bin",
    ]


def test_exit_code_and_container_environment_pass_through(node, capfd):
    rc, _, _ = run(["exec", "--env", "A=1", node["image"], "sh", "-c", 'echo "$A $APPTAINER_NAME"; exit 3'])
    assert rc == 3
    assert capfd.readouterr().out == "1 image.sandbox\n"


def test_missing_conf_bind_source_is_skipped_with_the_real_warning(node, capfd):
    with node["conf"].open("a", encoding="utf-8") as handle:
        handle.write("bind path = /gpfs/not-mounted\n")
    rc, _, err = run(["exec", node["image"], "true"])
    assert rc == 0
    assert err == "WARNING: skipping mount of /gpfs/not-mounted: stat /gpfs/not-mounted: no such file or directory\n"


def test_missing_user_bind_source_is_fatal(node):
    rc, _, err = run(["exec", "--bind", "/nonexistent:/data", node["image"], "true"])
    assert rc == 255
    assert err == (
        "FATAL:   container creation failed: mount hook function failure: mount /nonexistent->/data error: "
        "while mounting /nonexistent: mount source /nonexistent doesn't exist\n"
    )


def test_contain_keeps_only_hosts_and_localtime(node, capfd):
    with node["conf"].open("a", encoding="utf-8") as handle:
        handle.write("bind path = /var/tmp\n")
    rc, _, _ = run(["exec", "--contain", node["image"], "printenv", "GPUFORGE_SIM_APPTAINER_BINDS"])
    assert rc == 0
    assert capfd.readouterr().out.strip() == "/etc/localtime:/etc/localtime,/etc/hosts:/etc/hosts"


def test_no_mount_bind_paths(node, capfd):
    rc, _, _ = run(["exec", "--no-mount", "bind-paths", node["image"], "printenv", "GPUFORGE_SIM_APPTAINER_BINDS"])
    assert rc == 0 and capfd.readouterr().out.strip() == ""


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            None,
            "could not open image {path}: failed to retrieve path for {path}: lstat {path}: no such file or directory",
        ),
        (b"not an image", "could not open image {path}: image format not recognized"),
    ],
)
def test_bad_images_are_fatal(node, content, message):
    path = node["tmp"] / "x.sif"
    if content is not None:
        path.write_bytes(content)
    rc, _, err = run(["exec", str(path), "true"])
    assert rc == 255 and err == f"FATAL:   {message.format(path=path)}\n"


def test_a_sif_header_is_accepted(node):
    path = node["tmp"] / "x.sif"
    path.write_bytes(apptainer.SIF_LAUNCH.ljust(32, b"\0") + apptainer.SIF_MAGIC + b"\0" * 32)
    assert run(["exec", str(path), "true"])[0] == 0


def test_nv_without_driver_files_says_so_and_goes_on(node, monkeypatch):
    monkeypatch.setattr(apptainer, "nv_files", lambda entries: [])
    rc, _, err = run(["exec", "--nv", node["image"], "true"])
    assert rc == 0 and err == "INFO:    Could not find any nv files on this host!\n"


def test_nv_finds_the_nvliblist_binaries_on_path(node, capfd):
    smi = tool(node["bin"], "nvidia-smi", 'echo "GPU 0: Tesla V100-SXM2-16GB (UUID: GPU-0)"\n')
    rc, _, err = run(["exec", "--nv", node["image"], "nvidia-smi", "-L"])
    assert rc == 0 and err == ""
    assert capfd.readouterr().out == "GPU 0: Tesla V100-SXM2-16GB (UUID: GPU-0)\n"
    assert apptainer.nv_files(apptainer.read_nvliblist())[0] == str(smi)


def test_nvccli_needs_nvidia_container_cli(node, monkeypatch):
    monkeypatch.setenv("PATH", str(node["bin"]))
    rc, _, err = run(["exec", "--nvccli", node["image"], "true"])
    assert rc == 255 and err == 'FATAL:   "nvidia-container-cli": executable file not found in $PATH\n'
    tool(node["bin"], "nvidia-container-cli", "echo 'NVRM version:   550.90.07'\n")
    tool(node["bin"], "true", "exit 0\n")
    node["conf"].write_text(
        node["conf"].read_text().replace("use nvidia-container-cli = no", "use nvidia-container-cli = yes")
    )
    assert run(["exec", "--nv", node["image"], "true"])[0] == 0


def test_command_not_found_and_unknown_flag(node):
    assert run(["exec", node["image"], "no-such-command"]) == (
        255,
        "",
        'FATAL:   "no-such-command": executable file not found in $PATH\n',
    )
    assert run(["exec", "--frobnicate", node["image"], "true"]) == (255, "", "FATAL:   unknown flag: --frobnicate\n")
    assert run(["exec", node["image"]])[0] == 255


def test_pwd_must_exist(node, capfd):
    rc, _, _ = run(["exec", "--pwd", "/", node["image"], "pwd"])
    assert rc == 0 and capfd.readouterr().out == "/\n"
    assert run(["exec", "--pwd", "/nonexistent", node["image"], "pwd"])[0] == 255


def test_version_falls_back_when_the_data_file_is_missing(node, monkeypatch, tmp_path):
    monkeypatch.setenv("GPUFORGE_LAB_LIB", str(tmp_path / "none"))
    assert apptainer.version() == "1.5.3"
    assert os.path.basename(apptainer.CONF_DIR) == "apptainer"
