#!/usr/bin/python3
"""Lab stand-in for nccl-tests' all_reduce_perf: a real all-reduce between MPI processes over TCP.

The lab has no GPU, no NCCL and no InfiniBand, so this program does what all_reduce_perf does with
what the lab has: each process holds ``-g`` host buffers (one per "GPU"), reduces them in memory, and
Open MPI reduces across processes over TCP (the btl is forced to ``tcp,self`` before MPI starts, so
even ranks on one node talk over loopback TCP, never shared memory). It times every size, computes
algbw and busbw with the nccl-tests formulas, checks the results, and prints the nccl-tests 2022+
output format, so the same parser and module read it.

With NCCL_DEBUG=INFO it prints NCCL-style INFO lines that say NET/Socket, because the data really moves
over TCP. NCCL_IB_DISABLE and NCCL_NET_GDR_LEVEL only change an extra line saying which transport real
NCCL *would* pick on the lab node's HCAs (read from /etc/gpuforge-lab/hardware.json); they never
change how data moves.

Runs under Debian's python3 with python3-numpy and python3-mpi4py (Open MPI: openmpi-bin). Without
mpi4py it runs as a single process. Launch: ``mpirun -np 2 /usr/bin/python3 all_reduce_perf.py -b 8 -e 1M``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time

# Must be set before mpi4py initialises MPI: TCP between every pair of processes, no shared memory,
# no UCX. setdefault lets an operator override them on the mpirun command line.
os.environ.setdefault("OMPI_MCA_btl", "tcp,self")
os.environ.setdefault("OMPI_MCA_pml", "ob1")

import numpy as np

try:
    from mpi4py import MPI
except ImportError:  # single process, no MPI
    MPI = None

DTYPES = {
    "int8": np.int8,
    "char": np.int8,
    "uint8": np.uint8,
    "int32": np.int32,
    "int": np.int32,
    "uint32": np.uint32,
    "int64": np.int64,
    "uint64": np.uint64,
    "float": np.float32,
    "float32": np.float32,
    "double": np.float64,
    "float64": np.float64,
}
# nccl-tests prints its own type names in the table.
PRINT_NAMES = {"char": "int8", "int": "int32", "float32": "float", "float64": "double"}
OPS = ("sum", "prod", "min", "max")
# The lab node's hardware description; the variable lets tests point at their own file.
HARDWARE_JSON = os.environ.get("GPUFORGE_LAB_HARDWARE_JSON", "/etc/gpuforge-lab/hardware.json")

# Table header lines exactly as nccl-tests (2022+) prints them.
TABLE_HEADER = (
    "#                                                              out-of-place                       "
    "in-place          \n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   "
    "algbw   busbw #wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  "
    "(GB/s)  (GB/s)       "
)


def parse_size(text: str) -> int:
    """nccl-tests size syntax: 8, 64K, 1M, 10240M, 2G (binary multiples)."""
    value = text.strip().upper().rstrip("B")
    multiplier = 1
    if value and value[-1] in "KMG":
        multiplier = 1024 ** ("KMG".index(value[-1]) + 1)
        value = value[:-1]
    return int(value) * multiplier


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="nccl-tests all_reduce_perf stand-in (TCP, no GPU)")
    parser.add_argument("-b", "--minbytes", default="32M", type=parse_size)
    parser.add_argument("-e", "--maxbytes", default="32M", type=parse_size)
    parser.add_argument("-f", "--stepfactor", default=1, type=int, help="multiply size by this (>1)")
    parser.add_argument("-i", "--stepbytes", default="1M", type=parse_size, help="add this when -f is 1")
    parser.add_argument("-g", "--ngpus", default=1, type=int, help="buffers ('GPUs') per process")
    parser.add_argument("-n", "--iters", default=20, type=int)
    parser.add_argument("-w", "--warmup_iters", default=5, type=int)
    parser.add_argument("-c", "--check", default=1, type=int)
    parser.add_argument("-d", "--datatype", default="float", choices=sorted(DTYPES))
    parser.add_argument("-o", "--op", default="sum", choices=OPS)
    return parser


def sizes(args) -> list[int]:
    result, size = [], args.minbytes
    while size <= args.maxbytes:
        result.append(size)
        if args.stepfactor > 1:
            size *= args.stepfactor
        elif args.stepbytes > 0:
            size += args.stepbytes
        else:
            break
    return result


def run_command(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def lab_gpus() -> list[tuple[str, str]]:
    """(bus id as nccl-tests prints it, name) per GPU from the lab's nvidia-smi; [] when there is none."""
    names = []
    for line in run_command(["nvidia-smi", "-L"]).splitlines():
        if line.startswith("GPU ") and ": " in line:
            names.append(line.split(": ", 1)[1].split(" (UUID")[0].strip())
    buses = []
    for line in run_command(["nvidia-smi", "--query-gpu=pci.bus_id", "--format=csv,noheader"]).splitlines():
        parts = line.strip().split(":")
        buses.append(f"0x{int(parts[1], 16):02x}" if len(parts) == 3 else "0x00")
    return [(buses[i] if i < len(buses) else "0x00", name) for i, name in enumerate(names)]


def default_interface() -> tuple[str, str]:
    """Interface of the default route and this host's address on it (what NCCL's socket transport picks)."""
    name = "lo"
    try:
        with open("/proc/net/route", encoding="ascii") as routes:
            for line in routes.readlines()[1:]:
                fields = line.split()
                if len(fields) > 1 and fields[1] == "00000000":
                    name = fields[0]
                    break
    except OSError:
        pass
    address = "127.0.0.1"
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # TEST-NET address: no packet is sent for a UDP connect
        address = probe.getsockname()[0]
    except OSError:
        pass
    finally:
        probe.close()
    return name, address


def would_use_line() -> str:
    """Which transport real NCCL would choose here, from NCCL_IB_DISABLE/NCCL_NET_GDR_LEVEL and the HCAs."""
    ib_disable = os.environ.get("NCCL_IB_DISABLE", "0") == "1"
    gdr_level = os.environ.get("NCCL_NET_GDR_LEVEL", "")
    hcas = []
    try:
        with open(HARDWARE_JSON, encoding="utf-8") as handle:
            hardware = json.load(handle)
        for hca in hardware.get("hcas") or []:
            for port in hca.get("ports") or []:
                if port.get("state", "Active") == "Active":
                    layer = "IB" if port.get("link_layer", "InfiniBand") == "InfiniBand" else "RoCE"
                    hcas.append(f"{hca['name']}:{port['port']}/{layer}")
    except (OSError, ValueError, KeyError, TypeError):
        pass
    settings = f"NCCL_IB_DISABLE={os.environ.get('NCCL_IB_DISABLE', 'unset')} NCCL_NET_GDR_LEVEL={gdr_level or 'unset'}"
    if ib_disable or not hcas:
        choice = "the socket transport (TCP)" if ib_disable else "the socket transport (no active HCA)"
    else:
        devices = " ".join(f"[{i}]{name}" for i, name in enumerate(hcas))
        gdr = gdr_level not in ("", "0", "LOC")
        choice = f"NET/IB {devices}" + (" with GPUDirect RDMA" if gdr else " without GPUDirect RDMA")
    return f"gpuforge lab stand-in: {settings}: real NCCL would pick {choice}; this run moves data over TCP"


def init_values(rank: int, count: int, dtype) -> np.ndarray:
    # Small integers keep float sums exact; the pattern differs per rank so a lost rank shows.
    return ((np.arange(count, dtype=np.int64) + rank * 3) % 4 + 1).astype(dtype)


def expected_values(nranks: int, count: int, dtype, op: str) -> np.ndarray:
    stack = np.stack([init_values(rank, count, dtype) for rank in range(nranks)])
    reducer = {"sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max}[op]
    return reducer(stack, axis=0).astype(dtype)


# How a process waits for MPI: Open MPI moves TCP data only inside MPI calls, and its blocking calls poll the
# sockets without pause, so every rank held a core for as long as the slowest link kept it waiting (eight ranks
# behind one slowed lab link spun for minutes). A wait polls the request without pause for its first SPIN_S, which
# covers a healthy operation of the lab's sizes, and sleeps IDLE_SLEEP_S between polls after that; the kernel's
# socket buffers keep the data moving while the process sleeps.
SPIN_S = 0.002
IDLE_SLEEP_S = 0.0002


def wait(request) -> None:
    """Complete a non-blocking MPI operation, polling without pause only for its first SPIN_S."""
    spin_until = time.perf_counter() + SPIN_S
    while not request.Test():
        if time.perf_counter() > spin_until:
            time.sleep(IDLE_SLEEP_S)


class AllReduce:
    """One process's part of the all-reduce: local buffers reduced in memory, processes over MPI."""

    def __init__(self, comm, ngpus: int, dtype, op: str):
        self.comm = comm
        self.ngpus = ngpus
        self.dtype = dtype
        self.op = op
        self.mpi_op = getattr(MPI, op.upper()) if comm is not None else None
        self.local = {"sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max}[op]

    def _across(self, buffer: np.ndarray) -> None:
        if self.comm is not None and self.comm.Get_size() > 1:
            wait(self.comm.Iallreduce(MPI.IN_PLACE, buffer, op=self.mpi_op))

    def out_of_place(self, send: list[np.ndarray], recv: list[np.ndarray]) -> None:
        reduced = send[0].copy() if self.ngpus == 1 else self.local(np.stack(send), axis=0).astype(self.dtype)
        self._across(reduced)
        for buffer in recv:
            buffer[...] = reduced

    def in_place(self, buffers: list[np.ndarray]) -> None:
        if self.ngpus == 1:
            self._across(buffers[0])
            return
        reduced = self.local(np.stack(buffers), axis=0).astype(self.dtype)
        self._across(reduced)
        for buffer in buffers:
            buffer[...] = reduced


def count_wrong(buffers: list[np.ndarray], expected: np.ndarray) -> int:
    wrong = 0
    for buffer in buffers:
        if np.issubdtype(expected.dtype, np.floating):
            wrong += int(np.count_nonzero(~np.isclose(buffer, expected, rtol=1e-5, atol=0)))
        else:
            wrong += int(np.count_nonzero(buffer != expected))
    return wrong


def format_time(usec: float) -> str:
    # nccl-tests: fewer decimals as the time grows, always 7 characters wide.
    if usec >= 10000.0:
        return f"{usec:7.0f}"
    if usec >= 100.0:
        return f"{usec:7.1f}"
    return f"{usec:7.2f}"


class Bench:
    def __init__(self, args, comm):
        self.args = args
        self.comm = comm
        self.rank = comm.Get_rank() if comm is not None else 0
        self.nprocs = comm.Get_size() if comm is not None else 1
        self.nranks = self.nprocs * args.ngpus
        self.dtype = DTYPES[args.datatype]
        self.reduce = AllReduce(comm, args.ngpus, self.dtype, args.op)

    def gather(self, value):
        return self.comm.allgather(value) if self.comm is not None else [value]

    def _reduced(self, value: float, op) -> float:
        buffer = np.array([value], dtype=np.float64)
        wait(self.comm.Iallreduce(MPI.IN_PLACE, buffer, op=op))
        return float(buffer[0])

    def max_across(self, value: float) -> float:
        return self._reduced(value, MPI.MAX) if self.comm is not None else value

    def sum_across(self, value: int) -> int:
        return int(self._reduced(value, MPI.SUM)) if self.comm is not None else value

    def barrier(self) -> None:
        if self.comm is not None:
            wait(self.comm.Ibarrier())

    def out(self, text: str) -> None:
        if self.rank == 0:
            print(text, flush=True)

    def timed(self, action, iters: int) -> float:
        """Average microseconds per call, the slowest process's figure (all ranks finish together)."""
        self.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            action()
        elapsed = (time.perf_counter() - start) / max(iters, 1)
        return self.max_across(elapsed) * 1e6

    def measure(self, size: int) -> tuple:
        count = size // np.dtype(self.dtype).itemsize
        first = self.rank * self.args.ngpus
        send = [init_values(first + j, count, self.dtype) for j in range(self.args.ngpus)]
        recv = [np.zeros(count, dtype=self.dtype) for _ in range(self.args.ngpus)]
        for _ in range(self.args.warmup_iters):
            self.reduce.out_of_place(send, recv)
        oop_us = self.timed(lambda: self.reduce.out_of_place(send, recv), self.args.iters)
        inplace = [buffer.copy() for buffer in send]
        ip_us = self.timed(lambda: self.reduce.in_place(inplace), self.args.iters)
        wrong = [None, None]
        if self.args.check:
            expected = expected_values(self.nranks, count, self.dtype, self.args.op)
            recv = [np.zeros(count, dtype=self.dtype) for _ in range(self.args.ngpus)]
            self.reduce.out_of_place(send, recv)
            inplace = [buffer.copy() for buffer in send]
            self.reduce.in_place(inplace)
            wrong = [self.sum_across(count_wrong(recv, expected)), self.sum_across(count_wrong(inplace, expected))]
        return count, oop_us, ip_us, wrong

    def bandwidths(self, size: int, usec: float) -> tuple[float, float]:
        algbw = size / (usec * 1e-6) / 1e9 if usec > 0 else 0.0
        # nccl-tests all-reduce bus bandwidth: each rank sends and receives 2(n-1)/n of the data.
        return algbw, algbw * 2 * (self.nranks - 1) / self.nranks

    def print_info_lines(self) -> None:
        if os.environ.get("NCCL_DEBUG", "").upper() not in ("INFO", "TRACE"):
            return
        host, pid = socket.gethostname(), os.getpid()
        prefix = f"{host}:{pid}:{threading.get_native_id()} [0] NCCL INFO"
        interface, address = default_interface()
        lines = [
            "gpuforge lab stand-in: no GPU and no NCCL here; Open MPI all-reduce over TCP (btl tcp,self)",
            f"NET/Socket : Using [0]{interface}:{address}<0>",
            "Using network Socket",
            would_use_line(),
        ]
        # Ring edges that leave this process go over TCP; edges between this process's own buffers
        # are a memory copy and get no line.
        me = self.rank * self.args.ngpus + self.args.ngpus - 1
        peer = (me + 1) % self.nranks
        if self.nprocs > 1:
            lines.append(f"Channel 00/0 : {me}[{self.args.ngpus - 1}] -> {peer}[0] [send] via NET/Socket/0")
        # Rank 0 writes every process's INFO lines (each keeps its own host:pid prefix) in one write.
        # mpirun forwards each process's stdout in chunks as they are read, so lines printed by two
        # processes can be spliced mid-line under load even with a barrier between the prints.
        everyone = self.gather("\n".join(f"{prefix} {line}" for line in lines))
        self.out("\n".join(everyone))

    def device_lines(self) -> list[str] | None:
        host, pid = socket.gethostname(), os.getpid()
        local_rank = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", os.environ.get("SLURM_LOCALID", "0")))
        gpus = lab_gpus()
        lines = []
        for j in range(self.args.ngpus):
            device = local_rank * self.args.ngpus + j
            if gpus and device >= len(gpus):
                return None
            bus, name = gpus[device] if gpus else ("0x00", "CPU (lab stand-in, no nvidia-smi)")
            rank = self.rank * self.args.ngpus + j
            lines.append(f"#  Rank {rank:2d} Group  0 Pid {pid:6d} on {host:>10} device {device:2d} [{bus}] {name}")
        return lines

    def run(self) -> int:
        args = self.args
        step = f"{args.stepfactor}(factor)" if args.stepfactor > 1 else f"{args.stepbytes}(bytes)"
        self.out(
            f"# nThread 1 nGpus {args.ngpus} minBytes {args.minbytes} maxBytes {args.maxbytes} step: {step} "
            f"warmup iters: {args.warmup_iters} iters: {args.iters} agg iters: 1 validation: {args.check} graph: 0"
        )
        self.out("#\n# Using devices")
        mine = self.device_lines()
        everyone = self.gather(mine)
        if any(lines is None for lines in everyone):
            if mine is None:
                print(
                    f"{socket.gethostname()}: Test CUDA failure all_reduce_perf.py 'invalid device ordinal' "
                    f"(fewer GPUs than local ranks x -g {args.ngpus})",
                    flush=True,
                )
            return 2
        self.out("\n".join(line for lines in everyone for line in lines))
        self.print_info_lines()
        self.out("#\n" + TABLE_HEADER)
        type_name = PRINT_NAMES.get(args.datatype, args.datatype)
        bus_total, bus_cells, wrong_total = 0.0, 0, 0
        for size in sizes(args):
            count, oop_us, ip_us, wrong = self.measure(size)
            cells = []
            for usec, bad in ((oop_us, wrong[0]), (ip_us, wrong[1])):
                algbw, busbw = self.bandwidths(count * np.dtype(self.dtype).itemsize, usec)
                bus_total, bus_cells = bus_total + busbw, bus_cells + 1
                wrong_total += bad or 0
                cells.append(f"  {format_time(usec)} {algbw:7.2f} {busbw:7.2f} {'N/A' if bad is None else bad:>6}")
            self.out(f"{size:12d}  {count:12d}  {type_name:>8}  {args.op:>6}  {-1:6d}" + "".join(cells))
        verdict = "OK" if wrong_total == 0 else "FAILED"
        self.out(f"# Out of bounds values : {wrong_total} {verdict}")
        self.out(f"# Avg bus bandwidth    : {bus_total / max(bus_cells, 1):g} ")
        self.out("#")
        return 0 if wrong_total == 0 else 1


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.ngpus < 1 or args.iters < 1 or args.minbytes > args.maxbytes:
        print("all_reduce_perf stand-in: need -g >= 1, -n >= 1 and -b <= -e", file=sys.stderr)
        return 2
    comm = MPI.COMM_WORLD if MPI is not None else None
    return Bench(args, comm).run()


if __name__ == "__main__":
    sys.exit(main())
