"""Running a node's diagnostics - the DCGM diagnostic (dcgmi diag), nvbandwidth's host<->GPU copies and the
GPUDirect RDMA ib_write_bw loopback per HCA port - and judging them: the runs of the dcgm_diag, nvbandwidth and
gdr_loopback_bw modules, shared with gpu_node_check (which runs them after its own checks with O(diagnostics): one
module run per node instead of four in validate.yml).

Each runner takes an AnsibleModule-like object (params are passed apart: gpu_node_check validates each
diagnostic's options against the same argument spec its module uses) and returns the module's result. A failure
that leaves nothing to judge (the tool missing, a timeout, unreadable output, a bad option) fails the module with a
message naming the host and the fix, as the standalone module does. Parsing and judging are the pure functions of
gpuforge_dcgm, gpuforge_nvbandwidth and gpuforge_gdr.
"""

from __future__ import annotations

import time

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import FAIL
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_dcgm import judge_diag, parse_diag
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import OptionError, ParseError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_gdr import (
    MESSAGE_SIZE,
    check_thresholds,
    judge_gdr,
    listening_ports,
    plan_ports,
    port_result,
    threshold_for,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_nvbandwidth import (
    TESTCASES,
    judge_bandwidth,
    parse_output,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import KILL_AFTER_S, Tool, this_host

__all__ = [
    "DCGM_ARGUMENT_SPEC",
    "GDR_ARGUMENT_SPEC",
    "NVBANDWIDTH_ARGUMENT_SPEC",
    "GdrLoopback",
    "run_dcgm",
    "run_nvbandwidth",
]

# --- DCGM diagnostic (dcgmi diag -r <level> -j) ---

DCGM_ARGUMENT_SPEC = {
    "level": {"type": "int", "default": 1, "choices": [1, 2, 3, 4]},
    "gpus": {"type": "list", "elements": "dict", "default": []},
    "allow_skip": {"type": "bool", "default": True},
    "timeout": {"type": "int", "default": 0},
    "executable": {"type": "str", "default": "dcgmi"},
}
DCGM_FIX = (
    "install DCGM from NVIDIA's CUDA repository - set nvidia_driver_dcgm_enabled: true for the "
    "gpuforge_nvidia_driver role (package datacenter-gpu-manager-4-cuda12; DCGM 3.x: datacenter-gpu-manager)"
)
NO_HOST_ENGINE = ("unable to connect to host engine", "unable to establish a connection")
# Seconds a level may run before it is stopped (timeout: 0); level 1 takes seconds, level 4 hours.
DCGM_TIMEOUTS = {1: 600, 2: 1800, 3: 3600, 4: 14400}


def run_dcgm(module, params: dict) -> dict:
    """dcgmi diag at params['level'], judged per GPU (named by bus ID from params['gpus']) and per test."""
    level = params["level"]
    dcgmi = Tool(module, params["executable"], DCGM_FIX)
    cmd = [dcgmi.require(), "diag", "-r", str(level), "-j"]
    result = dcgmi.result = {"changed": False, "ran": False, "healthy": True, "cmd": cmd}
    if module.check_mode:
        return {"msg": "check mode: the DCGM diagnostic was not run", **result}
    seconds = params["timeout"] or DCGM_TIMEOUTS[level]
    rc, out, err, timed_out = dcgmi.run_bounded(cmd[1:], seconds)
    text = f"{out}\n{err}"
    if timed_out:
        module.fail_json(
            msg=f"dcgmi diag -r {level} did not finish in {seconds} s on {this_host()}: raise timeout, or check "
            "for a hung GPU (nvidia-smi) and nv-hostengine's log (/var/log/nvidia-dcgm/nv-hostengine.log)",
            rc=rc,
            **result,
        )
    if any(marker in text.lower() for marker in NO_HOST_ENGINE):
        module.fail_json(
            msg=f"the DCGM host engine (nv-hostengine) is not running on {this_host()}: start it with "
            "'systemctl enable --now nvidia-dcgm' (the gpuforge_nvidia_driver role does with "
            "nvidia_driver_dcgm_enabled: true). dcgmi said: " + " ".join(err.split())[:200],
            rc=rc,
            **result,
        )
    try:
        parsed = parse_diag(out)
    except ParseError as exc:
        module.fail_json(
            msg=f"dcgmi diag -r {level} -j (exit {rc}) printed no readable result: {exc}. Output: "
            + " | ".join(text.strip().splitlines()[:3])[:300],
            rc=rc,
            **result,
        )
    check = judge_diag(parsed, level, params["gpus"], params["allow_skip"])
    result.update(ran=True, dcgm=parsed, check=check, healthy=check["status"] != FAIL, rc=rc)
    return result


# --- nvbandwidth (host<->GPU and GPU<->GPU copies) ---

NVBANDWIDTH_ARGUMENT_SPEC = {
    "testcases": {"type": "list", "elements": "str", "choices": sorted(TESTCASES), "default": ["h2d", "d2h"]},
    "thresholds": {"type": "dict", "required": True},
    "gpus": {"type": "list", "elements": "dict", "default": []},
    "timeout": {"type": "int", "default": 900},
    "executable": {"type": "str", "default": "nvbandwidth"},
}
NVBANDWIDTH_FIX = (
    "build nvbandwidth from github.com/NVIDIA/nvbandwidth (cmake, libboost-program-options) and install it "
    "on the PATH, or give its path in executable"
)


def nvbandwidth_minimums(module, params: dict, testcases: list) -> dict:
    """{nvbandwidth testcase name: float} for the chosen testcases; fails naming a missing or bad value."""
    given = params["thresholds"] or {}
    found = {}
    for short in testcases:
        value = given.get(short)
        if value is None:
            module.fail_json(
                msg=f"thresholds.{short} is not set: this GPU SKU has no published measured {short} bandwidth in "
                "gpuforge_expected_nvbandwidth; measure a known-good node and set it for the site "
                f"(gpuforge_expected_nvbandwidth['<sku>'].{short}, GB/s)"
            )
        try:
            number = float(value)
        except (TypeError, ValueError):
            module.fail_json(msg=f"thresholds.{short}: {value!r} is not a number of GB/s")
        if number <= 0:
            module.fail_json(msg=f"thresholds.{short}: must be > 0 GB/s")
        found[TESTCASES[short]] = number
    return found


def run_nvbandwidth(module, params: dict) -> dict:
    """nvbandwidth -t <testcases>, judged against params['thresholds'] (GB/s per testcase)."""
    testcases = list(dict.fromkeys(params["testcases"]))
    if not testcases:
        module.fail_json(msg="testcases: choose at least one of h2d, d2h, p2p")
    minimums = nvbandwidth_minimums(module, params, testcases)
    nvbandwidth = Tool(module, params["executable"], NVBANDWIDTH_FIX)
    cmd = [nvbandwidth.require(), "-t", *[TESTCASES[t] for t in testcases]]
    result = nvbandwidth.result = {"changed": False, "ran": False, "healthy": True, "cmd": cmd}
    if module.check_mode:
        return {"msg": "check mode: nvbandwidth was not run", **result}
    rc, out, err, timed_out = nvbandwidth.run_bounded(
        cmd[1:], params["timeout"], environ={"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    )
    if timed_out:
        module.fail_json(msg=f"nvbandwidth did not finish in {params['timeout']} s on {this_host()}", rc=rc, **result)
    if rc != 0:
        module.fail_json(
            msg=f"nvbandwidth exited with code {rc} on {this_host()}: "
            + " | ".join((err or out).strip().splitlines()[:3])[:300]
            + ". Check the driver (nvidia-smi) and that nvbandwidth was built for this CUDA version",
            rc=rc,
            **result,
        )
    try:
        parsed = parse_output(out)
    except ParseError as exc:
        module.fail_json(msg=f"could not read nvbandwidth output: {exc}", rc=rc, **result)
    check = judge_bandwidth(parsed, minimums, params["gpus"])
    result.update(ran=True, nvbandwidth=_json_ready(parsed), check=check, healthy=check["status"] != FAIL, rc=rc)
    return result


def _json_ready(parsed: dict) -> dict:
    """Matrix keys as strings (Ansible results are JSON)."""
    cases = {}
    for name, case in parsed["testcases"].items():
        matrix = {str(r): {str(c): v for c, v in row.items()} for r, row in case["matrix"].items()}
        cases[name] = dict(case, matrix=matrix)
    devices = {str(n): d for n, d in parsed["devices"].items()}
    return dict(parsed, testcases=cases, devices=devices)


# --- GPUDirect RDMA: ib_write_bw loopback from GPU memory per HCA port ---

GDR_ARGUMENT_SPEC = {
    "system": {"type": "dict", "required": True},
    "link_speeds": {"type": "dict", "required": True},
    "thresholds": {"type": "dict", "default": {}},
    "min_fraction": {"type": "float", "default": 0.9},
    "extra_ports": {"type": "list", "elements": "str", "default": []},
    "gpus": {"type": "list", "elements": "dict", "default": []},
    "node_checks": {"type": "list", "elements": "dict", "default": []},
    "size": {"type": "int", "default": MESSAGE_SIZE},
    "iterations": {"type": "int", "default": 5000},
    "duration": {"type": "int"},
    "warm_up": {"type": "bool", "default": False},
    "dmabuf": {"type": "bool", "default": False},
    "gid_index": {"type": "int"},
    "numactl": {"type": "bool", "default": True},
    "address": {"type": "str", "default": "127.0.0.1"},
    "tcp_port": {"type": "int", "default": 18510},
    "timeout": {"type": "int", "default": 120},
    "startup_timeout": {"type": "int", "default": 15},
    "executable": {"type": "str", "default": "ib_write_bw"},
}
GDR_FIX = "install perftest built with CUDA (NVIDIA's perftest package of MLNX_OFED/DOCA, or perftest from source)"
GDR_ENVIRON = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
PROC_TCP = ("/proc/net/tcp", "/proc/net/tcp6")
POLL_S = 0.1
# Seconds the server may take to end after a failed client before it is stopped.
SERVER_GRACE_S = 2


def listening(port: int):
    """True when something listens on TCP port `port` of this network namespace, False when not, None when
    /proc/net/tcp cannot be read."""
    texts = []
    for path in PROC_TCP:
        try:
            with open(path, encoding="ascii", errors="replace") as handle:
                texts.append(handle.read())
        except OSError:
            continue
    if not texts:
        return None
    return any(port in listening_ports(text) for text in texts)


class GdrLoopback:
    """ib_write_bw server and client on this node, same HCA port, from GPU memory; one port after the other."""

    def __init__(self, module, params: dict):
        self.module = module
        self.params = params
        self.result: dict = {
            "changed": False,
            "applicable": True,
            "reason": None,
            "ran": False,
            "healthy": True,
            "plan": [],
            "unplanned": [],
            "cmds": {},
        }

    def fail(self, msg: str) -> None:
        self.module.fail_json(msg=msg, **self.result)

    def options(self):
        params = self.params
        for name, minimum in (("size", 1), ("iterations", 1), ("timeout", 1), ("startup_timeout", 0)):
            if params[name] < minimum:
                self.fail(f"{name} must be at least {minimum}, got {params[name]}")
        if params["duration"] is not None and params["duration"] < 1:
            self.fail(f"duration must be at least 1 second, got {params['duration']}")
        if not 0 < params["min_fraction"] <= 1:
            self.fail(f"min_fraction must be in (0, 1], got {params['min_fraction']}")
        if not 1 <= params["tcp_port"] <= 65535:
            self.fail(f"tcp_port must be a TCP port (1-65535), got {params['tcp_port']}")
        try:
            thresholds = check_thresholds(params["thresholds"])
            plan = plan_ports(params["system"], params["link_speeds"], params["gpus"], params["extra_ports"])
        except OptionError as exc:
            self.fail(str(exc))
        if len(plan["ports"]) + params["tcp_port"] > 65536:
            self.fail(f"tcp_port {params['tcp_port']} leaves no TCP port for each of {len(plan['ports'])} ports")
        return thresholds, plan

    def command(self, binary: str, numactl, port: dict, tcp_port: int, client: bool) -> list:
        params = self.params
        cmd = [numactl, "-N", str(port["numa"]), "-m", str(port["numa"])] if numactl else []
        cmd += [binary, "-d", port["hca"], "-i", str(port["port"]), "-p", str(tcp_port), "-s", str(params["size"])]
        cmd += ["-D", str(params["duration"])] if params["duration"] else ["-n", str(params["iterations"])]
        cmd += ["-F", "--report_gbits", f"--use_cuda={port['gpu']}"]
        if params["dmabuf"]:
            cmd.append("--use_cuda_dmabuf")
        if params["gid_index"] is not None and port["link_layer"] == "Ethernet":
            cmd += ["-x", str(params["gid_index"])]
        if params["warm_up"]:
            cmd.append("--perform_warm_up")
        return [*cmd, params["address"]] if client else cmd

    def run(self) -> dict:
        """The module result: plan, per-port commands and, when ports were measured, the gdr_ib_write_bw check."""
        params = self.params
        thresholds, plan = self.options()
        self.result.update(
            applicable=plan["applicable"], reason=plan["reason"], plan=plan["ports"], unplanned=plan["unplanned"]
        )
        if not plan["applicable"]:
            return {"msg": f"gdr_ib_write_bw does not apply: {plan['reason']}", **self.result}
        numactl = self.module.get_bin_path("numactl") if params["numactl"] else None
        binary = Tool(self.module, params["executable"], GDR_FIX, result=self.result).require()
        for n, port in enumerate(plan["ports"]):
            tcp_port = params["tcp_port"] + n
            self.result["cmds"][port["key"]] = {
                "server": self.command(binary, numactl, port, tcp_port, client=False),
                "client": self.command(binary, numactl, port, tcp_port, client=True),
            }
        if self.module.check_mode:
            return {"msg": "check mode: ib_write_bw was not run", **self.result}
        if not plan["ports"]:
            self.result["check"] = judge_gdr({}, plan["unplanned"], params["node_checks"])
            self.result["healthy"] = self.result["check"]["status"] != FAIL
            return self.result
        records = {}
        for n, port in enumerate(plan["ports"]):
            threshold = threshold_for(port["link"], port["rate_gbit_per_s"], thresholds, params["min_fraction"])
            client, server = self.loopback(port["key"], params["tcp_port"] + n)
            records[port["key"]] = port_result(port, threshold, client, server)
        check = judge_gdr(records, plan["unplanned"], params["node_checks"])
        self.result.update(ran=True, check=check, healthy=check["status"] != FAIL)
        return self.result

    def loopback(self, key: str, tcp_port: int):
        """Start the server in the background, wait for it to listen, run the client, collect the server."""
        params = self.params
        cmds = self.result["cmds"][key]
        server_tool = Tool(self.module, cmds["server"][0], GDR_FIX, result=self.result)
        server = server_tool.start_background(
            cmds["server"][1:], params["timeout"] + params["startup_timeout"], environ=GDR_ENVIRON
        )
        deadline = time.monotonic() + params["startup_timeout"]
        while server.running() and time.monotonic() < deadline:
            if listening(tcp_port):
                break
            time.sleep(POLL_S)
        if not server.running() and server.result.rc != 0:
            # The server ended before the client ran (GPU memory not registered, port down, no such device).
            return {"rc": None, "out": "", "err": "", "timed_out": False}, server.result._asdict()
        client_tool = Tool(self.module, cmds["client"][0], GDR_FIX, result=self.result)
        client = client_tool.run_bounded(cmds["client"][1:], params["timeout"], environ=GDR_ENVIRON)._asdict()
        ended = server.wait(
            params["timeout"] + params["startup_timeout"] + KILL_AFTER_S if client["rc"] == 0 else SERVER_GRACE_S
        )
        if not ended and not server.stop(KILL_AFTER_S + 5):
            self.fail(
                f"the ib_write_bw server for {key} on {this_host()} did not stop: end it by hand "
                f"(ss -ltnp sport = :{tcp_port} names its process)"
            )
        return client, server.result._asdict()
