#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: does a container started through a configured runtime see the node's GPUs?"""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: container_gpu_smoke
short_description: Start a GPU container through a configured runtime and check the GPUs it sees
description:
  - The container GPU smoke test after the NVIDIA Container Toolkit is configured; one check per runtime or
    method, in the form gpu_node_check writes (C({name, status, observed, expected, remedy})).
  - I(mode=engine) runs I(image) with I(command) through each of I(runtimes) (C(podman-hook) podman with the
    OCI prestart hook and C(NVIDIA_VISIBLE_DEVICES=all), C(podman-cdi) podman with
    C(--device nvidia.com/gpu=all), C(containerd) ctr with the nvidia runtime as runc binary, C(docker) with
    C(--runtime=nvidia)). I(check=gpu_list) compares the UUIDs C(nvidia-smi -L) prints in the container with
    I(expected_gpus); I(check=vector_add) wants exit 0 and C(Test PASSED) from the CUDA vectorAdd sample.
  - I(mode=bundle) needs no container engine; it builds an OCI bundle in a temporary directory (C(runc spec),
    a root file system holding I(binary) and the libraries C(ldd) names), adds the NVIDIA prestart hook as
    I(hook_config) (the OCI hooks file podman and cri-o read) describes it, or the edits of I(cdi_spec),
    runs C(runc create), and compares the NVIDIA device files in the created container's /dev with the
    node's own (GPU files of I(expected_gpus) and the control files the node has), and its mounts with the
    driver libraries of I(libraries) that exist on the node. The container is deleted and the directory
    removed afterwards, whatever happened.
  - In check mode nothing runs.
version_added: "0.1.0"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuforge.cluster.common
attributes:
  check_mode:
    support: partial
    details: Returns the commands or the bundle method it would use; nothing is started.
  diff_mode:
    support: none
options:
  mode:
    description: C(engine) (container engines and an image) or C(bundle) (runc and an OCI bundle, no image).
    type: str
    choices: [engine, bundle]
    default: engine
  expected_gpus:
    description:
      - The node's GPUs as nvidia_smi_facts reports them (C(ansible_facts.nvidia_smi.gpus)); C(uuid) is compared
        in engine mode, C(minor_number) (else C(index)) names the device file in bundle mode.
    type: list
    elements: dict
    required: true
  runtimes:
    description: Engine mode, the runtimes to start the container through.
    type: list
    elements: str
    choices: [podman-hook, podman-cdi, containerd, docker]
    default: []
  image:
    description: Engine mode, the pinned CUDA image (a digest or a fixed tag).
    type: str
  command:
    description: Engine mode, the command to run in the image; empty runs the image's own (the sample's vectorAdd).
    type: list
    elements: str
    default: [nvidia-smi, -L]
  check:
    description: Engine mode, what the output is judged by.
    type: str
    choices: [gpu_list, vector_add]
    default: gpu_list
  methods:
    description: Bundle mode, how the GPUs are handed to the container.
    type: list
    elements: str
    choices: [oci-hook, cdi]
    default: [oci-hook]
  hook_config:
    description: Bundle mode, the OCI hooks file (hooks 1.0.0 JSON) of the NVIDIA prestart hook.
    type: path
    default: /usr/share/containers/oci/hooks.d/oci-nvidia-hook.json
  cdi_spec:
    description: Bundle mode with C(cdi), the parsed CDI spec (C(nvidia-ctk cdi generate); read it with C(from_yaml)).
    type: dict
  visible_devices:
    description: Bundle mode, C(NVIDIA_VISIBLE_DEVICES) for the hook and the CDI device name (C(all), an index, a UUID).
    type: str
    default: all
  libraries:
    description:
      - Bundle mode, the driver library paths C(nvidia-container-cli list) prints; those that exist on the node
        must be mounted into the container, the others are reported as absent.
    type: list
    elements: path
    default: []
  dev_dir:
    description: Bundle mode, where the node's device files are.
    type: path
    default: /dev
  runc:
    description: Bundle mode, the runc program.
    type: str
    default: runc
  binary:
    description: Bundle mode, the program the container runs (it is created, never started).
    type: str
    default: sleep
  work_dir:
    description: Bundle mode, the directory the temporary bundle is made in.
    type: path
    default: /tmp
  timeout:
    description: Seconds one container start (or image pull) may take.
    type: int
    default: 300
requirements:
  - engine mode, the engines of I(runtimes) (podman, ctr, docker); bundle mode, runc, ldd and root
notes:
  - Bundle mode reads the container through /proc/<pid>/root while it waits in the C(created) state; it does
    not start it, so I(binary) never runs.
"""

EXAMPLES = r"""
- name: The CUDA sample sees every GPU through podman's CDI and containerd's nvidia runtime
  gpuforge.cluster.container_gpu_smoke:
    mode: engine
    runtimes: [podman-cdi, containerd]
    image: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubuntu22.04
    command: []
    check: vector_add
    expected_gpus: "{{ ansible_facts.nvidia_smi.gpus }}"

- name: The prestart hook injects the node's GPU device files into a runc container (no engine)
  gpuforge.cluster.container_gpu_smoke:
    mode: bundle
    methods: [oci-hook]
    expected_gpus: "{{ ansible_facts.nvidia_smi.gpus }}"
"""

RETURN = r"""
checks:
  description: One check per runtime (engine) or method (bundle), C({name, status, observed, expected, remedy}).
  returned: when something ran
  type: list
  elements: dict
verdict:
  description: C(PASS) or C(FAIL), the worst check.
  returned: when something ran
  type: str
commands:
  description: The commands run (engine mode) or the runc calls (bundle mode).
  returned: always
  type: list
  elements: list
methods:
  description: Bundle mode, the methods tried.
  returned: bundle mode
  type: list
  elements: str
libraries_absent_on_node:
  description: Bundle mode, the paths of I(libraries) the node does not have (not expected in the container).
  returned: bundle mode, when something ran
  type: list
  elements: str
"""

import json
import os
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_container_smoke import (
    HookConfigError,
    add_oci_hook,
    apply_cdi,
    bundle_spec,
    container_view,
    engine_commands,
    expected_device_nodes,
    judge_engine,
    judge_injection,
    overall_status,
    parse_ldd,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import Tool, this_host

RUNC_FIX = "install runc (Debian/EL package runc)"
ENGINE_TOOLS = {"podman-hook": "podman", "podman-cdi": "podman", "containerd": "ctr", "docker": "docker"}


def _engine(module, params, result):
    if not params["runtimes"]:
        module.fail_json(msg="mode=engine needs at least one of runtimes", **result)
    if not params["image"]:
        module.fail_json(msg="mode=engine needs image (a pinned CUDA image)", **result)
    tools = {}
    for runtime in params["runtimes"]:
        tool = ENGINE_TOOLS[runtime]
        fix = f"install {tool} or remove {runtime} from runtimes"
        tools[tool] = Tool(module, tool, fix, result=result).require()
    plans = []
    for runtime in params["runtimes"]:
        name = f"gpuforge-smoke-{runtime}-{os.getpid()}"
        plans.append((runtime, engine_commands(runtime, params["image"], params["command"], name, tools)))
    result["commands"] = [argv for _runtime, commands in plans for argv in commands]
    if module.check_mode:
        module.exit_json(**result)
    checks = []
    for runtime, commands in plans:
        rc, out, err = 0, "", ""
        for argv in commands:
            engine = Tool(module, argv[0], "install it or give its full path", result=result)
            rc, out, err, timed_out = engine.run_bounded(argv[1:], params["timeout"])
            if timed_out:
                err = f"{err}\ntimed out after {params['timeout']} s"
            if rc != 0:
                break
        checks.append(judge_engine(runtime, params["check"], params["expected_gpus"], rc, f"{out}\n{err}"))
    return checks


def _copy_into(rootfs, path):
    target = os.path.join(rootfs, path.lstrip("/"))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    shutil.copy2(os.path.realpath(path), target)


def _runc(module, params, runc, root, args, result):
    argv = [runc, "--root", root, *args]
    result["commands"].append(argv)
    rc, out, err, timed_out = Tool(module, runc, RUNC_FIX, result=result).run_bounded(argv[1:], params["timeout"])
    if timed_out:
        err = f"{err}\nrunc {args[0]} timed out after {params['timeout']} s"
    return rc, out, err


def _bundle_once(module, params, method, runc, binary, ldd_text, wanted, libraries, result):
    """One runc create with the method's configuration -> its checks. The container and the directory are
    always removed."""
    work = tempfile.mkdtemp(prefix=f"gpuforge-smoke-{method}-", dir=params["work_dir"])
    container = os.path.basename(work)
    root = os.path.join(work, "runc-state")
    try:
        rc, _out, err = _runc(module, params, runc, root, ["spec", "--bundle", work], result)
        if rc != 0:
            module.fail_json(msg=f"runc spec failed on {this_host()}: {err.strip()[:400]}", **result)
        with open(os.path.join(work, "config.json"), encoding="utf-8") as handle:
            spec = json.load(handle)
        rootfs = os.path.join(work, (spec.get("root") or {}).get("path") or "rootfs")
        for path in [binary, *parse_ldd(ldd_text)]:
            _copy_into(rootfs, path)
        spec = bundle_spec(spec, [binary, "3600"], [f"NVIDIA_VISIBLE_DEVICES={params['visible_devices']}"])
        try:
            if method == "oci-hook":
                with open(params["hook_config"], encoding="utf-8") as handle:
                    if not add_oci_hook(spec, json.load(handle)):
                        raise HookConfigError(f"{params['hook_config']}: its `when` does not match {binary}")
            else:
                apply_cdi(spec, params["cdi_spec"] or {}, params["visible_devices"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            # A hooks file or CDI spec of another shape (a missing key, a list where a mapping belongs).
            return judge_injection(method, wanted, {}, libraries, rc=1, error=f"{method} configuration: {exc}")
        with open(os.path.join(work, "config.json"), "w", encoding="utf-8") as handle:
            json.dump(spec, handle, indent=2)
        rc, _out, err = _runc(module, params, runc, root, ["create", "--bundle", work, container], result)
        if rc != 0:
            return judge_injection(method, wanted, {}, libraries, rc=rc, error=err.strip())
        rc, out, err = _runc(module, params, runc, root, ["state", container], result)
        try:
            pid = int(json.loads(out)["pid"]) if rc == 0 else 0
            view = container_view(pid) if pid else None
        except (ValueError, KeyError, OSError) as exc:
            err, view = f"{err} {exc}", None
        if view is None:
            return judge_injection(method, wanted, {}, libraries, rc=rc or 1, error=f"runc state: {err.strip()}")
        return judge_injection(method, wanted, view, libraries)
    finally:
        if os.path.isdir(root):
            _runc(module, params, runc, root, ["delete", "--force", container], result)
        shutil.rmtree(work, ignore_errors=True)


def _bundle(module, params, result):
    if os.geteuid() != 0:
        module.fail_json(msg=f"mode=bundle runs runc as root; become root on {this_host()}", **result)
    if "cdi" in params["methods"] and not params["cdi_spec"]:
        module.fail_json(msg="method cdi needs cdi_spec (the parsed output of nvidia-ctk cdi generate)", **result)
    runc = Tool(module, params["runc"], RUNC_FIX, result=result).require()
    binary = Tool(module, params["binary"], "give binary as a program the node has", result=result).require()
    ldd = Tool(module, "ldd", "install libc-bin (glibc-common on EL)", result=result)
    ldd.require()
    result["methods"] = params["methods"]
    if module.check_mode:
        module.exit_json(**result)
    rc, ldd_text, err = ldd.run([binary])
    if rc != 0:
        module.fail_json(msg=f"ldd {binary} failed: {err.strip()[:400]}", **result)
    try:
        wanted = expected_device_nodes(params["expected_gpus"], params["dev_dir"])
    except ValueError as exc:
        module.fail_json(msg=f"{exc}: pass ansible_facts.nvidia_smi.gpus from nvidia_smi_facts", **result)
    libraries = [path for path in params["libraries"] if os.path.exists(path)]
    result["libraries_absent_on_node"] = [path for path in params["libraries"] if path not in libraries]
    checks = []
    for method in params["methods"]:
        checks += _bundle_once(module, params, method, runc, binary, ldd_text, wanted, libraries, result)
    return checks


def main():
    module = AnsibleModule(
        argument_spec={
            "mode": {"type": "str", "choices": ["engine", "bundle"], "default": "engine"},
            "expected_gpus": {"type": "list", "elements": "dict", "required": True},
            "runtimes": {
                "type": "list",
                "elements": "str",
                "choices": list(ENGINE_TOOLS),
                "default": [],
            },
            "image": {"type": "str"},
            "command": {"type": "list", "elements": "str", "default": ["nvidia-smi", "-L"]},
            "check": {"type": "str", "choices": ["gpu_list", "vector_add"], "default": "gpu_list"},
            "methods": {"type": "list", "elements": "str", "choices": ["oci-hook", "cdi"], "default": ["oci-hook"]},
            "hook_config": {"type": "path", "default": "/usr/share/containers/oci/hooks.d/oci-nvidia-hook.json"},
            "cdi_spec": {"type": "dict"},
            "visible_devices": {"type": "str", "default": "all"},
            "libraries": {"type": "list", "elements": "path", "default": []},
            "dev_dir": {"type": "path", "default": "/dev"},
            "runc": {"type": "str", "default": "runc"},
            "binary": {"type": "str", "default": "sleep"},
            "work_dir": {"type": "path", "default": "/tmp"},
            "timeout": {"type": "int", "default": 300},
        },
        supports_check_mode=True,
    )
    params = module.params
    result = {"changed": False, "commands": []}
    if not params["expected_gpus"]:
        module.fail_json(msg="expected_gpus is empty: read the node's GPUs with nvidia_smi_facts first", **result)
    if params["timeout"] < 1:
        module.fail_json(msg="timeout must be at least 1", **result)
    checks = _engine(module, params, result) if params["mode"] == "engine" else _bundle(module, params, result)
    result["checks"] = checks
    result["verdict"] = overall_status(checks)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
