"""Shared helpers for the IB simulator tests: a hardware document from a lab profile plus faults, and a
loopback run of the simulated ib_write_bw."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import yaml

PROFILES = Path(__file__).resolve().parents[3] / "lab" / "profiles"
SIM_PATH = Path(__file__).resolve().parents[3] / "lab" / "sim"


def write_hardware(tmp_path: Path, monkeypatch, profile: str, faults: list[dict] | None = None) -> dict:
    """Write <profile> + faults as the node's hardware.json and point the simulators at it."""
    hw = yaml.safe_load((PROFILES / f"{profile}.yml").read_text(encoding="utf-8"))
    hw["faults"] = faults or []
    path = tmp_path / "hardware.json"
    path.write_text(json.dumps(hw), encoding="utf-8")
    monkeypatch.setenv("GPUFORGE_LAB_HARDWARE", str(path))
    return hw


def run_tool(tool, argv: list[str], capsys) -> tuple[int, str, str]:
    """Run a simulator's main(argv); returns (exit status, stdout, stderr)."""
    rc = tool.main(argv)
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def loopback(device: str, args: list[str]) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """A server and a client of the simulated ib_write_bw as two processes on this node, same device, the client
    connecting to 127.0.0.1; returns (server, client)."""
    port = str(free_port())
    env = {**os.environ, "PYTHONPATH": str(SIM_PATH), "GPUFORGE_LAB_PERFTEST_TIMEOUT": "20"}
    command = [sys.executable, "-m", "gpuforge_sim.ib_write_bw", "-d", device, "-p", port, "-F", *args]
    server = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        client = subprocess.run([*command, "127.0.0.1"], env=env, capture_output=True, text=True, timeout=30)
        out, err = server.communicate(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    return subprocess.CompletedProcess(server.args, server.returncode, out, err), client
