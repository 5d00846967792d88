"""Simulated apptainer (Apptainer 1.x, the lab build of vendor_facts/apptainer/deb.yml): `--version`, `version`, and
`exec` / `run` with `--nv`, `--nvccli` and bind paths.

What it really does: `exec [options] <image> <command> [args...]` checks the image path, reads the node's real
/etc/apptainer/apptainer.conf (the file the role edits) and nvliblist.conf, checks every bind source as Apptainer
does (`bind path` lines of apptainer.conf, then -B/--bind and APPTAINER_BIND), and then runs <command> **on the
node itself**, with the container's environment (APPTAINER_CONTAINER, APPTAINER_NAME, --env, --cleanenv, --pwd).
So `apptainer exec --nv image nvidia-smi -L` runs the lab's simulated nvidia-smi and lists the node's simulated
GPUs, and `srun ... apptainer exec --nv image all_reduce_perf ...` runs the lab's nccl-tests stand-in.

What is simulated, not done: there is no container. No SIF is opened or mounted, no namespace is created, nothing
is bind-mounted, and the image's own file system is never used (commands come from the node's PATH). An image
must exist: a directory (a sandbox) or a file that starts like a SIF (its launch line and the SIF_MAGIC at byte
32); any other file fails as "image format not recognized". The binds that would be made are exported to the
command as GPUFORGE_SIM_APPTAINER_BINDS (src:dst, comma-separated; a lab-only variable, the real tool sets none) and
the nvliblist.conf entries found on the node as GPUFORGE_SIM_APPTAINER_NV, so tests can see what a real container
would have had. `--nvccli` (or `use nvidia-container-cli = yes` with --nv) runs the lab's `nvidia-container-cli
info` instead of reading nvliblist.conf. The setuid flow (apptainer-suid) is not simulated.

Messages and exit codes follow the real tool: "apptainer version 1.5.3"; FATAL lines exit 255; a missing
apptainer.conf bind source is skipped with "WARNING: skipping mount of <src>: stat <src>: no such file or
directory"; a missing -B source is FATAL; --nv with no NVIDIA files prints "INFO:    Could not find any nv files on
this host!" and goes on.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys

CONF_DIR = "/etc/apptainer"
LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib")
SIF_LAUNCH = b"#!/usr/bin/env run-singularity\n"
SIF_MAGIC = b"SIF_MAGIC"
# /etc/hosts and /etc/localtime are bound even with --contain (apptainer.conf, "BIND PATH").
CONTAIN_KEEPS = ("/etc/hosts", "/etc/localtime")
# Options of exec/run that take a value (the rest of those listed are flags).
VALUE_OPTIONS = {
    "-B": "bind",
    "--bind": "bind",
    "--env": "env",
    "--pwd": "pwd",
    "-H": "home",
    "--home": "home",
    "--no-mount": "no_mount",
    "-W": "workdir",
    "--workdir": "workdir",
    "--env-file": "env_file",
    "--app": "app",
}
FLAG_OPTIONS = {
    "--nv": "nv",
    "--nvccli": "nvccli",
    "--rocm": "rocm",
    "-c": "contain",
    "--contain": "contain",
    "-C": "containall",
    "--containall": "containall",
    "-e": "cleanenv",
    "--cleanenv": "cleanenv",
    "--writable-tmpfs": "writable_tmpfs",
    "--fakeroot": "fakeroot",
    "-f": "fakeroot",
    "-u": "userns",
    "--userns": "userns",
    "--no-home": "no_home",
    "--no-init": "no_init",
    "--no-eval": "no_eval",
    "--compat": "compat",
}


class Fatal(Exception):
    """A FATAL error: printed as the real tool prints it, exit 255."""


def conf_dir() -> str:
    """The configuration directory (GPUFORGE_LAB_APPTAINER_CONF for tests, else the package's /etc/apptainer)."""
    return os.environ.get("GPUFORGE_LAB_APPTAINER_CONF", CONF_DIR)


def version() -> str:
    """The version of the installed lab package (its data file, written from the registry version)."""
    path = os.path.join(os.environ.get("GPUFORGE_LAB_LIB", "/usr/lib/gpuforge-lab"), "apptainer.json")
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)["version"]
    except (OSError, ValueError, KeyError):
        return "1.5.3"


def read_conf(path: str | None = None) -> dict:
    """apptainer.conf: directive -> value, except `bind path`, which is a list (the file may repeat it)."""
    path = path or os.path.join(conf_dir(), "apptainer.conf")
    conf: dict = {"bind path": []}
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError as exc:
        raise Fatal(f"Unable to parse apptainer.conf file: open {path}: {exc.strerror.lower()}") from exc
    for line in lines:
        text = line.strip()
        if not text or text.startswith("#") or "=" not in text:
            continue
        key, _, value = text.partition("=")
        key, value = " ".join(key.split()), value.strip()
        if key == "bind path":
            conf["bind path"].append(value)
        else:
            conf[key] = value
    return conf


def read_nvliblist(path: str | None = None) -> list[str]:
    path = path or os.path.join(conf_dir(), "nvliblist.conf")
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return []
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def nv_files(entries: list[str]) -> list[str]:
    """The nvliblist.conf entries present on this node: binaries on PATH, libraries (*.so*) in the library dirs."""
    found = []
    for entry in entries:
        if ".so" in entry:
            for directory in LIB_DIRS:
                matches = sorted(glob.glob(os.path.join(directory, entry + "*")))
                if matches:
                    found.append(matches[0])
                    break
        else:
            binary = shutil.which(entry)
            if binary:
                found.append(binary)
    return found


def split_bind(spec: str) -> tuple[str, str]:
    """'src[:dst[:opts]]' -> (src, dst)."""
    parts = spec.split(":")
    source = parts[0]
    return source, parts[1] if len(parts) > 1 and parts[1] else source


def check_image(image: str) -> None:
    if not os.path.lexists(image):
        raise Fatal(
            f"could not open image {image}: failed to retrieve path for {image}: "
            f"lstat {image}: no such file or directory"
        )
    if os.path.isdir(image):
        return
    try:
        with open(image, "rb") as handle:
            head = handle.read(64)
    except OSError as exc:
        raise Fatal(f"could not open image {image}: {exc.strerror.lower()}") from exc
    if not (head.startswith(SIF_LAUNCH) and head[32:41] == SIF_MAGIC):
        raise Fatal(f"could not open image {image}: image format not recognized")


def parse(argv: list[str]) -> tuple[dict, list[str]]:
    """Options before the image, then [image, command, args...] (as cobra stops at the first positional)."""
    options: dict = {"bind": [], "env": [], "no_mount": []}
    index = 0
    while index < len(argv):
        arg = argv[index]
        if not arg.startswith("-") or arg == "-":
            break
        name, eq, inline = arg.partition("=")
        if name in VALUE_OPTIONS:
            if eq:
                value = inline
            else:
                index += 1
                if index >= len(argv):
                    raise Fatal(f"flag needs an argument: {name}")
                value = argv[index]
            key = VALUE_OPTIONS[name]
            if key in ("bind", "env", "no_mount"):
                options[key].extend(item for item in value.split(",") if item)
            else:
                options[key] = value
        elif arg in FLAG_OPTIONS:
            options[FLAG_OPTIONS[arg]] = True
        else:
            raise Fatal(f"unknown flag: {arg}")
        index += 1
    return options, argv[index:]


def plan_binds(conf: dict, options: dict, err) -> list[tuple[str, str]]:
    """The binds a real container would get, in Apptainer's order: apptainer.conf's `bind path` lines (missing
    sources skipped with a warning; only /etc/hosts and /etc/localtime with --contain), then user binds (a missing
    source is fatal)."""
    binds = []
    skip_all = "bind-paths" in options["no_mount"]
    contained = options.get("contain") or options.get("containall")
    for spec in conf["bind path"]:
        source, dest = split_bind(spec)
        if skip_all or dest in options["no_mount"] or (contained and dest not in CONTAIN_KEEPS):
            continue
        if not os.path.exists(source):
            err.write(f"WARNING: skipping mount of {source}: stat {source}: no such file or directory\n")
            continue
        binds.append((source, dest))
    user = list(options["bind"])
    user += [item for item in os.environ.get("APPTAINER_BIND", "").split(",") if item]
    for spec in user:
        source, dest = split_bind(spec)
        if not os.path.exists(source):
            raise Fatal(
                f"container creation failed: mount hook function failure: mount {source}->{dest} error: "
                f"while mounting {source}: mount source {source} doesn't exist"
            )
        binds.append((source, dest))
    return binds


def gpu_setup(conf: dict, options: dict, err) -> list[str]:
    """--nv: the nvliblist.conf entries found on the node, or with --nvccli (or `use nvidia-container-cli = yes`)
    the lab's nvidia-container-cli asked for the GPUs."""
    nv = options.get("nv") or options.get("nvccli") or conf.get("always use nv", "no") == "yes"
    if not nv:
        return []
    nvccli = options.get("nvccli") or conf.get("use nvidia-container-cli", "no") == "yes"
    if nvccli:
        cli = shutil.which("nvidia-container-cli")
        if not cli:
            raise Fatal('"nvidia-container-cli": executable file not found in $PATH')
        proc = subprocess.run([cli, "info"], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise Fatal(f"container creation failed: nvidia-container-cli failed: {proc.stderr.strip()}")
        return [cli]
    found = nv_files(read_nvliblist())
    if not found:
        err.write("INFO:    Could not find any nv files on this host!\n")
    return found


def container_env(image: str, options: dict, binds: list[tuple[str, str]], nv: list[str]) -> dict:
    if options.get("cleanenv") or options.get("containall"):
        keep = ("PATH", "HOME", "USER", "LANG", "TERM")
        env = {key: os.environ[key] for key in keep if key in os.environ}
    else:
        env = dict(os.environ)
    for item in options["env"]:
        key, _, value = item.partition("=")
        env[key] = value
    env["APPTAINER_CONTAINER"] = os.path.abspath(image)
    env["APPTAINER_NAME"] = os.path.basename(os.path.normpath(image))
    env["GPUFORGE_SIM_APPTAINER_BINDS"] = ",".join(f"{source}:{dest}" for source, dest in binds)
    env["GPUFORGE_SIM_APPTAINER_NV"] = ",".join(nv)
    return env


def action(argv: list[str], out, err, run_script: bool = False) -> int:
    options, rest = parse(argv)
    wanted = 1 if run_script else 2
    if len(rest) < wanted:
        raise Fatal(f"requires at least {wanted} arg(s), only received {len(rest)}")
    image, command = rest[0], rest[1:]
    check_image(image)
    conf = read_conf()
    binds = plan_binds(conf, options, err)
    nv = gpu_setup(conf, options, err)
    if run_script and not command:
        command = ["/bin/sh"]
    program = shutil.which(command[0]) if "/" not in command[0] else command[0]
    if not program or not os.access(program, os.X_OK):
        raise Fatal(f'"{command[0]}": executable file not found in $PATH')
    pwd = options.get("pwd")
    if pwd and not os.path.isdir(pwd):
        raise Fatal(f"Could not set working directory: chdir {pwd}: no such file or directory")
    env = container_env(image, options, binds, nv)
    out.flush()
    err.flush()
    return subprocess.call([program, *command[1:]], env=env, cwd=pwd or None)


def main(argv: list[str] | None = None, out=None, err=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    out = out or sys.stdout
    err = err or sys.stderr
    if argv in (["--version"], ["-v", "--version"]):
        out.write(f"apptainer version {version()}\n")
        return 0
    if argv[:1] == ["version"]:
        out.write(f"{version()}\n")
        return 0
    try:
        if argv[:1] == ["exec"]:
            return action(argv[1:], out, err)
        if argv[:1] == ["run"]:
            return action(argv[1:], out, err, run_script=True)
    except Fatal as exc:
        err.write(f"FATAL:   {exc}\n")
        return 255
    command = argv[0] if argv else ""
    err.write(
        f'Error: unknown command "{command}" for "apptainer"\n'
        if command
        else "Usage:\n  apptainer [global options...]\n"
    )
    err.write("Run 'apptainer --help' for usage.\n")
    return 255 if command else 1
