"""Reading a node's RDMA adapters with ibstat, ibv_devinfo, ibdev2netdev and ofed_info: the runs, merges and
fallbacks of infiniband_facts, shared with gpu_node_check (which reads them itself with gather: true, one module
run per node instead of two).

Runs through gpuforge_run.Tool over an AnsibleModule-like object; parsing is gpuforge_infiniband's pure functions.
"""

from __future__ import annotations

import time

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_infiniband import (
    ParseError,
    parse_ibdev2netdev,
    parse_ibstat,
    parse_ibv_devinfo,
    parse_ofed_info_release,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import Tool, ToolNotRun, this_host

__all__ = ["INSTALL_HINT", "InfinibandReadError", "InfinibandReader", "unavailable"]

PORT_KEYS = (
    "port",
    "state",
    "state_code",
    "phys_state",
    "phys_state_code",
    "rate_gbit_per_s",
    "width",
    "speed",
    "link_layer",
    "lid",
    "sm_lid",
    "lmc",
    "port_guid",
    "capability_mask",
    "active_mtu",
    "max_mtu",
    "netdev",
    "netdev_state",
)
HCA_KEYS = ("name", "ca_type", "fw_ver", "hw_ver", "node_guid", "sys_image_guid", "num_ports", "board_id")
# Keys ibv_devinfo -v adds to an ibstat port, and to an ibstat CA.
DEVINFO_PORT_KEYS = ("width", "speed", "active_mtu", "max_mtu")
DEVINFO_HCA_KEYS = ("board_id", "vendor_part_id")
# Seconds between two reads while waiting for Active ports.
WAIT_INTERVAL_S = 2
INSTALL_HINT = "install the infiniband-diags package (ibstat; ibverbs-utils / libibverbs-utils for ibv_devinfo)"
MISSING_MSG = (
    "Neither ibstat nor ibv_devinfo is installed on {host}: " + INSTALL_HINT + ", or set fail_on_missing: false"
)


class InfinibandReadError(Exception):
    """A tool that must be read could not be: its message names the tool, the host and the fix; `output` holds
    the tool's stdout and stderr when it ran."""

    def __init__(self, message: str, **output):
        super().__init__(message)
        self.output = output


class InfinibandReader:
    """Reads a node's RDMA adapters: facts() returns what infiniband_facts returns. `module` answers get_bin_path
    and run_command (an AnsibleModule); `options` holds fail_on_missing and devinfo (infiniband_facts' options of
    those names). A primary tool that fails, cannot be read or is missing (with fail_on_missing) raises
    InfinibandReadError; the caller fails with it or records it."""

    def __init__(self, module, options: dict):
        self.module = module
        self.params = options
        self.errors: list[str] = []

    def run(self, path: str, args: list[str]) -> tuple[int, str, str]:
        """Run it (gpuforge_run.Tool); a tool that cannot be started raises, naming it, the host and the fix."""
        try:
            rc, out, err = Tool(self.module, path, INSTALL_HINT, on_error="raise").run(args)
        except ToolNotRun as exc:
            raise InfinibandReadError(str(exc)) from exc
        return rc, out or "", err or ""

    def read(self, name: str, args: list[str], parser, ok_rcs=(0,), optional=False) -> dict | None:
        """Run one tool and parse it; None when it is not installed.

        A failing or unreadable primary tool raises InfinibandReadError; an optional one (extra detail only)
        is noted in `errors` and skipped.
        """
        path = self.module.get_bin_path(name)
        if not path:
            return None
        rc, out, err = self.run(path, args)
        problem = None
        if rc not in ok_rcs:
            problem = f"{' '.join([name, *args])} failed (rc={rc}): {err.strip() or out.strip()}"
        else:
            try:
                result = parser(out + err)
            except ParseError as exc:
                problem = f"could not read {name} output: {exc}"
        if problem and optional:
            self.errors.append(problem)
            return None
        if problem:
            raise InfinibandReadError(problem, stdout=out, stderr=err)
        self.errors.extend(f"{name}: {message}" for message in result["errors"])
        return result

    @staticmethod
    def normalise(hca: dict) -> dict:
        entry = {key: hca.get(key) for key in HCA_KEYS}
        entry["vendor_part_id"] = hca.get("vendor_part_id")
        entry["ports"] = [{key: port.get(key) for key in PORT_KEYS} for port in hca.get("ports", [])]
        return entry

    @staticmethod
    def merge_devinfo(hcas: list[dict], devinfo: dict) -> None:
        by_name = {hca["name"]: hca for hca in devinfo["cas"]}
        for hca in hcas:
            extra = by_name.get(hca["name"])
            if not extra:
                continue
            for key in DEVINFO_HCA_KEYS:
                hca[key] = hca.get(key) or extra.get(key)
            extra_ports = {port["port"]: port for port in extra["ports"]}
            for port in hca["ports"]:
                for key in DEVINFO_PORT_KEYS:
                    if port.get(key) is None:
                        port[key] = extra_ports.get(port["port"], {}).get(key)

    @staticmethod
    def merge_netdevs(hcas: list[dict], mappings: list[dict]) -> None:
        netdevs = {(m["ca"], m["port"]): m for m in mappings}
        for hca in hcas:
            for port in hca["ports"]:
                mapping = netdevs.get((hca["name"], port["port"]))
                if mapping:
                    port["netdev"], port["netdev_state"] = mapping["netdev"], mapping["netdev_state"]

    def ofed_release(self) -> str | None:
        """`ofed_info -s` when OFED is installed (inbox rdma-core has no ofed_info); a failure is an error entry."""
        path = self.module.get_bin_path("ofed_info")
        if not path:
            return None
        rc, out, err = self.run(path, ["-s"])
        if rc != 0:
            self.errors.append(f"ofed_info -s failed (rc={rc}): {(err or out).strip()[:200]}")
            return None
        try:
            return parse_ofed_info_release(out)
        except ParseError as exc:
            self.errors.append(str(exc))
            return None

    def gather(self) -> dict:
        params = self.params
        # ibstat exits 255 after an ibpanic but has printed every CA before it: keep those.
        ibstat = self.read("ibstat", [], parse_ibstat, ok_rcs=(0, 255))
        devinfo = None
        if params["devinfo"] or ibstat is None:
            optional = ibstat is not None
            devinfo = self.read("ibv_devinfo", ["-v"], parse_ibv_devinfo, ok_rcs=(0, 255), optional=optional)
        if ibstat is None and devinfo is None:
            if params["fail_on_missing"]:
                raise InfinibandReadError(MISSING_MSG.format(host=this_host()))
            return {"available": False, "source": None, "hcas": [], "active_ports": [], "inactive_ports": []}
        source = ibstat or devinfo
        hcas = [self.normalise(hca) for hca in source["cas"]]
        if ibstat is None:
            for hca in hcas:  # ibstat's CA type is MT<vendor_part_id> on Mellanox/NVIDIA adapters
                hca["ca_type"] = f"MT{hca['vendor_part_id']}" if hca.get("vendor_part_id") else None
        elif devinfo is not None:
            self.merge_devinfo(hcas, devinfo)
        mapping = self.read("ibdev2netdev", [], parse_ibdev2netdev, optional=True)
        if mapping is not None:
            self.merge_netdevs(hcas, mapping["mappings"])
        ports = [(hca["name"], port) for hca in hcas for port in hca["ports"]]
        return {
            "available": True,
            "source": "ibstat" if ibstat is not None else "ibv_devinfo",
            "hcas": hcas,
            "active_ports": [f"{name}/{port['port']}" for name, port in ports if port["state"] == "Active"],
            "inactive_ports": [f"{name}/{port['port']}" for name, port in ports if port["state"] != "Active"],
        }

    def gather_waiting(self, wanted: int = 0, timeout: float = 0) -> dict:
        """gather(), repeated every WAIT_INTERVAL_S while fewer than `wanted` ports are Active, for `timeout`
        seconds at most; the last read, with the seconds waited."""
        started = time.monotonic()
        reads = 0
        while True:
            self.errors = []
            facts = self.gather()
            reads += 1
            elapsed = time.monotonic() - started
            if len(facts["active_ports"]) >= wanted or not facts["available"] or elapsed >= timeout:
                facts["waited_s"] = round(elapsed, 1) if reads > 1 else 0
                return facts
            time.sleep(min(WAIT_INTERVAL_S, timeout - elapsed))

    def facts(self, wanted: int = 0, timeout: float = 0) -> dict:
        """ansible_facts.infiniband: the adapters (gather_waiting), the OFED release and the tools' errors."""
        facts = self.gather_waiting(wanted, timeout)
        facts["ofed_release"] = self.ofed_release()
        facts["errors"] = self.errors
        return facts


def unavailable(error: str) -> dict:
    """The facts of a node whose adapters could not be read, `error` saying why (gpu_node_check's gather)."""
    return {
        "available": False,
        "source": None,
        "hcas": [],
        "active_ports": [],
        "inactive_ports": [],
        "waited_s": 0,
        "ofed_release": None,
        "errors": [error],
    }
