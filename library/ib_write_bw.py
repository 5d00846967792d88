#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: run one side of a perftest ib_write_bw pair and judge the bandwidth."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ib_write_bw
short_description: Measure RDMA write bandwidth between two nodes with perftest ib_write_bw
description:
  - Runs one side of a perftest bandwidth test. Without O(server) it is the server (it waits for one
    client, then exits, as perftest does); with O(server) it is the client that connects to it.
  - Parses the result table and returns it with a verdict - C(PASS) when the average bandwidth reaches
    O(min_fraction) of the link's line rate (or O(min_mib_per_s)), else C(FAIL) with a remedy.
  - The threshold source is IBM Redpaper REDP-5610 - at least 11,000 MB/sec for one
    point-to-point EDR (100 Gb/s) link on a DGX-1, where it measured 11,264 MB/sec. 11,000 MB/sec is
    0.923 of EDR's 11,921 MB/sec (perftest MB = 2^20 bytes), so O(min_mib_per_s=11000) reproduces that
    check exactly; the default O(min_fraction=0.9) accepts 10,729 MB/sec on EDR, leaving room for
    servers without the DGX-1's PCIe layout.
  - C(-F) is always passed so that a CPU frequency mismatch only warns (older perftest aborts on it).
  - The process runs under coreutils C(timeout), which kills its whole process group, so a server
    whose client never comes or a hung client never stays behind.
  - In check mode nothing is run; the command line is returned.
options:
  device:
    description: RDMA device (perftest C(-d)), for example C(mlx5_0).
    type: str
    required: true
  port:
    description: Port of the device (perftest C(-i)).
    type: int
    default: 1
  tcp_port:
    description: TCP port the server listens on for the handshake (perftest C(-p)).
    type: int
    default: 18515
  server:
    description: Server to connect to; omit to run as the server.
    type: str
  duration:
    description: Seconds to run (perftest C(-D)); 0 runs perftest's fixed iteration count instead.
    type: int
    default: 5
  size:
    description: Message size in bytes (perftest C(-s)).
    type: int
    default: 65536
  qps:
    description: Number of queue pairs (perftest C(-q)).
    type: int
    default: 1
  report_gbits:
    description: Report in Gb/sec (C(--report_gbits)) instead of MB/sec. The verdict works in both.
    type: bool
    default: false
  use_cuda:
    description: GPU index for GPUDirect RDMA (C(--use_cuda=N)); needs nvidia-peermem loaded.
    type: int
  line_rate_gbit_per_s:
    description:
      - Link rate the result is judged against (100 for 4X EDR, 200 HDR, 400 NDR; 100 for 100 GbE RoCE).
      - When omitted, the rate C(ibstat DEVICE PORT) reports is used, which judges the link against
        itself; pass the designed rate to also catch a link that trained at a lower speed.
    type: float
  min_fraction:
    description: Share of the line rate the average bandwidth must reach.
    type: float
    default: 0.9
  min_mib_per_s:
    description:
      - Absolute threshold in MB/sec (2^20 bytes); overrides O(min_fraction).
      - 11000 is IBM Redpaper REDP-5610's figure for one EDR link.
    type: float
  timeout:
    description:
      - Seconds before the run is killed. Default - O(duration) + 120 for a server (it waits for the
        client), O(duration) + 60 for a client.
    type: int
  executable:
    description: perftest binary; ib_read_bw and ib_send_bw print the same table.
    type: str
    default: ib_write_bw
  fail_on_verdict:
    description: Fail the task when the verdict is C(FAIL). When false the verdict is only reported.
    type: bool
    default: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuforge.cluster.common
attributes:
  check_mode:
    support: partial
    details: Checks the tool and returns the command it would run; the benchmark is not run, so no verdict is returned.
  diff_mode:
    support: none
notes:
  - Supports check mode (nothing is run).
  - In the gpuforge lab the tool is a simulator that moves real data over TCP and reports
    min(measured TCP throughput, simulated line rate); see lab/sim/gpuforge_sim/ib_write_bw.py.
"""

EXAMPLES = r"""
# A pair: start the server in the background on one node, run the client on its peer, then collect
# the server. The server exits by itself after one client (or is killed by its timeout).
- name: Start ib_write_bw server on node A
  gpuforge.cluster.ib_write_bw:
    device: mlx5_0
    duration: 5
    fail_on_verdict: false
  async: 180
  poll: 0
  register: ib_server
  delegate_to: node-a

- name: Run ib_write_bw client on node B against node A
  gpuforge.cluster.ib_write_bw:
    device: mlx5_0
    server: node-a
    duration: 5
    line_rate_gbit_per_s: 100
  register: ib_client
  delegate_to: node-b

- name: Collect the server side
  ansible.builtin.async_status:
    jid: "{{ ib_server.ansible_job_id }}"
  register: ib_server_result
  until: ib_server_result.finished
  retries: 60
  delay: 2
  delegate_to: node-a

- name: IBM Redpaper REDP-5610's exact EDR check (at least 11,000 MB/sec)
  gpuforge.cluster.ib_write_bw:
    device: mlx5_1
    server: dgx02
    min_mib_per_s: 11000
"""

RETURN = r"""
cmd:
  description: The command run (without the timeout wrapper).
  returned: always
  type: list
  elements: str
  sample: [ib_write_bw, -d, mlx5_0, -i, "1", -p, "18515", -D, "5", -s, "65536", -q, "1", -F, node-a]
role:
  description: C(server) or C(client).
  returned: always
  type: str
rc:
  description: Exit status of the tool (124 or 137 when the timeout killed it).
  returned: when run
  type: int
stdout:
  description: Output of the tool.
  returned: when run
  type: str
stderr:
  description: Error output of the tool.
  returned: when run
  type: str
result:
  description:
    - Parsed output (docs/parsers-infiniband.md, perftest-bw) - test, header (device, link_type,
      transport_type, mtu, num_qps, ...), local_addresses, remote_addresses, bw_unit, results (rows),
      bytes, iterations, bw_peak, bw_average, msg_rate_mpps, bw_average_mib_per_s, bw_average_gbit_per_s,
      warnings, errors.
  returned: when run
  type: dict
verdict:
  description: Judgement of the run; null in check mode.
  returned: always
  type: dict
  contains:
    status:
      description: C(PASS) or C(FAIL).
      type: str
    observed:
      description: Average bandwidth in MB/sec (null when the run produced no result).
      type: float
    expected:
      description: Threshold in MB/sec.
      type: float
    observed_gbit_per_s:
      description: Average bandwidth in Gb/s.
      type: float
    line_rate_gbit_per_s:
      description: Line rate the threshold was derived from.
      type: float
    remedy:
      description: What to check when the status is C(FAIL); empty when C(PASS).
      type: str
  sample:
    status: PASS
    observed: 11264.11
    expected: 10728.84
    observed_gbit_per_s: 94.49
    line_rate_gbit_per_s: 100
    remedy: ""
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import FAIL, PASS
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_perftest import (
    ParseError,
    mib_per_s_to_gbit_per_s,
    parse_perftest_bw,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import Tool, ToolNotRun

MIB_PER_S_PER_GBIT_PER_S = 1e9 / 8 / 0x100000  # perftest MB/sec in one Gb/s


def expected_mib_per_s(
    line_rate_gbit_per_s: float | None, min_fraction: float, min_mib_per_s: float | None
) -> float | None:
    if min_mib_per_s is not None:
        return float(min_mib_per_s)
    if line_rate_gbit_per_s is None:
        return None
    return round(line_rate_gbit_per_s * min_fraction * MIB_PER_S_PER_GBIT_PER_S, 2)


class IbWriteBw:
    def __init__(self, module: AnsibleModule):
        self.module = module
        self.params = module.params
        self.result: dict = {"changed": False, "verdict": None}

    def fail(self, msg: str) -> None:
        self.module.fail_json(msg=msg, **self.result)

    def command(self, binary: str) -> list[str]:
        params = self.params
        cmd = [binary, "-d", params["device"], "-i", str(params["port"]), "-p", str(params["tcp_port"])]
        if params["duration"]:
            cmd += ["-D", str(params["duration"])]
        cmd += ["-s", str(params["size"]), "-q", str(params["qps"]), "-F"]
        if params["report_gbits"]:
            cmd.append("--report_gbits")
        if params["use_cuda"] is not None:
            cmd.append(f"--use_cuda={params['use_cuda']}")
        if params["server"]:
            cmd.append(params["server"])
        return cmd

    def timeout(self) -> int:
        if self.params["timeout"] is not None:
            return self.params["timeout"]
        return (self.params["duration"] or 30) + (60 if self.params["server"] else 120)

    def port_rate(self) -> float | None:
        """The port's rate as ibstat reports it (used when line_rate_gbit_per_s is not given)."""
        ibstat = Tool(self.module, "ibstat", "install infiniband-diags, or set line_rate_gbit_per_s", on_error="raise")
        if not ibstat.find():
            return None
        try:
            rc, out, _err = ibstat.run([self.params["device"], self.params["port"]])
        except ToolNotRun:
            return None
        for line in out.splitlines() if rc == 0 else []:
            key, _sep, value = line.strip().partition(":")
            if key == "Rate":
                try:
                    return float(value.split()[0])
                except (ValueError, IndexError):
                    return None
        return None

    def judge(self, parsed: dict | None, rc: int, timed_out: bool, line_rate: float | None) -> dict:
        params = self.params
        expected = expected_mib_per_s(line_rate, params["min_fraction"], params["min_mib_per_s"])
        observed = parsed.get("bw_average_mib_per_s") if parsed else None
        verdict = {
            "status": FAIL,
            "observed": observed,
            "expected": expected,
            "observed_gbit_per_s": round(mib_per_s_to_gbit_per_s(observed), 2) if observed is not None else None,
            "line_rate_gbit_per_s": line_rate,
            "remedy": "",
        }
        errors = parsed["errors"] if parsed else []
        where = f"{params['device']} port {params['port']}"
        if timed_out:
            peer = f"the server on {params['server']}" if params["server"] else "a client"
            verdict["remedy"] = (
                f"{params['executable']} did not finish within {self.timeout()} s: is {peer} running and "
                f"reachable on TCP port {params['tcp_port']} (firewall)?"
            )
        elif any("state is" in error for error in errors):
            verdict["remedy"] = (
                f"{where} is not Active ({errors[0].strip()}): check the cable and switch port, and that a "
                "subnet manager runs on the fabric (ibstat shows Initializing without one)"
            )
        elif observed is None:
            detail = "; ".join(errors) or f"no result table (rc={rc})"
            verdict["remedy"] = f"the run produced no bandwidth: {detail}"
        elif expected is None:
            verdict["remedy"] = "no threshold: pass line_rate_gbit_per_s or min_mib_per_s (ibstat was not available)"
        elif observed >= expected:
            verdict["status"] = PASS
        else:
            verdict["remedy"] = (
                f"{observed:.2f} MB/sec is below {expected:.2f} MB/sec on {where}: check the port rate and "
                "width (ibstat Rate, ibstatus), the HCA's PCIe slot width, firmware, and the CPU frequency "
                "governor; test the same pair through one switch to rule out the fabric"
            )
        return verdict

    def run(self) -> None:
        params = self.params
        for name in ("duration", "size", "qps", "port", "tcp_port"):
            if params[name] < (0 if name == "duration" else 1):
                self.fail(f"{name} must be positive, got {params[name]}")
        if not 0 < params["min_fraction"] <= 1:
            self.fail(f"min_fraction must be in (0, 1], got {params['min_fraction']}")
        if params["timeout"] is not None and params["timeout"] < 1:
            self.fail(f"timeout must be at least 1 second, got {params['timeout']}")
        perftest = Tool(self.module, params["executable"], "install the perftest package", result=self.result)
        binary = perftest.find()
        self.result["role"] = "client" if params["server"] else "server"
        self.result["cmd"] = self.command(binary or params["executable"])
        if not binary:
            self.fail(perftest.missing())
        if self.module.check_mode:
            self.module.exit_json(**self.result)
        line_rate = params["line_rate_gbit_per_s"] if params["line_rate_gbit_per_s"] is not None else self.port_rate()
        # timeout(1) puts the tool in its own process group and kills the group, so nothing lingers.
        rc, out, err, timed_out = perftest.run_bounded(self.result["cmd"][1:], self.timeout())
        self.result.update(rc=rc, stdout=out, stderr=err)
        parsed = None
        try:
            parsed = parse_perftest_bw(out + "\n" + err)
        except ParseError as exc:
            if not timed_out:
                self.fail(f"could not read {params['executable']} output (rc={rc}): {exc}")
        self.result["result"] = parsed
        self.result["verdict"] = self.judge(parsed, rc, timed_out, line_rate)
        if params["fail_on_verdict"] and self.result["verdict"]["status"] != PASS:
            self.fail(f"{params['executable']} verdict fail: {self.result['verdict']['remedy']}")
        self.module.exit_json(**self.result)


def main():
    module = AnsibleModule(
        argument_spec={
            "device": {"type": "str", "required": True},
            "port": {"type": "int", "default": 1},
            "tcp_port": {"type": "int", "default": 18515},
            "server": {"type": "str"},
            "duration": {"type": "int", "default": 5},
            "size": {"type": "int", "default": 65536},
            "qps": {"type": "int", "default": 1},
            "report_gbits": {"type": "bool", "default": False},
            "use_cuda": {"type": "int"},
            "line_rate_gbit_per_s": {"type": "float"},
            "min_fraction": {"type": "float", "default": 0.9},
            "min_mib_per_s": {"type": "float"},
            "timeout": {"type": "int"},
            "executable": {"type": "str", "default": "ib_write_bw"},
            "fail_on_verdict": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    IbWriteBw(module).run()


if __name__ == "__main__":
    main()
