#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: GPUDirect RDMA bandwidth of each HCA port with an ib_write_bw loopback from GPU memory."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gdr_loopback_bw
short_description: Measure GPUDirect RDMA per HCA port with an ib_write_bw loopback from GPU memory and judge it
description:
  - For each port to measure, starts a perftest C(ib_write_bw) server and then a client on this node, on the same
    HCA and port, both with C(--use_cuda=<gpu>) (GPU memory registered for RDMA) and the client connecting to
    O(address) (the node itself), as Azure/azurehpc-health-checks customTests/azure_ib_write_bw_gdr.nhc does
    (C(-s 8388608 -F --report_gbits), C(numactl -N <numa> -m <numa>)). Ports run one after another.
  - Ports - the InfiniBand ports of O(system) (the link layer of each port's link in O(link_speeds)), the compute
    fabric GPUDirect RDMA serves; Ethernet (storage, RoCE) ports only when listed in O(extra_ports).
  - GPU - of the GPUs O(system)'s numa_affinity puts with the HCA, the closest by C(nvidia-smi topo -m) (O(gpus)
    nics codes PIX, PXB, PHB, NODE), spreading the HCAs over them. C(CUDA_DEVICE_ORDER=PCI_BUS_ID) makes CUDA
    device N nvidia-smi's GPU N.
  - Judges the client's average bandwidth against O(thresholds) for the port's link (min_gbit_per_s or
    min_mib_per_s), or O(min_fraction) of the link's line rate when the link has no entry. Returns the
    C(gdr_ib_write_bw) check of the gpu_node_check result contract; a port below its minimum or without a result
    fails, named with the HCA, port, the GPU's bus ID and NUMA node, with a remedy.
  - Not applicable when O(system) has C(peermem=false) (it runs no GPUDirect RDMA) or no port to measure - the
    module then returns C(applicable=false) and no check, and runs nothing.
  - Every run is under coreutils C(timeout) (its process group is killed), with C(LC_ALL=C).
options:
  system:
    description: The node's expected system (an entry of gpuforge_expected_systems - hcas, numa_affinity, peermem).
    type: dict
    required: true
  link_speeds:
    description: Link name to C(rate_gbps) and C(link_layer) (gpuforge_expected_link_speeds).
    type: dict
    required: true
  thresholds:
    description:
      - Per link name, one of C(min_gbit_per_s) (Gb/s, 10^9 bit) or C(min_mib_per_s) (2^20 bytes, ib_write_bw's
        MB/sec) - gpuforge_expected_ib_write_bw.
    type: dict
    default: {}
  min_fraction:
    description: Share of the line rate a port must reach when its link has no entry in O(thresholds).
    type: float
    default: 0.9
  extra_ports:
    description: Ethernet ports of O(system) to measure as well, as C(<hca>/<port>) (for example C(mlx5_8/1)).
    type: list
    elements: str
    default: []
  gpus:
    description: C(ansible_facts.nvidia_smi.gpus) (index, bus_id, nics) - to name GPUs by bus ID and pick the closest.
    type: list
    elements: dict
    default: []
  node_checks:
    description:
      - The checks of this node's gpu_node_check result. A port that fails because of a check that failed there
        (port not Active, HCA absent, wrong rate, PCIe link, ACS, nvidia-peermem) is recorded with C(caused_by).
    type: list
    elements: dict
    default: []
  size:
    description: Message size in bytes (C(-s)); 8 MiB as Azure's check.
    type: int
    default: 8388608
  iterations:
    description: Iterations (C(-n)); perftest's default for bandwidth tests. Ignored when O(duration) is set.
    type: int
    default: 5000
  duration:
    description: Seconds to run (C(-D)) instead of a number of iterations.
    type: int
  warm_up:
    description: Pass C(--perform_warm_up) as Azure's check does (perftest 4.5 and later).
    type: bool
    default: false
  dmabuf:
    description: Register GPU memory with dma-buf (C(--use_cuda_dmabuf)) instead of through nvidia-peermem.
    type: bool
    default: false
  gid_index:
    description: GID index (C(-x)) for Ethernet (RoCE) ports; InfiniBand ports take none.
    type: int
  numactl:
    description: Run both ends under C(numactl -N <numa> -m <numa>) when numactl is installed.
    type: bool
    default: true
  address:
    description: Address the client connects to for the TCP handshake (this node).
    type: str
    default: 127.0.0.1
  tcp_port:
    description: TCP port of the first port's run (C(-p)); the Nth port measured uses O(tcp_port) + N.
    type: int
    default: 18510
  timeout:
    description: Seconds before one run (server or client) is stopped.
    type: int
    default: 120
  startup_timeout:
    description: Seconds to wait for the server to listen on its TCP port before the client starts.
    type: int
    default: 15
  executable:
    description: perftest ib_write_bw command name or path.
    type: str
    default: ib_write_bw
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: In check mode nothing is run; the module plans the ports, finds the tools and returns the commands.
  diff_mode:
    support: none
  platform:
    platforms: posix
author:
  - gpuforge maintainers (@gpuforge)
notes:
  - The server is found listening by reading C(/proc/net/tcp) and C(/proc/net/tcp6) (Linux); where they cannot be
    read the client starts after O(startup_timeout) or when the server has ended.
  - In the gpuforge lab, ib_write_bw is a simulator that moves real bytes over TCP
    (lab/sim/gpuforge_sim/ib_write_bw.py).
"""

EXAMPLES = r"""
- name: GPUDirect RDMA loopback per InfiniBand port
  gpuforge.cluster.gdr_loopback_bw:
    system: "{{ gpuforge_expected_systems['dgx-h100-ndr'] }}"
    link_speeds: "{{ gpuforge_expected_link_speeds }}"
    thresholds: "{{ gpuforge_expected_ib_write_bw }}"
    gpus: "{{ ansible_facts.nvidia_smi.gpus }}"
    node_checks: "{{ gpuforge_node_check.checks }}"
"""

RETURN = r"""
applicable:
  description: False when the expected system runs no GPUDirect RDMA or has no port to measure (see reason).
  returned: always
  type: bool
reason:
  description: Why the check does not apply; null when it does.
  returned: always
  type: str
ran:
  description: Whether ib_write_bw ran (false in check mode and when not applicable).
  returned: always
  type: bool
healthy:
  description: False when the check failed; true when it was not run.
  returned: always
  type: bool
plan:
  description: The ports to measure (key, hca, port, link, link_layer, rate_gbps, gpu, bus_id, numa, topo).
  returned: always
  type: list
  elements: dict
unplanned:
  description: Ports the module could not give a NUMA-local GPU ({key, why}).
  returned: always
  type: list
  elements: dict
cmds:
  description: Per port key, the server and client command lines (without the timeout wrapper).
  returned: always
  type: dict
check:
  description:
    - The C(gdr_ib_write_bw) check (name, status, observed, expected, fault, remedy, caused_by). observed holds
      ports ({key - hca, port, link, gpu, bus_id, numa, topo, status ok/low/error, gbit_per_s, mib_per_s, min,
      error_kind, error, remedy}), low, errors and unplanned.
  returned: when ran
  type: dict
"""

import threading
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import OptionError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_gdr import (
    MESSAGE_SIZE,
    check_thresholds,
    judge_gdr,
    listening_ports,
    plan_ports,
    port_result,
    threshold_for,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import (
    KILL_AFTER_S,
    TIMED_OUT_RCS,
    find_tool,
    run_bounded,
    this_host,
)

FIX = "install perftest built with CUDA (NVIDIA's perftest package of MLNX_OFED/DOCA, or perftest from source)"
ENVIRON = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
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


class Loopback:
    def __init__(self, module: AnsibleModule):
        self.module = module
        self.params = module.params
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

    def run(self) -> None:
        params = self.params
        thresholds, plan = self.options()
        self.result.update(
            applicable=plan["applicable"], reason=plan["reason"], plan=plan["ports"], unplanned=plan["unplanned"]
        )
        if not plan["applicable"]:
            self.module.exit_json(msg=f"gdr_ib_write_bw does not apply: {plan['reason']}", **self.result)
        numactl = self.module.get_bin_path("numactl") if params["numactl"] else None
        binary = find_tool(self.module, params["executable"], FIX, result=self.result)
        for n, port in enumerate(plan["ports"]):
            tcp_port = params["tcp_port"] + n
            self.result["cmds"][port["key"]] = {
                "server": self.command(binary, numactl, port, tcp_port, client=False),
                "client": self.command(binary, numactl, port, tcp_port, client=True),
            }
        if self.module.check_mode or not plan["ports"]:
            ran = {"msg": "check mode: ib_write_bw was not run"} if self.module.check_mode else {}
            if not self.module.check_mode:
                self.result["check"] = judge_gdr({}, plan["unplanned"], params["node_checks"])
                self.result["healthy"] = self.result["check"]["status"] != "fail"
            self.module.exit_json(**ran, **self.result)
        timeout = find_tool(self.module, "timeout", "install coreutils", result=self.result)
        records = {}
        for n, port in enumerate(plan["ports"]):
            threshold = threshold_for(port["link"], port["rate_gbps"], thresholds, params["min_fraction"])
            client, server = self.loopback(timeout, port["key"], params["tcp_port"] + n)
            records[port["key"]] = port_result(port, threshold, client, server)
        check = judge_gdr(records, plan["unplanned"], params["node_checks"])
        self.result.update(ran=True, check=check, healthy=check["status"] != "fail")
        self.module.exit_json(**self.result)

    def loopback(self, timeout: str, key: str, tcp_port: int):
        """Start the server in a thread, wait for it to listen, run the client, collect the server."""
        params = self.params
        cmds = self.result["cmds"][key]
        wrapped = [timeout, f"--kill-after={KILL_AFTER_S}", str(params["timeout"] + params["startup_timeout"])]
        handles, server = [], {}

        def serve():
            try:
                rc, out, err = self.module.run_command(
                    [*wrapped, *cmds["server"]],
                    environ_update={"LC_ALL": "C", **ENVIRON},
                    before_communicate_callback=handles.append,
                    handle_exceptions=False,  # fail_json from this thread would print a result and exit the thread
                )
                server.update(rc=rc, out=out or "", err=err or "", timed_out=rc in TIMED_OUT_RCS)
            except OSError as exc:  # the record names the error instead of the thread dying silently
                server.update(rc=None, out="", err=f"could not start the server: {exc}", timed_out=False)

        thread = threading.Thread(target=serve, name=f"ib_write_bw server {key}", daemon=True)
        thread.start()
        deadline = time.monotonic() + params["startup_timeout"]
        while thread.is_alive() and time.monotonic() < deadline:
            if listening(tcp_port):
                break
            time.sleep(POLL_S)
        if not thread.is_alive() and server.get("rc") != 0:
            # The server ended before the client ran (GPU memory not registered, port down, no such device).
            return {"rc": None, "out": "", "err": "", "timed_out": False}, server
        rc, out, err, timed_out = run_bounded(
            self.module, cmds["client"], params["timeout"], environ=ENVIRON, fix=FIX, result=self.result
        )
        client = {"rc": rc, "out": out, "err": err, "timed_out": timed_out}
        thread.join(params["timeout"] + params["startup_timeout"] + KILL_AFTER_S if rc == 0 else SERVER_GRACE_S)
        if thread.is_alive():
            for handle in handles:  # coreutils timeout passes the TERM on to the server's process group
                if handle.poll() is None:
                    handle.terminate()
            thread.join(KILL_AFTER_S + 5)
        if thread.is_alive():
            self.fail(
                f"the ib_write_bw server for {key} on {this_host()} did not stop: end it by hand "
                f"(ss -ltnp sport = :{tcp_port} names its process)"
            )
        return client, server


def main():
    module = AnsibleModule(
        argument_spec={
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
        },
        supports_check_mode=True,
    )
    Loopback(module).run()


if __name__ == "__main__":
    main()
