"""`gpuforge doctor`: can this machine run the lab? Each prerequisite is checked by using it, not by its package.

- python         the CLI's interpreter has the pinned dependencies and a working ansible-playbook next to it
- podman         `podman info` answers with the project's containers.conf, as root, with the runc runtime
- network        an internal podman network can be created (what the lab's network is)
- container-dns  two containers on that network resolve each other by name (netavark + aardvark-dns); with no
                 lab image yet it only finds the network helpers (netavark, aardvark-dns, iptables or nft)
                 and says the check was partial
- debootstrap    installed and runs (it builds the lab image)
- ulimits        the limits containers.conf gives containers fit the hard limits here (ulimit -Hn / -Hu)
- disk           free space for the lab image, mirror and containers (.gpuforge and podman's storage)
- memory         MemAvailable for the demo's nodes

Every check has a status (ok, partial, skipped, fail), what it found or what is missing, and for a failure
the command that fixes it. What the checks create (a network and two containers named gpuforge-doctor-*)
is removed before doctor returns, also on failure or Ctrl-C.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import threading
import tomllib
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path

from gpuforge import paths

OK, PARTIAL, SKIPPED, FAIL = "ok", "partial", "skipped", "fail"
GIB = 1024**3
# The lab image (~0.3 GiB) and its debootstrap tree, the vendor mirror, and five nodes' writable layers after
# provisioning: 10 GiB leaves room for a rebuild.
DISK_MIN_GIB = 10
# Five systemd nodes, the Ansible controller and the CPU ResNet-50 benchmark.
MEMORY_MIN_GIB = 4
LAB_IMAGE_REPO = "localhost/gpuforge-lab-node"  # gpuforge.lab.image.IMAGE_REPO
SCRATCH_PREFIX = "gpuforge-doctor-"
SCRATCH_LABEL = "io.gpuforge.doctor"
# Where podman looks for netavark and aardvark-dns (containers.conf helper_binaries_dir defaults).
HELPER_DIRS = ("/usr/local/libexec/podman", "/usr/local/lib/podman", "/usr/libexec/podman", "/usr/lib/podman")
SBIN_DIRS = ("/usr/local/sbin", "/usr/sbin", "/sbin")
SETUP = "make setup"
_LOGRUS_MSG = re.compile(r'msg="((?:[^"\\]|\\.)*)"')  # podman's warnings: time="..." level=warning msg="..."
AS_ROOT = "sudo -E env PATH=$PATH gpuforge doctor"


@dataclass
class Check:
    name: str
    status: str  # ok | partial | skipped | fail
    detail: str  # what was found, or what is missing
    fix: str = ""  # the command that fixes a failure

    @property
    def failed(self) -> bool:
        return self.status == FAIL


@dataclass
class CommandResult:
    rc: int
    stdout: str = ""
    stderr: str = ""

    def tail(self, lines: int = 3) -> str:
        text = (self.stderr.strip() or self.stdout.strip()).splitlines()
        return " | ".join(line.strip() for line in text[-lines:]) or f"exit status {self.rc}"


def run_command(argv: Sequence[str], timeout: float = 60.0, env: dict | None = None) -> CommandResult:
    """Run argv; a missing program, a timeout or an OS error is a result too (rc 127, 124, 126), never raised."""
    try:
        proc = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout, env=env, check=False, stdin=subprocess.DEVNULL
        )
    except FileNotFoundError:
        return CommandResult(127, "", f"{argv[0]}: command not found")
    except subprocess.TimeoutExpired:
        return CommandResult(124, "", f"{' '.join(argv)} did not finish within {timeout:.0f}s")
    except OSError as exc:
        return CommandResult(126, "", f"{argv[0]}: {exc}")
    return CommandResult(proc.returncode, proc.stdout, proc.stderr)


def _which(name: str) -> str | None:
    """PATH, then the sbin directories a non-root PATH often lacks (iptables, debootstrap live there)."""
    extra = os.pathsep.join(SBIN_DIRS)
    return shutil.which(name) or shutil.which(name, path=extra)


def _disk(path: Path) -> tuple[int, int]:
    """(free bytes, device) of the filesystem holding path, or of its nearest existing parent."""
    path = Path(path)
    while not path.exists() and path != path.parent:
        path = path.parent
    return shutil.disk_usage(path).free, path.stat().st_dev


def _mem_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _hard_limits() -> dict[str, int | None]:
    """What `ulimit -Hn` and `ulimit -Hu` say; None is unlimited."""
    limits = {}
    for name, which in (("nofile", resource.RLIMIT_NOFILE), ("nproc", resource.RLIMIT_NPROC)):
        hard = resource.getrlimit(which)[1]
        limits[name] = None if hard == resource.RLIM_INFINITY else hard
    return limits


def _installed_version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


@dataclass
class Host:
    """The machine as the checks see it; tests replace these members with fakes."""

    run: Callable[..., CommandResult] = run_command
    which: Callable[[str], str | None] = _which
    disk: Callable[[Path], tuple[int, int]] = _disk
    mem_available: Callable[[], int | None] = _mem_available
    hard_limits: Callable[[], dict[str, int | None]] = _hard_limits
    installed_version: Callable[[str], str | None] = _installed_version
    euid: Callable[[], int] = os.geteuid
    which_in: Callable[[str, str], str | None] = lambda name, directory: shutil.which(name, path=directory)
    python: Path = field(default_factory=lambda: Path(sys.executable))
    containers_conf: Path = paths.CONTAINERS_CONF
    state_dir: Path = paths.STATE_DIR
    pyproject: Path = paths.PROJECT_ROOT / "pyproject.toml"

    def podman(self, *args: str, timeout: float = 60.0) -> CommandResult:
        """podman with the project's containers.conf (runc, ulimits the host grants), as the lab runs it."""
        env = dict(os.environ, CONTAINERS_CONF=str(self.containers_conf), LC_ALL="C")
        return self.run(["podman", *args], timeout=timeout, env=env)


class Scratch:
    """Names for what the checks create, and their removal (network last: the containers use it)."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.prefix = f"{SCRATCH_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.containers: list[str] = []
        self.networks: list[str] = []

    def network(self) -> str:
        self.networks.append(self.prefix)
        return self.prefix

    def container(self, suffix: str) -> str:
        name = f"{self.prefix}-{suffix}"
        self.containers.append(name)
        return name

    def cleanup(self) -> list[str]:
        """Remove what was created; returns what could not be removed."""
        left = []
        if self.containers:
            result = self.host.podman("rm", "-f", "--ignore", "-t", "0", *self.containers, timeout=60)
            if result.rc != 0:
                left += self.containers
        for network in self.networks:
            exists = self.host.podman("network", "exists", network, timeout=30).rc == 0
            if exists and self.host.podman("network", "rm", "-f", network, timeout=60).rc != 0:
                left.append(network)
        self.containers, self.networks = [], []
        return left


@contextlib.contextmanager
def scratch_space(host: Host) -> Iterator[Scratch]:
    """A Scratch whose network and containers are removed on the way out, even on Ctrl-C or SIGTERM."""
    scratch = Scratch(host)
    main_thread = threading.current_thread() is threading.main_thread()
    previous_term = signal.getsignal(signal.SIGTERM) if main_thread else None

    def terminate(signum, frame):
        raise KeyboardInterrupt

    if main_thread:
        signal.signal(signal.SIGTERM, terminate)
    try:
        yield scratch
    finally:
        # A second Ctrl-C (or SIGTERM) must not leave the network behind half-way through the clean-up.
        previous_int = signal.signal(signal.SIGINT, signal.SIG_IGN) if main_thread else None
        if main_thread:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            left = scratch.cleanup()
        finally:
            if main_thread:
                signal.signal(signal.SIGINT, previous_int)
                signal.signal(signal.SIGTERM, previous_term)
        if left:
            print(f"doctor: could not remove {', '.join(left)}: podman rm -f {' '.join(left)}", file=sys.stderr)


# -- the checks ------------------------------------------------------------------------------------------------


def check_python(host: Host) -> Check:
    pins = _pinned_dependencies(host.pyproject)
    wrong = []
    for name, wanted in pins.items():
        installed = host.installed_version(name)
        if installed != wanted:
            wrong.append(f"{name} {installed or 'missing'} (pinned {wanted})")
    if wrong:
        return Check("python", FAIL, f"{host.python}: {', '.join(wrong)}", SETUP)
    playbook = host.python.parent / "ansible-playbook"
    result = host.run([str(playbook), "--version"], timeout=60)
    if result.rc != 0:
        return Check("python", FAIL, f"{playbook} --version failed: {result.tail()}", SETUP)
    core = re.search(r"core ([\w.]+)", result.stdout)
    venv = "venv" if sys.prefix != sys.base_prefix or host.python.parent.parent.name == ".venv" else "no venv"
    found = f"ansible-core {core.group(1)}" if core else result.stdout.strip().splitlines()[0]
    return Check("python", OK, f"{host.python} ({venv}), {found}, the {len(pins)} pins of pyproject.toml installed")


def _pinned_dependencies(pyproject: Path) -> dict[str, str]:
    try:
        document = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return {}
    pins = {}
    for requirement in document.get("project", {}).get("dependencies", []):
        name, sep, version = requirement.partition("==")
        if sep:
            pins[name.split("[")[0].strip()] = version.split(";")[0].strip()
    return pins


def check_podman(host: Host) -> tuple[Check, dict]:
    """The podman check, and `podman info`'s document for the checks after it ({} when podman failed)."""
    if host.which("podman") is None:
        return Check("podman", FAIL, "podman is not installed", "apt-get install podman runc"), {}
    if not host.containers_conf.is_file():
        return Check("podman", FAIL, f"{host.containers_conf} is missing (runc, ulimits for the lab)", SETUP), {}
    result = host.podman("info", "--format", "json", timeout=90)
    if result.rc != 0:
        text = result.stderr + result.stdout
        fix = "apt-get install runc" if "runc" in text and host.which("runc") is None else SETUP
        if host.euid() != 0:  # the lab's podman is root's
            fix = AS_ROOT
        return Check("podman", FAIL, f"podman info failed: {result.tail()}", fix), {}
    try:
        info = json.loads(result.stdout)
        runtime = info["host"]["ociRuntime"]
        rootless = bool(info["host"]["security"]["rootless"])
        version = info.get("version", {}).get("Version", "?")
    except (ValueError, KeyError, TypeError) as exc:
        return Check("podman", FAIL, f"podman info printed no usable JSON ({exc})", "apt-get install podman"), {}
    name = runtime.get("name", "?")
    if name != "runc":
        fix = "apt-get install runc" if host.which("runc") is None else SETUP
        detail = f"podman {version} uses the {name} runtime, the lab needs runc ({host.containers_conf}: runtime)"
        return Check("podman", FAIL, detail, fix), info
    if rootless:
        return Check("podman", FAIL, f"podman {version} runs rootless; the lab needs rootful podman", AS_ROOT), info
    backend = info["host"].get("networkBackend") or "netavark"
    runc = (runtime.get("version") or "").splitlines()[0:1]
    detail = f"podman {version}, {runc[0] if runc else 'runc'}, rootful, network backend {backend}"
    return Check("podman", OK, detail), info


def check_network(host: Host, scratch: Scratch, podman_ok: bool) -> Check:
    if not podman_ok:
        return Check("network", SKIPPED, "not tried: podman does not work")
    name = scratch.network()
    result = host.podman("network", "create", "--internal", "--label", f"{SCRATCH_LABEL}=1", name, timeout=60)
    if result.rc != 0:
        return Check("network", FAIL, f"podman network create --internal failed: {result.tail()}", _fix_for(result))
    inspected = host.podman("network", "inspect", name, "--format", "{{.Internal}} {{.Driver}}", timeout=30)
    if inspected.rc != 0:
        return Check("network", FAIL, f"podman network inspect {name} failed: {inspected.tail()}", _fix_for(inspected))
    return Check("network", OK, f"podman network create --internal works ({name}: {inspected.stdout.strip()})")


def network_helpers(host: Host, info: dict) -> tuple[list[str], list[str]]:
    """(found, missing) among netavark, aardvark-dns and a firewall tool (iptables or nft), each one run."""
    found, missing = [], []
    backend_info = info.get("host", {}).get("networkBackendInfo") or {}
    dirs = _helper_dirs(host) or list(HELPER_DIRS)  # a helper_binaries_dir replaces podman's defaults
    known = {"netavark": backend_info.get("path"), "aardvark-dns": (backend_info.get("dns") or {}).get("path")}
    for name in ("netavark", "aardvark-dns"):
        path = known[name] or next((hit for d in dirs if (hit := host.which_in(name, d))), None)
        version = host.run([path, "--version"], timeout=30) if path else None
        if version is not None and version.rc == 0:
            found.append(f"{name} ({path})")
        else:
            missing.append(name)
    firewall = next((tool for tool in ("iptables", "nft") if host.which(tool)), None)
    if firewall:
        found.append(firewall)
    else:
        missing.append("iptables")
    return found, missing


def _helper_dirs(host: Host) -> list[str]:
    """helper_binaries_dir from the project's containers.conf, if it sets one."""
    try:
        document = tomllib.loads(host.containers_conf.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return []
    dirs = document.get("engine", {}).get("helper_binaries_dir", [])
    return [str(item) for item in dirs] if isinstance(dirs, list) else []


def check_container_dns(host: Host, scratch: Scratch, info: dict, network_ok: bool) -> Check:
    name = "container-dns"
    backend = info.get("host", {}).get("networkBackend") or "netavark"
    if backend == "netavark":
        found, missing = network_helpers(host, info)
        if missing:
            detail = f"missing {', '.join(missing)}: podman cannot start containers on the lab network"
            if "aardvark-dns" in missing and "netavark" not in missing:
                detail = f"missing {', '.join(missing)}: containers would not resolve each other by name"
            return Check(name, FAIL, detail, f"apt-get install {' '.join(missing)}")
    else:
        found = [f"network backend {backend}"]
    if not network_ok:
        return Check(name, SKIPPED, f"not tried: no network; found {', '.join(found)}")
    image = lab_image(host)
    if image is None:
        detail = (
            f"found {', '.join(found)}; name resolution between containers not tried, there is no "
            f"{LAB_IMAGE_REPO} image yet (gpuforge lab prepare builds it; doctor then checks it)"
        )
        return Check(name, PARTIAL, detail)
    return _resolve_each_other(host, scratch, image, scratch.networks[-1])


def lab_image(host: Host) -> str | None:
    result = host.podman(
        "images", "--filter", f"reference={LAB_IMAGE_REPO}", "--format", "{{.Repository}}:{{.Tag}}", timeout=60
    )
    tags = [line.strip() for line in result.stdout.splitlines() if line.strip() and "<none>" not in line]
    return tags[0] if result.rc == 0 and tags else None


def _resolve_each_other(host: Host, scratch: Scratch, image: str, network: str) -> Check:
    name = "container-dns"
    containers = [scratch.container("a"), scratch.container("b")]
    warnings = []
    for container in containers:
        started = host.podman(
            "run", "-d", "--name", container, "--hostname", container, "--network", network,
            "--label", f"{SCRATCH_LABEL}=1", image, "sleep", "300", timeout=120,
        )  # fmt: skip
        if started.rc != 0:
            return Check(name, FAIL, f"podman run on the network failed: {started.tail()}", _fix_for(started))
        for line in started.stderr.splitlines():
            message = _LOGRUS_MSG.search(line)
            text = message.group(1) if message else line.strip()
            if text and text not in warnings:
                warnings.append(text)
    for here, there in (containers, containers[::-1]):
        resolved = host.podman("exec", here, "getent", "hosts", there, timeout=60)
        if resolved.rc != 0 or not resolved.stdout.strip():
            why = "; ".join(warnings) or resolved.tail()
            detail = f"{here} cannot resolve {there} by name ({why})"
            fix = _fix_for(CommandResult(1, "", why)) if warnings else "apt-get install --reinstall aardvark-dns"
            return Check(name, FAIL, detail, fix)
    return Check(name, OK, f"two containers of {image} resolved each other by name on an internal network")


def _fix_for(result: CommandResult) -> str:
    """The fix podman's own words point at."""
    text = (result.stderr + result.stdout).lower()
    for needle, fix in (
        ("aardvark", "apt-get install aardvark-dns"),
        ("iptables", "apt-get install iptables"),
        ("netavark", "apt-get install netavark"),
        ("runc", SETUP),
        ("oci runtime", SETUP),
        ("ulimit", SETUP),
        ("rlimit", SETUP),
    ):
        if needle in text:
            return fix
    return "apt-get install --reinstall podman netavark aardvark-dns"


def check_debootstrap(host: Host) -> Check:
    path = host.which("debootstrap")
    if path is None:
        return Check(
            "debootstrap", FAIL, "debootstrap is not installed (it builds the lab image)", "apt-get install debootstrap"
        )
    result = host.run([path, "--version"], timeout=30)
    if result.rc != 0:
        return Check(
            "debootstrap", FAIL, f"{path} --version failed: {result.tail()}", "apt-get install --reinstall debootstrap"
        )
    return Check("debootstrap", OK, f"{path}: {result.stdout.strip() or 'runs'}")


def check_ulimits(host: Host) -> Check:
    try:
        document = tomllib.loads(host.containers_conf.read_text(encoding="utf-8"))
    except OSError:
        return Check("ulimits", FAIL, f"{host.containers_conf} is missing", SETUP)
    except tomllib.TOMLDecodeError as exc:
        return Check("ulimits", FAIL, f"{host.containers_conf} does not parse: {exc}", SETUP)
    asked = document.get("containers", {}).get("default_ulimits", [])
    hard = host.hard_limits()
    flags = {"nofile": "ulimit -Hn", "nproc": "ulimit -Hu"}
    found, over = [], []
    for entry in asked if isinstance(asked, list) else []:
        limit, _, values = str(entry).partition("=")
        if limit not in flags:
            continue
        try:
            wanted = max(int(value) for value in values.split(":"))
        except ValueError:
            over.append(f"{entry} is not name=soft:hard")
            continue
        have = hard.get(limit)
        shown = "unlimited" if have is None else str(have)
        if have is not None and wanted > have:
            over.append(f"{limit} {wanted} > {shown} ({flags[limit]})")
        else:
            found.append(f"{limit} {wanted} <= {shown} ({flags[limit]})")
    if over:
        detail = (
            f"{host.containers_conf} asks more than this host grants, every container start fails: {', '.join(over)}"
        )
        return Check("ulimits", FAIL, detail, SETUP)
    return Check("ulimits", OK, ", ".join(found) or "containers.conf sets no nofile/nproc limits")


def check_disk(host: Host, info: dict) -> Check:
    places = [(".gpuforge", host.state_dir)]
    graph_root = info.get("store", {}).get("graphRoot")
    if graph_root:
        places.append(("podman storage", Path(graph_root)))
    seen, found, short = set(), [], []
    for label, path in places:
        free, device = host.disk(path)
        if device in seen:
            continue
        seen.add(device)
        text = f"{label} {path}: {free / GIB:.1f} GiB free"
        (found if free >= DISK_MIN_GIB * GIB else short).append(text)
    if short:
        detail = f"need {DISK_MIN_GIB} GiB free for the lab image, mirror and nodes: {', '.join(short)}"
        where = " ".join(str(path) for _, path in places)
        return Check("disk", FAIL, detail, f"free space; see what uses it: du -xsh {where} | sort -h")
    return Check("disk", OK, ", ".join(found))


def check_memory(host: Host) -> Check:
    available = host.mem_available()
    if available is None:
        return Check("memory", SKIPPED, "no MemAvailable in /proc/meminfo")
    text = f"{available / GIB:.1f} GiB available"
    if available < MEMORY_MIN_GIB * GIB:
        detail = f"{text}, the demo lab needs {MEMORY_MIN_GIB} GiB"
        return Check("memory", FAIL, detail, "stop what uses memory; see: ps aux --sort=-rss | head")
    return Check("memory", OK, text)


def run_checks(host: Host | None = None) -> list[Check]:
    host = host or Host()
    checks = [check_python(host)]
    podman_check, info = check_podman(host)
    checks.append(podman_check)
    with scratch_space(host) as scratch:
        network = check_network(host, scratch, podman_ok=not podman_check.failed)
        checks.append(network)
        checks.append(check_container_dns(host, scratch, info, network_ok=network.status == OK))
    checks += [check_debootstrap(host), check_ulimits(host), check_disk(host, info), check_memory(host)]
    return checks


# -- output ----------------------------------------------------------------------------------------------------


def exit_code(checks: list[Check]) -> int:
    return 1 if any(check.failed for check in checks) else 0


def table(checks: list[Check]) -> str:
    width = max(len(check.name) for check in checks)
    lines = [f"{'CHECK':<{width}}  {'STATUS':<7}  DETAIL"]
    for check in checks:
        lines.append(f"{check.name:<{width}}  {check.status:<7}  {check.detail}")
        if check.failed and check.fix:
            lines.append(f"{'':<{width}}  {'':<7}  fix: {check.fix}")
    lines.append(verdict(checks))
    return "\n".join(lines)


def verdict(checks: list[Check]) -> str:
    failed = [check.name for check in checks if check.failed]
    partial = [check.name for check in checks if check.status == PARTIAL]
    if failed:
        return f"doctor: {len(failed)} of {len(checks)} checks failed ({', '.join(failed)}): run the fix commands above"
    note = f" ({', '.join(partial)} partial)" if partial else ""
    return f"doctor: all {len(checks)} checks passed{note}"


def document(checks: list[Check]) -> dict:
    return {"ok": not any(check.failed for check in checks), "checks": [asdict(check) for check in checks]}


def main(json_output: bool = False, host: Host | None = None, out: Callable[[str], None] = print) -> int:
    """`gpuforge doctor`: the table (or --json), exit 1 when a check failed."""
    checks = run_checks(host)
    out(json.dumps(document(checks), indent=2) if json_output else table(checks))
    return exit_code(checks)


def preflight(command: str, host: Host | None = None, log: Callable[[str], None] = print) -> bool:
    """Before `gpuforge demo` and `lab up`: True when nothing failed; otherwise log the table and why."""
    checks = run_checks(host)
    if not any(check.failed for check in checks):
        log(verdict(checks))
        return True
    log(table(checks))
    log(f"gpuforge {command}: not started, this machine fails the checks above (--skip-doctor runs it anyway)")
    return False
