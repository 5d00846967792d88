"""Thin wrapper over the podman CLI, always with the project's containers.conf (runc, safe ulimits)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence

from gpuforge.paths import CONTAINERS_CONF


class PodmanError(RuntimeError):
    """A podman command failed; the message carries the command and podman's own words."""


def environment() -> dict[str, str]:
    env = dict(os.environ)
    if CONTAINERS_CONF.is_file():
        env.setdefault("CONTAINERS_CONF", str(CONTAINERS_CONF))
    env["LC_ALL"] = "C"
    return env


def podman(*args: str, check: bool = True, stdin: bytes | None = None, capture: bool = True) -> str:
    command = ["podman", *args]
    try:
        proc = subprocess.run(
            command,
            input=stdin,
            stdout=subprocess.PIPE if capture else None,
            stderr=subprocess.PIPE,
            env=environment(),
            check=False,
        )
    except FileNotFoundError as exc:
        raise PodmanError("podman is not installed: run 'make setup' (as root)") from exc
    if check and proc.returncode != 0:
        raise PodmanError(f"{' '.join(command[:4])}... failed ({proc.returncode}): {proc.stderr.decode().strip()}")
    return proc.stdout.decode() if capture and proc.stdout is not None else ""


def exists(kind: str, name: str) -> bool:
    """kind: image, container or network."""
    args = ["network", "exists", name] if kind == "network" else [kind, "exists", name]
    return subprocess.run(["podman", *args], env=environment(), capture_output=True).returncode == 0


def inspect(kind: str, names: Sequence[str]) -> list[dict]:
    if not names:
        return []
    prefix = ["network", "inspect"] if kind == "network" else [kind, "inspect"]
    return json.loads(podman(*prefix, *names) or "[]")
