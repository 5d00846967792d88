"""Simulated perftest `ib_write_bw`: a server/client pair that moves real bytes over TCP.

    server:  ib_write_bw -d mlx5_0 [-i ib_port] [-p tcp_port] [--report_gbits] [-D secs] [-s size]
                         [-n iters] [-q qps] [-F] [-R] [-x gid_index] [--use_cuda=N [--use_cuda_dmabuf]]
    client:  ib_write_bw -d mlx5_0 [same options] SERVER_HOST

What the number means (read this before trusting it): there is no RDMA here. After a JSON
handshake the client streams real data over one TCP connection (whatever `-q` says) and the
server times it from the first byte to end of stream. The bandwidth printed is
min(measured TCP throughput, simulated line rate), where the line rate is the lower of the two
ports' `rate_gbit_per_s` after faults (an `ib_port_rate` fault of 56 caps the run at 56 Gb/s). When the
cap applies, the duration-mode iteration count and the message rate are derived from the capped
rate so that the row stays self-consistent. A lab network slower than the simulated link shows up
as a low result, as a slow fabric would.

Faithful to perftest: the print layout (header, address lines, `REPORT_FMT` result row, 87-dash
result lines), MB/sec = 2^20 bytes/s and Gb/sec = 10^9 bit/s, iterations x QPs in iteration mode,
peak 0.00 in duration mode (-D), the error text and exit status 1 for a port that is not Active
(` Port number 1 state is Down`), the server exiting after one run, and the CPU-frequency warning
when /proc/cpuinfo lists differing clocks and -F is absent. `-p` is the TCP port (default 18515)
and `-i` the IB port (default 1), as in perftest.

GPU memory (`--use_cuda=N`, `--use_cuda_dmabuf`): after perftest's CUDA lines, registering the GPU buffer for
RDMA fails as perftest reports it (`Couldn't allocate MR`, `failed to create mr`, `Failed to create MR`,
` Couldn't create IB resources` on stderr, exit status 1; linux-rdma/perftest issues #31 "Couldn't allocate MR
errors on latest WITH_CUDA perftest" and #126) when a `gdr_unavailable` fault names the HCA (or names none), or
when neither nvidia_peermem nor nv_peer_mem is in the simulated kernel's module table and `--use_cuda_dmabuf` is
not given. Both ends fail at once here (perftest's server may first wait for its client). A `gdr_slow` fault
caps a GPU-memory run on its HCA (and port) at `fraction` of the port's line rate. A loopback - server and client
on one node, the client connecting to 127.0.0.1 or the node's own address - is an ordinary run: the server
listens on every address.

Lab additions so nothing hangs: the server gives up after $GPUFORGE_LAB_PERFTEST_TIMEOUT seconds
(default 120) without a client; the client retries its connection for 5 s (the server may still
be starting) and every socket operation has a timeout.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import socket
import sys
import time

from gpuforge_sim import driver_state, ib_ports
from gpuforge_sim.hardware import faults_of, visible_gpus

RESULT_LINE = "-" * 87
DEFAULT_TCP_PORT = 18515
CONNECT_RETRY_S = 5.0
CHUNK = 1 << 20
_PORT_STATES = {1: "Down", 2: "Init", 3: "Armed"}  # perftest's portStates[] for non-Active ports
_NO_CONTEXT = " Couldn't get context for the device"
_NO_SOCKET = " Unable to init the socket connection"
# Peer-memory kernel modules that let the HCA register GPU memory (nvidia-peermem, or MLNX's older nv_peer_mem).
PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")
_MIB_BYTES = 0x100000
_GBIT_BYTES = 125_000_000
_REPORT_FMT = " {:<7d}    {:<10d}       {:<7.2f}            {:<7.2f}\t\t   {:<7.6f}"
_REPORT_FMT_EXT = " {:<7d}    {:<d}           {:<7.6f}            {:<7.6f}            {:<7.6f}"


def _options(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ib_write_bw", add_help=True)
    parser.add_argument("-d", "--ib-dev")
    parser.add_argument("-i", "--ib-port", type=int, default=1)
    parser.add_argument("-p", "--port", type=int, default=DEFAULT_TCP_PORT)
    parser.add_argument("-D", "--duration", type=int)
    parser.add_argument("-s", "--size", type=int, default=65536)
    parser.add_argument("-n", "--iters", type=int, default=5000)
    parser.add_argument("-q", "--qp", type=int, default=1)
    parser.add_argument("-t", "--tx-depth", type=int, default=128)
    parser.add_argument("-F", "--CPU-freq", action="store_true")
    parser.add_argument("-R", "--rdma_cm", action="store_true")
    parser.add_argument("-x", "--gid-index", type=int)
    parser.add_argument("--report_gbits", action="store_true")
    parser.add_argument("--use_cuda", type=int, nargs="?", const=0)
    parser.add_argument("--use_cuda_dmabuf", action="store_true")
    parser.add_argument("server", nargs="?")
    options, _unknown = parser.parse_known_args(argv)  # other perftest flags do not change the run
    return options


def _c_hex(value: int, width: int) -> str:
    """C's %#0<width>x: '0x0d' for 13 at width 4, but '0000' for zero (the # flag adds no 0x)."""
    return "0" * width if value == 0 else f"{value:#0{width}x}"


def _fail(*lines: str) -> int:
    sys.stderr.write("".join(f"{line}\n" for line in lines))
    return 1


def _cpu_mhz_values(path: str = "/proc/cpuinfo") -> list[float]:
    try:
        with open(path, encoding="utf-8") as handle:
            return [float(m) for m in re.findall(r"^cpu MHz\s*:\s*([\d.]+)", handle.read(), re.M)]
    except OSError:
        return []


def _cpu_warning(options: argparse.Namespace) -> None:
    """perftest's stderr warning when cores report clocks more than 2 % apart (silenced by -F)."""
    values = _cpu_mhz_values()
    differing = [v for v in values if abs(v - values[0]) > 0.02 * values[0]] if values else []
    if options.CPU_freq or not differing:
        return
    sys.stdout.flush()
    detected = f"{values[0]:f} != {differing[0]:f}"
    sys.stderr.write(f"Conflicting CPU frequency values detected: {detected}. CPU Frequency is not max.\n")
    sys.stderr.flush()


def _local_end(hca: dict, port: dict, options: argparse.Namespace, rate_gbit_per_s: float | None = None) -> dict:
    rng = random.SystemRandom()
    return {
        "device": hca["name"],
        "lid": port["lid"],
        "rate_gbit_per_s": port["rate_gbit_per_s"] if rate_gbit_per_s is None else rate_gbit_per_s,
        "link_layer": port["link_layer"],
        "qps": [
            {
                "qpn": rng.randrange(0x100, 0x10000),
                "psn": rng.randrange(1 << 24),
                "rkey": rng.randrange(1 << 20),
            }
            for _ in range(max(1, options.qp))
        ],
        "vaddr": 0x7F0000000000 + rng.randrange(1 << 28) * 0x1000,
    }


def _header(options: argparse.Namespace, hca: dict, port: dict, machine: str) -> list[str]:
    ethernet = port["link_layer"] == "Ethernet"
    lines = [
        RESULT_LINE,
        "                    RDMA_Write BW Test",
        f" Dual-port       : OFF\t\tDevice         : {hca['name']}",
        f" Number of qps   : {options.qp}\t\tTransport type : IB",
        " Connection type : RC\t\tUsing SRQ      : OFF",
        " PCIe relax order: ON",
        " ibv_wr* API     : ON",
    ]
    if machine == "client":
        lines.append(f" TX depth        : {options.tx_depth}")
    lines += [" CQ Moderation   : 100", f" Mtu             : {port['mtu'] if ethernet else 4096}[B]"]
    lines.append(f" Link type       : {'Ethernet' if ethernet else 'IB'}")
    if options.gid_index is not None:
        lines.append(f" GID index       : {options.gid_index}")
    lines += [
        " Max inline data : 0[B]",
        f" rdma_cm QPs\t : {'ON' if options.rdma_cm else 'OFF'}",
        f" Data ex. method : {'rdma_cm' if options.rdma_cm else 'Ethernet'}",
    ]
    if options.rdma_cm and machine == "server":
        lines += [RESULT_LINE, " Waiting for client rdma_cm QP to connect"]
        lines.append(" Please run the same command with the IB/RoCE interface IP")
    return [*lines, RESULT_LINE]


def _addresses(side: str, end: dict, ip: str, options: argparse.Namespace) -> list[str]:
    lines = []
    for qp in end["qps"]:
        lid, qpn, psn = _c_hex(end["lid"], 4), _c_hex(qp["qpn"], 6), _c_hex(qp["psn"], 8)
        text = f" {side} address: LID {lid} QPN {qpn} PSN {psn}"
        if not options.rdma_cm:
            text += f" RKey {_c_hex(qp['rkey'], 8)} VAddr {_c_hex(end['vaddr'], 16)}"
        lines.append(text)
        if end["link_layer"] == "Ethernet":  # RoCE prints the (IPv4-mapped) GID in decimal bytes
            ipv4 = [int(x) for x in ip.split(".")] if ip.count(".") == 3 else [0, 0, 0, 0]
            octets = [0] * 10 + [255, 255] + ipv4
            lines.append(" GID: " + ":".join(f"{b:02d}" for b in octets))
    return lines


def compute_report(
    nbytes: int, seconds: float, peak_byte_per_s: float, line_rate_gbit_per_s: float, options: argparse.Namespace
) -> dict:
    """The result row: TCP bytes/s capped at the simulated line rate (see module docstring)."""
    size = options.size
    line_byte_per_s = line_rate_gbit_per_s * 1e9 / 8
    measured_byte_per_s = nbytes / seconds if seconds > 0 else 0.0
    avg_byte_per_s = min(measured_byte_per_s, line_byte_per_s)
    if options.duration:
        iterations = int(avg_byte_per_s * seconds / size)
        peak_byte_per_s = 0.0
    else:
        iterations = options.iters * max(1, options.qp)
        peak_byte_per_s = min(max(peak_byte_per_s, avg_byte_per_s), line_byte_per_s)
    factor = _GBIT_BYTES if options.report_gbits else _MIB_BYTES
    return {
        "bytes": size,
        "iterations": iterations,
        "bw_peak": peak_byte_per_s / factor,
        "bw_average": avg_byte_per_s / factor,
        "msg_rate_mpps": avg_byte_per_s / size / 1e6,
        "capped": measured_byte_per_s > line_byte_per_s,
        "measured_gbit_per_s": measured_byte_per_s * 8 / 1e9,
    }


def _table(report: dict, options: argparse.Namespace) -> list[str]:
    unit = "Gb/sec" if options.report_gbits else "MB/sec"
    fmt = _REPORT_FMT_EXT if options.report_gbits and report["bw_average"] < 0.1 else _REPORT_FMT
    row = fmt.format(
        report["bytes"],
        report["iterations"],
        report["bw_peak"],
        report["bw_average"],
        report["msg_rate_mpps"],
    )
    header = f" #bytes     #iterations    BW peak[{unit}]    BW average[{unit}]   MsgRate[Mpps]"
    _print([header])
    _cpu_warning(options)
    return [row, RESULT_LINE]


def _print(lines: list[str]) -> None:
    sys.stdout.write("".join(f"{line}\n" for line in lines))
    sys.stdout.flush()


def _send_json(sock: socket.socket, payload: dict) -> None:
    sock.sendall(json.dumps(payload).encode() + b"\n")


def _recv_json(stream) -> dict:
    line = stream.readline()
    if not line:
        raise ConnectionError("peer closed the connection")
    return json.loads(line)


def _cuda_lines(hw: dict, index: int) -> tuple[list[str], str | None]:
    gpus = visible_gpus(hw)
    if not gpus:
        return [], "No CUDA devices found"
    if index >= len(gpus):
        return [], f"No CUDA device with index {index} (found {len(gpus)})"
    lines = ["initializing CUDA", "Listing all CUDA devices in system:"]
    for gpu in gpus:
        bus = gpu.get("bus_id", "00000000:00:00.0").split(":")
        lines.append(f"CUDA device {gpu['index']}: PCIe address is {bus[-2]}:{bus[-1].split('.')[0]}")
    name = (hw.get("gpu") or {}).get("product_name", "")
    lines += [
        "",
        f"Picking device No. {index}",
        f"[pid = {os.getpid()}, dev = {index}] device name = [{name}]",
    ]
    lines += ["creating CUDA Ctx", "making it the current CUDA Ctx"]
    return lines, None


def gdr_rate(hw: dict, hca: dict, port: dict, options: argparse.Namespace) -> float:
    """The rate this end may move: the port's line rate, times a `gdr_slow` fault's fraction for a GPU-memory run
    on that HCA (and port, when the fault names one)."""
    rate = float(port["rate_gbit_per_s"])
    if options.use_cuda is None:
        return rate
    for fault in faults_of(hw, "gdr_slow"):
        if fault.get("hca") == hca["name"] and int(fault.get("port", port["port"])) == port["port"]:
            rate *= float(fault["fraction"])
    return rate


def gpu_memory_unregistrable(hw: dict, hca: dict, options: argparse.Namespace) -> bool:
    """Whether registering GPU memory for RDMA fails on this HCA: a `gdr_unavailable` fault for it (or for every
    HCA), or no peer-memory module loaded and no dma-buf asked for."""
    if any(f.get("hca") in (None, hca["name"]) for f in faults_of(hw, "gdr_unavailable")):
        return True
    return not options.use_cuda_dmabuf and not set(PEERMEM_MODULES) & set(driver_state.loaded_modules())


def _mr_failure(options: argparse.Namespace) -> int:
    """perftest's output when ibv_reg_mr refuses the GPU buffer (issue #31 of linux-rdma/perftest)."""
    size = options.size * max(1, options.qp) * 2
    address = 0x2305040000 + random.SystemRandom().randrange(1 << 16) * 0x10000
    _print(
        [
            f"cuMemAlloc() of a {size} bytes GPU buffer",
            f"allocated GPU buffer address at {address:016x} pointer={address:#x}",
        ]
    )
    return _fail("Couldn't allocate MR", "failed to create mr", "Failed to create MR", " Couldn't create IB resources")


def _run_server(options, hca, port, rate_gbit_per_s: float | None = None) -> int:
    timeout = float(os.environ.get("GPUFORGE_LAB_PERFTEST_TIMEOUT", "120"))
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind(("", options.port))
        except OSError as exc:
            return _fail(
                f" Couldn't bind to port {options.port}: {exc.strerror}",
                " Unable to init the socket connection",
            )
        listener.listen(1)
        listener.settimeout(timeout)
        if options.rdma_cm:
            _print(_header(options, hca, port, "server"))
        else:
            _print(["", "************************************", "* Waiting for client to connect... *"])
            _print(["************************************"])
        try:
            conn, (peer_ip, _peer_port) = listener.accept()
        except TimeoutError:
            return _fail(f" No client connected within {timeout:g} s (gpuforge lab timeout)")
    with conn, conn.makefile("rb") as stream:
        conn.settimeout(timeout)
        client = _recv_json(stream)
        local = _local_end(hca, port, options, rate_gbit_per_s)
        _send_json(conn, local)
        payload_started = time.monotonic()
        if not options.rdma_cm:
            _print(_header(options, hca, port, "server"))
        own_ip = conn.getsockname()[0]
        _print(_addresses("local", local, own_ip, options) + _addresses("remote", client, peer_ip, options))
        _print([RESULT_LINE])
        options.size, options.iters, options.qp = client["size"], client["iters"], client["qp"]
        options.duration = client["duration"]
        nbytes, seconds, peak = _receive(conn, stream, payload_started)
        report = compute_report(
            nbytes, seconds, peak, min(local["rate_gbit_per_s"], client["rate_gbit_per_s"]), options
        )
        _send_json(conn, report)
    _print(_table(report, options))
    return 0


def _receive(conn: socket.socket, stream, started: float) -> tuple[int, float, float]:
    """Read until end of stream; returns (bytes, seconds since ``started``, peak bytes/s over 0.1 s windows).

    ``started`` is when the server told the client to send: timing from the first byte instead lets a link that
    delivers a few late buffers at once (a shaped, lossy one) look fast.
    """
    buffer = bytearray(CHUNK)
    total, start, window_start, window_bytes, peak = 0, started, started, 0, 0.0
    while True:
        count = stream.readinto1(buffer)
        now = time.monotonic()
        if not count:
            break
        total += count
        window_bytes += count
        if now - window_start >= 0.1:
            peak = max(peak, window_bytes / (now - window_start))
            window_start, window_bytes = now, 0
    seconds = (time.monotonic() - start) if total else 0.0
    return total, seconds, peak


def _connect(host: str, port: int) -> socket.socket | None:
    deadline = time.monotonic() + CONNECT_RETRY_S
    while True:
        try:
            return socket.create_connection((host, port), timeout=5)
        except OSError:
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.2)


def _run_client(options, hca, port, rate_gbit_per_s: float | None = None) -> int:
    sock = _connect(options.server, options.port)
    if sock is None:
        return _fail(
            f"Couldn't connect to {options.server}:{options.port}",
            "Unable to open file descriptor for socket connection",
            _NO_SOCKET.strip(),
        )
    io_timeout = (options.duration or 0) + 60
    with sock, sock.makefile("rb") as stream:
        sock.settimeout(io_timeout)
        local = _local_end(hca, port, options, rate_gbit_per_s)
        run = {"size": options.size, "iters": options.iters, "qp": options.qp, "duration": options.duration}
        _send_json(sock, {**local, **run})
        server = _recv_json(stream)
        _print(_header(options, hca, port, "client"))
        own_ip, peer_ip = sock.getsockname()[0], sock.getpeername()[0]
        _print(_addresses("local", local, own_ip, options) + _addresses("remote", server, peer_ip, options))
        _print([RESULT_LINE])
        payload = memoryview(bytes(CHUNK))
        if options.duration:
            end = time.monotonic() + options.duration
            while time.monotonic() < end:
                sock.sendall(payload)
        else:
            remaining = options.size * options.iters * max(1, options.qp)
            while remaining > 0:
                sock.sendall(payload[: min(CHUNK, remaining)])
                remaining -= min(CHUNK, remaining)
        sock.shutdown(socket.SHUT_WR)
        report = _recv_json(stream)
    _print(_table(report, options))
    return 0


def main(argv: list[str] | None = None) -> int:
    options = _options(sys.argv[1:] if argv is None else argv)
    hw = ib_ports.load()
    hcas = ib_ports.ports_view(hw)
    if not hcas:
        return _fail("No IB devices found", " Unable to find the Infiniband/RoCE device")
    hca, port = ib_ports.find_port(hcas, options.ib_dev, options.ib_port)
    if hca is None:
        return _fail(f"IB device {options.ib_dev} not found", " Unable to find the Infiniband/RoCE device")
    if port is None:
        return _fail(f" Unable to query port {options.ib_port} attributes", _NO_CONTEXT)
    if port["state"] != "Active":
        state = _PORT_STATES.get(port["state_code"], port["state"])
        return _fail(f" Port number {options.ib_port} state is {state}", _NO_CONTEXT)
    if options.use_cuda is not None:
        lines, error = _cuda_lines(hw, options.use_cuda)
        if error:
            return _fail(error, "Couldn't init GPU context")
        _print(lines)
        if gpu_memory_unregistrable(hw, hca, options):
            return _mr_failure(options)
    rate = gdr_rate(hw, hca, port, options)
    try:
        return _run_client(options, hca, port, rate) if options.server else _run_server(options, hca, port, rate)
    except (OSError, ConnectionError, ValueError) as exc:
        return _fail(f" Failed to exchange data between server and clients ({exc})")


if __name__ == "__main__":
    sys.exit(main())
