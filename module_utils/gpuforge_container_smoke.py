"""Container GPU smoke test: does a container started through a configured runtime see the node's GPUs?

Two ways, one judgement (checks ``{name, status, observed, expected, remedy}`` as gpu_node_check writes them,
so they become ``node_check`` records of the run's validation directory):

``engine``
    Start a pinned CUDA image through a container engine and read what it printed: ``nvidia-smi -L``
    (``GPU <index>: <name> (UUID: GPU-...)``, one line per GPU, the form the NVIDIA Container Toolkit's
    "Running a Sample Workload" page shows; https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/
    latest/sample-workload.html), compared by UUID with the GPUs nvidia_smi_facts saw on the node; or the
    CUDA sample ``vectorAdd``, whose last verdict line is ``Test PASSED`` (NVIDIA/cuda-samples,
    Samples/0_Introduction/vectorAdd/vectorAdd.cu; image ``nvcr.io/nvidia/k8s/cuda-sample:vectoradd-...``
    as in NVIDIA's "Run a Sample Workload" pages, https://docs.nvidia.com/confidential-computing/containers/
    run-sample-workload). Runtimes: podman with the OCI hook (``-e NVIDIA_VISIBLE_DEVICES=all``, the variable
    the hook acts on) or with CDI (``--device nvidia.com/gpu=all``, NVIDIA Container Toolkit "Support for
    Container Device Interface", https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/
    cdi-support.html), containerd through ``ctr run --runc-binary /usr/bin/nvidia-container-runtime``, docker
    with ``--runtime=nvidia``.

``bundle``
    Without a container engine (the lab): build a real OCI bundle (``runc spec``, a root file system holding
    one binary and the libraries ``ldd`` names), add the NVIDIA prestart hook exactly as the OCI hooks file
    of hooks.d describes it (hooks 1.0.0: ``hook``, ``when``, ``stages``; containers/common
    pkg/hooks/docs/oci-hooks.5.md) or the edits of a CDI spec (``containerEdits``: ``deviceNodes``,
    ``mounts``, ``env``, ``hooks``; cncf-tags/container-device-interface SPEC.md), ``runc create`` it, and
    read what the container got from ``/proc/<pid>/root/dev`` and ``/proc/<pid>/mountinfo`` while it waits
    in the ``created`` state (OCI runtime spec, runtime.md "Lifecycle": prestart hooks run during create).

Stdlib only, Python 3.8.
"""

from __future__ import annotations

import os
import re
import stat

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import FAIL, PASS, node_check

__all__ = [
    "CONTROL_NODES",
    "ENGINE_RUNTIMES",
    "HookConfigError",
    "add_oci_hook",
    "apply_cdi",
    "bundle_spec",
    "container_view",
    "engine_commands",
    "expected_device_nodes",
    "judge_engine",
    "judge_injection",
    "overall_status",
    "parse_gpu_list",
    "parse_ldd",
    "vector_add_passed",
]

# Device nodes every GPU container needs besides its GPUs (nvidia-container-cli list prints them first;
# nvidiactl is the one the driver always creates, the others appear with nvidia_uvm / nvidia_modeset).
CONTROL_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
REQUIRED_CONTROL_NODES = ("nvidiactl",)
ENGINE_RUNTIMES = ("podman-hook", "podman-cdi", "containerd", "docker")
NVIDIA_RUNTIME = "/usr/bin/nvidia-container-runtime"

_GPU_LINE = re.compile(r"^GPU (\d+): (.*) \(UUID: (GPU-[0-9A-Fa-f-]+)\)\s*$")
_LDD_ARROW = re.compile(r"^\s*\S+ => (/\S+) \(0x[0-9a-f]+\)\s*$")
_LDD_PLAIN = re.compile(r"^\s*(/\S+) \(0x[0-9a-f]+\)\s*$")


class HookConfigError(ValueError):
    """An OCI hooks file or CDI spec that gpuforge cannot apply as written."""


def parse_gpu_list(text: str) -> list:
    """``nvidia-smi -L`` lines -> ``[{index, name, uuid}]``; MIG lines and anything else are skipped."""
    gpus = []
    for line in (text or "").splitlines():
        match = _GPU_LINE.match(line.strip())
        if match:
            gpus.append({"index": int(match.group(1)), "name": match.group(2), "uuid": match.group(3)})
    return gpus


def vector_add_passed(text: str) -> bool:
    """True when the CUDA sample vectorAdd printed its success line ``Test PASSED``."""
    return any(line.strip() == "Test PASSED" for line in (text or "").splitlines())


def engine_commands(runtime: str, image: str, command: list, name: str, tools: dict) -> list:
    """The argv lists that start ``image`` with ``command`` through ``runtime`` (run in this order).

    tools maps podman/ctr/docker to their paths. containerd's ctr does not pull on run, so its image is pulled
    first; every run removes its container (``--rm``).
    """
    command = list(command)
    if runtime == "podman-hook":
        return [[tools["podman"], "run", "--rm", "--name", name, "-e", "NVIDIA_VISIBLE_DEVICES=all", image, *command]]
    if runtime == "podman-cdi":
        return [[tools["podman"], "run", "--rm", "--name", name, "--device", "nvidia.com/gpu=all", image, *command]]
    visible = "NVIDIA_VISIBLE_DEVICES=all"
    if runtime == "containerd":
        ctr = tools["ctr"]
        run = [ctr, "run", "--rm", "--runc-binary", NVIDIA_RUNTIME, "--env", visible, image, name, *command]
        return [[ctr, "images", "pull", image], run]
    if runtime == "docker":
        return [[tools["docker"], "run", "--rm", "--name", name, "--runtime=nvidia", "-e", visible, image, *command]]
    raise ValueError(f"unknown runtime {runtime!r}: one of {', '.join(ENGINE_RUNTIMES)}")


def _pass_fail(name, ok, observed, expected, remedy):
    """A node check (gpuforge_checks.node_check) passing or failing on ``ok``; the remedy is kept only on a failure."""
    return node_check(name, PASS if ok else FAIL, observed, expected, remedy=remedy)


def judge_engine(runtime: str, kind: str, expected_gpus: list, rc: int, output: str) -> dict:
    """One check of an engine run: kind ``gpu_list`` (nvidia-smi -L, compared by UUID with expected_gpus,
    the nvidia_smi_facts GPU dicts) or ``vector_add`` (exit 0 and ``Test PASSED``)."""
    name = f"container_gpus_{runtime.replace('-', '_')}"
    tail = "\n".join((output or "").strip().splitlines()[-5:])
    if kind == "vector_add":
        passed = rc == 0 and vector_add_passed(output)
        return _pass_fail(
            name,
            passed,
            {"rc": rc, "test_passed": vector_add_passed(output), "output_tail": tail},
            "vectorAdd exits 0 and prints 'Test PASSED'",
            f"vectorAdd did not pass in a {runtime} container: check the toolkit configuration for {runtime} "
            "(nvidia_container_toolkit role) and run the image by hand to see its error",
        )
    wanted = sorted(str(gpu.get("uuid")) for gpu in expected_gpus if gpu.get("uuid"))
    seen = sorted(gpu["uuid"] for gpu in parse_gpu_list(output))
    missing = sorted(set(wanted) - set(seen))
    extra = sorted(set(seen) - set(wanted))
    ok = rc == 0 and bool(wanted) and not missing and not extra
    return _pass_fail(
        name,
        ok,
        {"rc": rc, "gpus": seen, "missing": missing, "unexpected": extra, "output_tail": "" if ok else tail},
        {"gpus": wanted},
        f"a {runtime} container saw {len(seen)} of the node's {len(wanted)} GPU(s)"
        + (f" (missing {', '.join(missing)})" if missing else "")
        + (f" (not on the node: {', '.join(extra)})" if extra else "")
        + (f", exit status {rc}" if rc else "")
        + ": check the toolkit configuration for this runtime (nvidia_container_toolkit role)",
    )


def parse_ldd(text: str) -> list:
    """Absolute paths of the shared objects (and the ELF interpreter) in ``ldd`` output, in order."""
    paths = []
    for line in (text or "").splitlines():
        match = _LDD_ARROW.match(line) or _LDD_PLAIN.match(line)
        if match and match.group(1) not in paths:
            paths.append(match.group(1))
    return paths


def bundle_spec(spec: dict, args: list, env: list) -> dict:
    """``runc spec``'s default config with the smoke container's process: args, env (added to the default
    PATH/TERM), no terminal (runc create has no console to hand it). The /sys/fs/cgroup mount is left out:
    the smoke container does not read its cgroups, and inside a container on cgroup v1 (a lab node) runc
    cannot mount them ("error mounting cgroup to rootfs at /sys/fs/cgroup", tried on runc 1.1.5)."""
    spec = dict(spec)
    spec["mounts"] = [mount for mount in spec.get("mounts") or [] if mount.get("destination") != "/sys/fs/cgroup"]
    process = dict(spec.get("process") or {})
    process["args"] = list(args)
    process["terminal"] = False
    process["env"] = list(process.get("env") or []) + list(env)
    spec["process"] = process
    return spec


def _hook_matches(when: dict, args0: str) -> bool:
    if when.get("always") is True:
        return True
    commands = when.get("commands") or []
    return any(re.search(pattern, args0) for pattern in commands)


def add_oci_hook(spec: dict, hooks_file: dict) -> list:
    """Add the hook of an OCI hooks 1.0.0 file to the spec for each of its stages, as podman and cri-o do when
    its ``when`` matches (``always`` or a ``commands`` regex against the process's args[0]; annotation and
    bind-mount conditions are not evaluated here). Returns the stages it was added to ([] when it did not
    match)."""
    if hooks_file.get("version") != "1.0.0":
        raise HookConfigError(f"OCI hooks file version {hooks_file.get('version')!r}: only 1.0.0 is read")
    hook = hooks_file.get("hook") or {}
    stages = hooks_file.get("stages") or []
    if not hook.get("path") or not stages:
        raise HookConfigError("OCI hooks file without hook.path or stages")
    args0 = ((spec.get("process") or {}).get("args") or [""])[0]
    if not _hook_matches(hooks_file.get("when") or {}, args0):
        return []
    entry = {key: hook[key] for key in ("path", "args", "env", "timeout") if key in hook}
    hooks = spec.setdefault("hooks", {})
    for stage in stages:
        hooks.setdefault(stage, []).append(dict(entry))
    return list(stages)


def _device_entry(node: dict, stat_fn) -> dict:
    host = node.get("hostPath") or node["path"]
    try:
        info = stat_fn(host)
    except OSError as exc:
        raise HookConfigError(f"CDI device node {host} does not exist on this node ({exc.strerror or exc})") from exc
    if not stat.S_ISCHR(info.st_mode) and not stat.S_ISBLK(info.st_mode):
        raise HookConfigError(f"CDI device node {host} is not a device file")
    return {
        "path": node["path"],
        "type": node.get("type") or ("c" if stat.S_ISCHR(info.st_mode) else "b"),
        "major": node.get("major", os.major(info.st_rdev)),
        "minor": node.get("minor", os.minor(info.st_rdev)),
        "fileMode": node.get("fileMode", stat.S_IMODE(info.st_mode)),
        "uid": node.get("uid", 0),
        "gid": node.get("gid", 0),
    }


def apply_cdi(spec: dict, cdi: dict, device: str, stat_fn=os.stat) -> dict:
    """Apply a CDI spec's common edits and those of ``device`` (``all``, an index, a UUID) to the OCI spec:
    device nodes (type and numbers from the node's file, as CDI injection does, plus a device-cgroup allow
    rule), mounts, env and hooks. Returns ``{devices, mounts, hooks}`` added."""
    if cdi.get("kind") != "nvidia.com/gpu":
        raise HookConfigError(f"CDI spec of kind {cdi.get('kind')!r}, not nvidia.com/gpu")
    matches = [entry for entry in cdi.get("devices") or [] if str(entry.get("name")) == device]
    if not matches:
        names = ", ".join(str(entry.get("name")) for entry in cdi.get("devices") or [])
        raise HookConfigError(f"CDI device nvidia.com/gpu={device} is not in the spec ({names})")
    edits = [cdi.get("containerEdits") or {}, matches[0].get("containerEdits") or {}]
    linux = spec.setdefault("linux", {})
    resources = linux.setdefault("resources", {})
    added = {"devices": [], "mounts": [], "hooks": []}
    for edit in edits:
        for node in edit.get("deviceNodes") or []:
            entry = _device_entry(node, stat_fn)
            linux.setdefault("devices", []).append(entry)
            resources.setdefault("devices", []).append(
                {
                    "allow": True,
                    "type": entry["type"],
                    "major": entry["major"],
                    "minor": entry["minor"],
                    "access": "rwm",
                }
            )
            added["devices"].append(entry["path"])
        for mount in edit.get("mounts") or []:
            entry = {
                "destination": mount["containerPath"],
                "source": mount["hostPath"],
                "type": mount.get("type", "bind"),
                "options": list(mount.get("options") or ["ro", "nosuid", "nodev", "bind"]),
            }
            spec.setdefault("mounts", []).append(entry)
            added["mounts"].append(entry["destination"])
        process = spec.setdefault("process", {})
        process["env"] = list(process.get("env") or []) + list(edit.get("env") or [])
        for hook in edit.get("hooks") or []:
            entry = {key: hook[key] for key in ("path", "args", "env", "timeout") if key in hook}
            spec.setdefault("hooks", {}).setdefault(hook["hookName"], []).append(entry)
            added["hooks"].append(hook["hookName"])
    return added


def container_view(pid: int, proc: str = "/proc") -> dict:
    """What a created container holds: ``devices`` (``{path, major, minor}`` of every NVIDIA character device
    under its /dev) and ``mounts`` (mount points of its mountinfo, in order)."""
    dev = os.path.join(proc, str(pid), "root", "dev")
    devices = []
    for name in sorted(os.listdir(dev)):
        if not name.startswith("nvidia"):
            continue
        info = os.lstat(os.path.join(dev, name))
        if stat.S_ISCHR(info.st_mode):
            devices.append({"path": f"/dev/{name}", "major": os.major(info.st_rdev), "minor": os.minor(info.st_rdev)})
    with open(os.path.join(proc, str(pid), "mountinfo"), encoding="utf-8") as handle:
        mounts = [line.split()[4] for line in handle if len(line.split()) > 4]
    return {"devices": devices, "mounts": mounts}


def expected_device_nodes(expected_gpus: list, dev_dir: str = "/dev", stat_fn=os.stat) -> dict:
    """The node's own device files a GPU container should get: ``{path: [major, minor]}`` for each expected
    GPU (``/dev/nvidia<minor_number>``, else its index) and each control node present; a GPU's file that is
    missing on the node maps to None."""
    wanted = {}
    for position, gpu in enumerate(expected_gpus):
        minor = gpu.get("minor_number")
        minor = gpu.get("index") if minor is None else minor
        if isinstance(minor, bool) or not str(minor).isdigit():
            raise ValueError(f"expected_gpus[{position}] has no minor_number or index (got {minor!r})")
        wanted[f"/dev/nvidia{int(minor)}"] = None
    for name in CONTROL_NODES:
        wanted.setdefault(f"/dev/{name}", None)
    for path in list(wanted):
        try:
            info = stat_fn(os.path.join(dev_dir, os.path.basename(path)))
        except OSError:
            if os.path.basename(path) in CONTROL_NODES and os.path.basename(path) not in REQUIRED_CONTROL_NODES:
                del wanted[path]  # optional control node the node does not have
            continue
        wanted[path] = [os.major(info.st_rdev), os.minor(info.st_rdev)]
    return wanted


def judge_injection(method: str, wanted: dict, view: dict, libraries: list, rc: int = 0, error: str = "") -> list:
    """Checks of one bundle run: the container got exactly the wanted device nodes with the node's numbers,
    and every driver library the node has (libraries: host paths ``nvidia-container-cli list`` names that
    exist) is mounted into it. ``rc``/``error``: runc create's exit status and message."""
    tag = method.replace("-", "_")
    if rc != 0:
        return [
            _pass_fail(
                f"container_devices_{tag}",
                False,
                {"runc_create_rc": rc, "error": error[-800:]},
                {"devices": sorted(wanted)},
                f"runc create failed with the {method} configuration: see the error (the hook's or runc's message)",
            )
        ]
    got = {device["path"]: [device["major"], device["minor"]] for device in view.get("devices") or []}
    missing = sorted(path for path in wanted if path not in got)
    wrong = sorted(path for path, numbers in wanted.items() if path in got and numbers and got[path] != numbers)
    absent_on_node = sorted(path for path, numbers in wanted.items() if numbers is None)
    extra = sorted(path for path in got if path not in wanted)
    ok = not (missing or wrong or absent_on_node or extra)
    checks = [
        _pass_fail(
            f"container_devices_{tag}",
            ok,
            {"devices": got, "missing": missing, "wrong_numbers": wrong, "unexpected": extra},
            {"devices": wanted},
            "the container did not get the node's GPU device files"
            + (
                f"; missing on the node itself: {', '.join(absent_on_node)} (driver loaded? nvidia-persistenced?)"
                if absent_on_node
                else ""
            )
            + (f"; not injected: {', '.join(missing)}" if missing else "")
            + (f"; other device numbers than the node's: {', '.join(wrong)}" if wrong else "")
            + (f"; not expected: {', '.join(extra)}" if extra else ""),
        )
    ]
    # The toolkit mounts a library into the container's own library directory, which need not be the node's
    # (/usr/lib64 on an EL image, /usr/lib/x86_64-linux-gnu on Debian's): matched by file name.
    mounted_names = {os.path.basename(point) for point in view.get("mounts") or []}
    unmounted = sorted(path for path in libraries if os.path.basename(path) not in mounted_names)
    checks.append(
        _pass_fail(
            f"container_driver_libraries_{tag}",
            not unmounted,
            {"mounted": sorted(path for path in libraries if path not in unmounted), "not_mounted": unmounted},
            {"libraries": sorted(libraries)},
            f"driver libraries not mounted into the container: {', '.join(unmounted)}",
        )
    )
    return checks


def overall_status(checks: list) -> str:
    """``FAIL`` when any check failed, else ``PASS``."""
    return FAIL if any(check["status"] == FAIL for check in checks) else PASS
