"""The inventory check (kubespray's validate_inventory, written in Python so each check can be tested).

playbooks/validate_inventory.yml runs it once, on the controller, before any host is touched:

    {{ hostvars | gpuforge_inventory_problems(groups, ansible_inventory_sources) }}

returns a list of problems, each ``{severity, host, variable, problem, fix}`` (severity ``error`` or
``warning``), and ``gpuforge_inventory_report`` turns them into one line per problem. The checks:

- the inventory has hosts (an unreadable inventory leaves none), and every host is in a gpuforge group;
- types: integers are integers (``gpuforge_expected_gpu_count: eight`` is an error: ``'eight' | int``
  is 0), and every role option set in the inventory matches the role's meta/argument_specs.yml (type,
  choices, required and unknown keys of list/dict options) before the role runs;
- expected hardware: ``gpuforge_expected_system`` names a system of ``gpuforge_expected_systems``, whose
  GPU SKU, link speeds, GPU count and NUMA groups are consistent (role defaults, or the inventory's tables);
- relations between groups: Slurm compute/login hosts need a controller, subnet-manager hosts must be
  InfiniBand hosts, Spectrum Scale clients need a cluster member and a complete remote cluster;
- IPoIB addresses: valid, with a prefix, not a network or broadcast address, unique across hosts;
- URLs: every ``gpuforge_*_base_url`` is a non-empty http(s)/file URL (other ``gpuforge_*_url`` when set);
- likely typos of known variable names (warnings).

The checks read values the way the play does (``hostvars`` templates on access, role defaults from
roles/ where the inventory sets nothing) and never evaluate a variable they do not check, so a lookup
in some other variable has no side effect here.
"""

from __future__ import annotations

import difflib
import functools
import ipaddress
import json
import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

import yaml

# A checkout keeps this file in filter_plugins/ (collection/ links resolved); an installed gpuforge.cluster collection
# in plugins/filter/. Either way the roles and playbooks the names come from are beside it.
_HERE = Path(__file__).resolve().parent
PROJECT_ROOT = _HERE.parent if (_HERE.parent / "roles").is_dir() else _HERE.parents[1]
EXPECTED_HARDWARE_FILE = "roles/gpuforge/defaults/main/expected_hardware.yml"

# Groups whose hosts have HCAs: the RDMA stack, IPoIB and validation run on them.
NODE_GROUPS = ("gpu_nodes", "storage_nodes", "head_nodes")
# Every group a gpuforge play targets or reads.
KNOWN_GROUPS = (
    *NODE_GROUPS,
    "slurm_controller",
    "slurm_compute",
    "slurm_login",
    "nfs_clients",
    "nfs_servers",
    "spectrum_scale_clients",
    "spectrum_scale_cluster",
    "ib_subnet_manager",
    "monitoring_server",
    "jupyterhub",
    "workload_image_builder",
)
# nvidia_driver derives the kernel module flavour from these (roles/nvidia_driver/vars/main.yml).
GPU_ARCHITECTURES = ("Kepler", "Maxwell", "Pascal", "Volta", "Turing", "Ampere", "Ada", "Hopper", "Blackwell")
LINK_LAYERS = ("InfiniBand", "Ethernet")
# Largest IPoIB MTU per mode: datagram = 4K IB MTU - 4-byte IPoIB header; connected mode's limit.
IPOIB_MTU_MAX = {"datagram": 4092, "connected": 65520}
URL_SCHEMES = ("http", "https", "file")
# Ansible's boolean spellings (ansible.module_utils.parsing.convert_bool).
BOOL_STRINGS = {"y", "yes", "on", "1", "true", "t", "n", "no", "off", "0", "false", "f"}
# Variable-name prefixes gpuforge owns besides the role names (for the typo check).
OWNED_PREFIXES = ("gpuforge_",)
# Variables renamed to say their unit (issue 47): nothing reads the old name, so a site still setting it gets an error
# naming the new one instead of a silently ignored setting.
RETIRED_VARIABLES = {
    "gpuforge_bench_ib_expected_gbps": "gpuforge_bench_ib_expected_gbit_per_s",  # retired name
    "gpuforge_bench_nccl_min_busbw": "gpuforge_bench_nccl_min_busbw_gbyte_per_s",  # retired name
}
# Keys of table variables renamed to say their unit (issue 47): variable -> {old key: new key} in any of its entries.
RETIRED_KEYS = {
    "gpuforge_expected_nccl_single_node_busbw": {"min_busbw_gb_per_s": "min_busbw_gbyte_per_s"},  # retired key
}
# Where the names the project knows are read from (defaults, specs, tasks, templates, the lab inventory).
# library/ and filter_plugins/ in a checkout are plugins/ in an installed collection; missing folders are skipped.
KNOWN_NAME_SOURCES = (
    "roles",
    "playbooks",
    "library",
    "filter_plugins",
    "plugins",
    "src/gpuforge",
    "inventories/lab",
    "lab",
)
KNOWN_NAME_SUFFIXES = (".yml", ".yaml", ".j2", ".py", ".md")

_URL_VARIABLE = re.compile(r"^gpuforge_\w+_url$")
_DIGITS = re.compile(r"^[0-9]+$")
_SIGNED_DIGITS = re.compile(r"^-?[0-9]+$")


class NotEvaluable(Exception):
    """A variable's template cannot be evaluated before the play runs (it needs facts, an undefined var...)."""


_OMIT = object()


# ---------------------------------------------------------------------------------------------------
# Values: plain Python from Ansible's lazy/tagged containers, integer and boolean tests.


def _is_template(value) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def _plain(value):
    """Plain dict/list/str/int/float/bool/None; _OMIT for Ansible's omit; NotEvaluable for undefined markers."""
    kind = type(value).__name__
    if "Omit" in kind or (isinstance(value, str) and value.startswith("__omit_place_holder__")):
        return _OMIT
    if kind.endswith("Marker") or "Undefined" in kind:
        raise NotEvaluable(str(getattr(value, "_undefined_message", None) or "undefined value"))
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, Mapping):
        result = {}
        for key in value:
            item = _plain(value[key])
            if item is not _OMIT:
                result[str(key)] = item
        return result
    if isinstance(value, (list, tuple)):
        return [item for item in (_plain(v) for v in value) if item is not _OMIT]
    return value


def as_int(value) -> int | None:
    """The integer a value really is: ints (not bools) and all-digit strings; None otherwise ('eight', 8.0)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str) and _SIGNED_DIGITS.match(value):
        return int(value)
    return None


def _is_bool(value) -> bool:
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        return value in (0, 1)
    return isinstance(value, str) and value.strip().lower() in BOOL_STRINGS


def _q(value) -> str:
    """A value for a message: strings in double quotes (they survive Ansible's YAML output unescaped)."""
    return json.dumps(value) if isinstance(value, str) else repr(value)


def _close(name: str, choices, cutoff=0.6) -> str:
    match = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1, cutoff=cutoff)
    return f" (did you mean {_q(match[0])}?)" if match else ""


def _one_of(choices, limit=12) -> str:
    names = sorted(str(c) for c in choices)
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


# ---------------------------------------------------------------------------------------------------
# What the project knows: role defaults, argument specs, variable names.


# LibYAML's loader where PyYAML was built with it (its wheels are): the check reads about 66 files of the project on
# every playbook run, 1.1 s of the pure-Python loader on the lab's controller (docs/performance.md).
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _load_yaml(path: Path):
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=_SAFE_LOADER)
    except (OSError, yaml.YAMLError):
        return None


@functools.lru_cache(maxsize=4)
def gpuforge_defaults(root: Path = PROJECT_ROOT) -> dict:
    """The gpuforge role's defaults (roles/gpuforge/defaults/main/*.yml), untemplated."""
    merged: dict = {}
    for path in sorted((root / "roles" / "gpuforge" / "defaults" / "main").glob("*.yml")):
        data = _load_yaml(path)
        if isinstance(data, dict):
            merged.update(data)
    return merged


@functools.lru_cache(maxsize=4)
def argument_specs(root: Path = PROJECT_ROOT) -> dict:
    """{option name: (role, spec)} from every role's meta/argument_specs.yml (entry point main)."""
    specs: dict = {}
    for path in sorted((root / "roles").glob("*/meta/argument_specs.yml")):
        data = _load_yaml(path) or {}
        options = (((data.get("argument_specs") or {}).get("main") or {}).get("options")) or {}
        for name, spec in options.items():
            if isinstance(spec, dict):
                specs.setdefault(name, (path.parts[-3], spec))
    return specs


@functools.lru_cache(maxsize=4)
def role_prefixes(root: Path = PROJECT_ROOT) -> tuple:
    roles = sorted(p.name for p in (root / "roles").iterdir() if p.is_dir()) if (root / "roles").is_dir() else []
    return tuple(OWNED_PREFIXES) + tuple(f"{name}_" for name in roles if name != "gpuforge")


@functools.lru_cache(maxsize=4)
def known_variables(root: Path = PROJECT_ROOT) -> frozenset:
    """Every owned variable name the project defines or reads (defaults, specs, tasks, templates, lab)."""
    prefixes = role_prefixes(root)
    token = re.compile(r"\b(?:" + "|".join(re.escape(p) for p in prefixes) + r")[a-z0-9_]*[a-z0-9]\b")
    names = set(argument_specs(root)) | set(gpuforge_defaults(root))
    for source in KNOWN_NAME_SOURCES:
        base = root / source
        if not base.exists():
            continue
        for path in base.rglob("*"):
            if path.suffix in KNOWN_NAME_SUFFIXES and path.is_file() and "__pycache__" not in path.parts:
                try:
                    names.update(token.findall(path.read_text(encoding="utf-8", errors="replace")))
                except OSError:
                    continue
    return frozenset(names)


# ---------------------------------------------------------------------------------------------------
# One host's variables, evaluated only on request.


class HostView:
    """A host's variables: `raw` (as written) and `variables` (templated on access, like hostvars[host])."""

    def __init__(self, name: str, variables: Mapping, raw: Mapping | None = None):
        self.name = name
        self._variables = variables
        self._raw = raw if raw is not None else variables

    def names(self) -> list[str]:
        return [str(name) for name in self._raw]

    def defines(self, name: str) -> bool:
        return name in self._raw

    def raw(self, name: str):
        return self._raw.get(name)

    def get(self, name: str, default=None):
        """The templated value, plain; `default` when unset or omitted; NotEvaluable when it cannot be templated."""
        if name not in self._raw:
            return default
        try:
            value = _plain(self._variables[name])
        except NotEvaluable:
            raise
        except Exception as exc:  # AnsibleUndefinedVariable, MarkerError, template syntax errors ...
            raise NotEvaluable(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from exc
        return default if value is _OMIT else value


# ---------------------------------------------------------------------------------------------------
# The checks.


class InventoryChecker:
    def __init__(self, hosts: dict, groups: Mapping, *, defaults=None, specs=None, known=None, prefixes=None):
        self.hosts = hosts  # name -> HostView
        self.groups = {str(k): [str(h) for h in (v or [])] for k, v in dict(groups or {}).items()}
        self.defaults = gpuforge_defaults() if defaults is None else defaults
        self.specs = argument_specs() if specs is None else specs
        self.known = known_variables() if known is None else frozenset(known)
        self.prefixes = role_prefixes() if prefixes is None else tuple(prefixes)
        self.problems: list[dict] = []
        self._ipoib: dict = {}  # ip -> [(host, variable)]
        self._owned: list | None = None
        self._unevaluated: set = set()  # (host, variable) already reported as not evaluable

    # -- helpers ------------------------------------------------------------------------------------

    def add(self, severity, host, variable, problem, fix):
        self.problems.append({"severity": severity, "host": host, "variable": variable, "problem": problem, "fix": fix})

    def error(self, host, variable, problem, fix):
        self.add("error", host, variable, problem, fix)

    def warning(self, host, variable, problem, fix):
        self.add("warning", host, variable, problem, fix)

    def members(self, group: str) -> list[str]:
        return self.groups.get(group) or []

    def group_names(self, host: str) -> set[str]:
        return {g for g, hosts in self.groups.items() if host in hosts and g not in ("all", "ungrouped")}

    def value(self, view: HostView, name: str, default=None, *, report=True):
        """The host's templated value of `name` (NotEvaluable -> warning once, returns `default`)."""
        try:
            return view.get(name, default)
        except NotEvaluable as exc:
            if report and (view.name, name) not in self._unevaluated:
                self._unevaluated.add((view.name, name))
                self.warning(
                    view.name,
                    name,
                    f"could not be evaluated before the play runs ({exc}), so it was not checked",
                    "none if it depends on facts (the role checks it when it runs); otherwise define the variables "
                    "its template uses",
                )
            return default

    def effective(self, view: HostView, name: str):
        """(value, where): the inventory's value, else the role default (None for templated defaults)."""
        if view.defines(name):
            return self.value(view, name), "inventory"
        default = self.defaults.get(name)
        return (None if _is_template(default) else default), "default"

    # -- entry point --------------------------------------------------------------------------------

    def run(self, sources=None) -> list[dict]:
        self.check_sources(sources)
        for name, view in self.hosts.items():
            groups = self.group_names(name)
            self.check_groups(view, groups)
            self.check_lab(view)
            self.check_argument_specs(view)
            self.check_expected_hardware(view, groups)
            self.check_gpu_facts(view)
            self.check_slurm(view, groups)
            self.check_benchmark_tools(view, groups)
            self.check_subnet_manager(view, groups)
            self.check_roce_gid_index(view)
            self.check_spectrum_scale(view, groups)
            self.check_ipoib(view)
            self.check_urls(view)
            self.check_typos(view)
            self.check_retired(view)
            self.check_target_python(view)
        self.check_ipoib_duplicates()
        return self.problems

    def check_sources(self, sources):
        sources = [str(s) for s in (sources or [])]
        for source in sources:
            looks_like_path = "," not in source and ("/" in source or source.endswith((".yml", ".yaml", ".ini")))
            if looks_like_path and not Path(source).exists():
                self.error(
                    "(inventory)",
                    source,
                    "does not exist",
                    "pass an existing inventory with -i (inventories/<site>/hosts.yml); for the lab run "
                    "'gpuforge lab up', which writes inventories/lab/hosts.yml",
                )
        if not self.hosts:
            self.error(
                "(inventory)",
                ", ".join(sources) or "-i",
                "has no hosts: it could not be read (see Ansible's 'Unable to parse' warnings above) or lists none",
                "fix the file's YAML/INI syntax or point -i at a site inventory (inventories/sample/ has examples)",
            )

    def check_groups(self, view, groups):
        if not groups & set(KNOWN_GROUPS):
            self.error(
                view.name,
                "group_names",
                f"holds none of the gpuforge groups (the host is in: {', '.join(sorted(groups)) or 'no group'})",
                f"add it to gpu_nodes, storage_nodes or head_nodes (or a role group: {', '.join(KNOWN_GROUPS[3:])})",
            )

    def check_lab(self, view):
        lab = self.value(view, "gpuforge_lab", False)
        if (
            _is_bool(lab)
            and str(lab).lower() in ("true", "yes", "on", "1", "y", "t")
            and not view.defines("gpuforge_lab_mirror_url")
        ):
            self.error(
                view.name,
                "gpuforge_lab_mirror_url",
                "is not set, so inventories/lab/group_vars/all/lab_generated.yml is missing",
                "run 'gpuforge lab up' (or 'make demo') to create the lab and write it",
            )

    # -- types from the roles' argument specs --------------------------------------------------------

    def check_argument_specs(self, view):
        for name in view.names():
            if name in self.specs:
                role, spec = self.specs[name]
                self._check_spec(view.name, name, view.raw(name), spec, role)

    def _check_spec(self, host, path, value, spec, role):
        """Check a value as written (templates inside are skipped: they are checked when the role runs)."""
        if value is None or _is_template(value):
            return
        kind = spec.get("type", "str")
        where = f"roles/{role}/meta/argument_specs.yml"
        if kind == "int" and as_int(value) is None:
            self.error(host, path, f"is {_q(value)}, not a whole number", f"write it as digits ({where}: type int)")
            return
        if kind == "float" and (isinstance(value, bool) or not isinstance(value, (int, float, str))):
            self.error(host, path, f"is {_q(value)}, not a number", f"write it as a number ({where}: type float)")
            return
        if kind == "float" and isinstance(value, str):
            try:
                float(value)
            except ValueError:
                self.error(host, path, f"is {_q(value)}, not a number", f"write it as a number ({where}: type float)")
                return
        if kind == "bool" and not _is_bool(value):
            self.error(host, path, f"is {_q(value)}, not a boolean", f"write true or false ({where}: type bool)")
            return
        if kind == "list":
            if not isinstance(value, (list, str)):
                self.error(host, path, f"is a {type(value).__name__}, not a list", f"write a YAML list ({where})")
                return
            if isinstance(value, list) and (spec.get("elements") or spec.get("options")):
                element = {"type": spec.get("elements", "str"), "options": spec.get("options")}
                for index, item in enumerate(value):
                    self._check_spec(host, f"{path}[{index}]", item, element, role)
            return
        if kind == "dict":
            if not isinstance(value, dict):
                self.error(host, path, f"is a {type(value).__name__}, not a dict", f"write a YAML mapping ({where})")
                return
            self._check_options(host, path, value, spec.get("options"), role)
            return
        choices = spec.get("choices")
        if choices and not isinstance(value, (list, dict)) and str(value) not in [str(c) for c in choices]:
            self.error(
                host,
                path,
                f"is {_q(value)}, not one of {', '.join(_q(str(c)) for c in choices)}{_close(value, choices)}",
                f"use one of the choices ({where})",
            )

    def _check_options(self, host, path, value, options, role):
        if not isinstance(options, dict):
            return
        for key, sub in options.items():
            if isinstance(sub, dict) and sub.get("required") and key not in value:
                self.error(
                    host,
                    f"{path}.{key}",
                    "is missing (required)",
                    f"add {key}: ... to {path} ({sub.get('description', '')})",
                )
        for key, item in value.items():
            if key not in options:
                self.error(
                    host,
                    f"{path}.{key}",
                    f"is not an option of {path}{_close(key, options)}; the role would refuse it",
                    f"use one of: {_one_of(options)} (roles/{role}/meta/argument_specs.yml)",
                )
            elif isinstance(options[key], dict):
                self._check_spec(host, f"{path}.{key}", item, options[key], role)

    # -- expected hardware --------------------------------------------------------------------------

    def check_expected_hardware(self, view, groups):
        host = view.name
        count = None
        if view.defines("gpuforge_expected_gpu_count"):
            raw_count = self.value(view, "gpuforge_expected_gpu_count")
            if raw_count is not None:
                count = as_int(raw_count)
                if count is None or count < 0:
                    self.error(
                        host,
                        "gpuforge_expected_gpu_count",
                        f"is {_q(raw_count)}, not a whole number of GPUs (the int filter would read it as 0)",
                        "write the number of GPUs as digits, e.g. gpuforge_expected_gpu_count: 8",
                    )
                    count = None
        for name in ("gpuforge_expected_retired_pages_max",):
            if view.defines(name):
                raw = self.value(view, name)
                if raw is not None and (as_int(raw) is None or as_int(raw) < 0):
                    self.error(host, name, f"is {_q(raw)}, not a whole number", f"write it as digits, e.g. {name}: 60")
        if view.defines("gpuforge_expected_driver_branch") and not _is_template(
            view.raw("gpuforge_expected_driver_branch")
        ):
            branch = self.value(view, "gpuforge_expected_driver_branch")
            if branch is not None and not _DIGITS.match(str(branch)):
                self.error(
                    host,
                    "gpuforge_expected_driver_branch",
                    f'is {_q(branch)}, not a driver branch (the major version, e.g. "535")',
                    'quote the branch number: gpuforge_expected_driver_branch: "535"',
                )

        systems, systems_from = self.effective(view, "gpuforge_expected_systems")
        skus = self.effective(view, "gpuforge_expected_gpu_skus")[0]
        speeds = self.effective(view, "gpuforge_expected_link_speeds")[0]
        for name, table in (
            ("gpuforge_expected_systems", systems),
            ("gpuforge_expected_gpu_skus", skus),
            ("gpuforge_expected_link_speeds", speeds),
        ):
            if table is not None and not isinstance(table, dict):
                self.error(host, name, f"is a {type(table).__name__}, not a mapping", f"see {EXPECTED_HARDWARE_FILE}")
        systems = systems if isinstance(systems, dict) else {}
        skus = skus if isinstance(skus, dict) else {}
        speeds = speeds if isinstance(speeds, dict) else {}

        if "gpu_nodes" not in groups:  # validate.yml judges GPU nodes only
            return
        system_name = self.value(view, "gpuforge_expected_system")
        tables = ("gpuforge_expected_system", "gpuforge_expected_systems", "gpuforge_expected_gpu_skus")
        if any((host, name) in self._unevaluated for name in tables):
            return  # already reported as not evaluable
        if system_name is None or system_name == "":
            self.warning(
                host,
                "gpuforge_expected_system",
                "is not set, so playbooks/validate.yml cannot judge this GPU node",
                f"set it to one of {_one_of(systems)}, or describe the node with 'gpuforge inventory capture <host>'",
            )
            return
        if not isinstance(system_name, str) or system_name not in systems:
            where = (
                "your inventory's gpuforge_expected_systems" if systems_from == "inventory" else EXPECTED_HARDWARE_FILE
            )
            self.error(
                host,
                "gpuforge_expected_system",
                f"is {_q(system_name)}, not a system of gpuforge_expected_systems{_close(system_name, systems)}",
                f"use one of {_one_of(systems)} ({where}), or describe this node's hardware in the inventory "
                "with 'gpuforge inventory capture <host>'",
            )
            return
        self._check_system(host, system_name, systems[system_name], skus, speeds, count)

    def _check_system(self, host, name, system, skus, speeds, inventory_count):
        var = f"gpuforge_expected_systems.{name}"
        if not isinstance(system, dict):
            self.error(host, var, f"is a {type(system).__name__}, not a mapping", f"see {EXPECTED_HARDWARE_FILE}")
            return
        sku = system.get("gpu_sku")
        if sku is None:
            self.error(
                host, f"{var}.gpu_sku", "is missing", f"name a key of gpuforge_expected_gpu_skus: {_one_of(skus)}"
            )
        elif not isinstance(sku, str) or sku not in skus:
            self.error(
                host,
                f"{var}.gpu_sku",
                f"is {_q(sku)}, which is not a key of gpuforge_expected_gpu_skus{_close(sku, skus)}",
                f"use one of {_one_of(skus)} or add an entry for it to gpuforge_expected_gpu_skus",
            )
        else:
            self._check_sku(host, sku, skus[sku])
        count = as_int(system.get("gpu_count"))
        if system.get("gpu_count") is None or count is None or count < 0:
            self.error(
                host,
                f"{var}.gpu_count",
                f"is {_q(system.get('gpu_count'))}, not a whole number of GPUs",
                f"write the system's GPU count as digits, e.g. {var}.gpu_count: 8",
            )
            count = None
        if count is not None and inventory_count is not None and count != inventory_count:
            self.error(
                host,
                "gpuforge_expected_gpu_count",
                f"is {inventory_count}, but its expected system {name} has gpu_count {count}",
                f"make them agree: set gpuforge_expected_gpu_count: {count} or pick the system with "
                f"{inventory_count} GPUs",
            )
        hcas = system.get("hcas") or []
        names = []
        if not isinstance(hcas, list):
            self.error(host, f"{var}.hcas", "is not a list", "list the HCAs as [{name: mlx5_0, ports: [...]}]")
            hcas = []
        for index, hca in enumerate(hcas):
            path = f"{var}.hcas[{index}]"
            if not isinstance(hca, dict) or not isinstance(hca.get("name"), str):
                self.error(host, path, "has no name", "write {name: mlx5_0, ports: [{port: 1, link: EDR}]}")
                continue
            if hca["name"] in names:
                self.error(host, f"{path}.name", f"{hca['name']} is listed twice", "list each HCA once")
            names.append(hca["name"])
            ports = hca.get("ports") or []
            if not isinstance(ports, list):
                self.error(host, f"{path}.ports", "is not a list", "write ports: [{port: 1, link: EDR}]")
                continue
            for pindex, port in enumerate(ports):
                ppath = f"{path}.ports[{pindex}]"
                if not isinstance(port, dict):
                    self.error(host, ppath, "is not a mapping", "write {port: 1, link: EDR}")
                    continue
                number = as_int(port.get("port", 1))
                if number is None or number < 1:
                    self.error(
                        host, f"{ppath}.port", f"is {_q(port.get('port'))}, not a port number", "ports count from 1"
                    )
                link = port.get("link")
                if link is not None and (not isinstance(link, str) or link not in speeds):
                    self.error(
                        host,
                        f"{ppath}.link",
                        f"is {_q(link)}, which is not a key of gpuforge_expected_link_speeds{_close(link, speeds)}",
                        f"use one of {_one_of(speeds)} or add it to gpuforge_expected_link_speeds",
                    )
                elif link is not None:
                    self._check_link_speed(host, link, speeds[link])
        self._check_numa(host, var, system.get("numa_affinity"), count, names)
        if "peermem" in system and not _is_bool(system["peermem"]):
            self.error(host, f"{var}.peermem", f"is {_q(system['peermem'])}, not a boolean", "write true or false")

    def _check_numa(self, host, var, groups, count, hca_names):
        if groups is None:
            return
        if not isinstance(groups, list):
            self.error(host, f"{var}.numa_affinity", "is not a list", "write [{gpus: [0, 1], hcas: [mlx5_0], numa: 0}]")
            return
        seen: dict = {}
        for index, group in enumerate(groups):
            path = f"{var}.numa_affinity[{index}]"
            if not isinstance(group, dict):
                self.error(host, path, "is not a mapping", "write {gpus: [0, 1], hcas: [mlx5_0], numa: 0}")
                continue
            numa = as_int(group.get("numa"))
            if numa is None or numa < 0:
                self.error(
                    host, f"{path}.numa", f"is {_q(group.get('numa'))}, not a NUMA node number", "write e.g. numa: 0"
                )
            for gpu in group.get("gpus") or []:
                number = as_int(gpu)
                if number is None or number < 0 or (count is not None and number >= count):
                    limit = f"0..{count - 1}" if count else "0 and up"
                    self.error(
                        host, f"{path}.gpus", f"lists GPU {_q(gpu)}, but the system's GPUs are {limit}", "fix the index"
                    )
                elif number in seen:
                    self.error(
                        host, f"{path}.gpus", f"lists GPU {number} again (also in group {seen[number]})", "list it once"
                    )
                else:
                    seen[number] = index
            for hca in group.get("hcas") or []:
                if hca not in hca_names:
                    self.error(
                        host,
                        f"{path}.hcas",
                        f"names {_q(hca)}, which is not one of the system's HCAs ({', '.join(hca_names) or 'none'})",
                        "name an HCA of the system's hcas list, or add it there",
                    )

    def _check_sku(self, host, name, sku):
        var = f"gpuforge_expected_gpu_skus.{name}"
        if not isinstance(sku, dict):
            self.error(host, var, f"is a {type(sku).__name__}, not a mapping", f"see {EXPECTED_HARDWARE_FILE}")
            return
        for key in ("memory_mib", "pcie_gen_max", "pcie_width_max", "nvlink_links"):
            if key in sku and not _is_template(sku[key]) and (as_int(sku[key]) is None or as_int(sku[key]) < 0):
                self.error(host, f"{var}.{key}", f"is {_q(sku[key])}, not a whole number", f"write {key} as digits")
        for key in ("ecc", "persistence_mode"):
            if key in sku and not _is_template(sku[key]) and not _is_bool(sku[key]):
                self.error(host, f"{var}.{key}", f"is {_q(sku[key])}, not a boolean", "write true or false")

    def _check_link_speed(self, host, name, speed):
        var = f"gpuforge_expected_link_speeds.{name}"
        if not isinstance(speed, dict):
            self.error(host, var, "is not a mapping", "write {rate_gbit_per_s: 100, link_layer: InfiniBand}")
            return
        if "rate_gbps" in speed:  # the retired key of the link rate (Gb/s)
            self.error(
                host, f"{var}.rate_gbps", "was renamed to rate_gbit_per_s (retired key)", "write rate_gbit_per_s"
            )
        rate = speed.get("rate_gbit_per_s")
        numeric = not isinstance(rate, bool) and isinstance(rate, (int, float)) and rate > 0
        if not numeric and not (isinstance(rate, str) and _DIGITS.match(rate)):
            self.error(
                host, f"{var}.rate_gbit_per_s", f"is {_q(rate)}, not a rate in Gb/s", "write e.g. rate_gbit_per_s: 100"
            )
        if speed.get("link_layer") not in LINK_LAYERS:
            self.error(
                host,
                f"{var}.link_layer",
                f"is {_q(speed.get('link_layer'))}, not one of {', '.join(LINK_LAYERS)}",
                "write the link layer as ibstat prints it",
            )

    def check_gpu_facts(self, view):
        host = view.name
        if view.defines("gpuforge_gpu_architecture"):
            arch = self.value(view, "gpuforge_gpu_architecture")
            if arch not in (None, "") and arch not in GPU_ARCHITECTURES:
                self.error(
                    host,
                    "gpuforge_gpu_architecture",
                    f"is {_q(arch)}, not a GPU generation{_close(arch, GPU_ARCHITECTURES)}: nvidia_driver would pick "
                    "the wrong kernel module flavour",
                    f"use one of {', '.join(GPU_ARCHITECTURES)}",
                )
        if view.defines("gpuforge_gpu_nvswitch"):
            nvswitch = self.value(view, "gpuforge_gpu_nvswitch")
            if nvswitch is not None and not _is_bool(nvswitch):
                self.error(host, "gpuforge_gpu_nvswitch", f"is {_q(nvswitch)}, not a boolean", "write true or false")

    # -- groups that need each other ----------------------------------------------------------------

    def _group_setting(self, view, name, default):
        value = self.value(view, name, default) if view.defines(name) else default
        return value if isinstance(value, str) and value else default

    def check_slurm(self, view, groups):
        controller = self._group_setting(view, "slurm_controller_group", "slurm_controller")
        for role_group in (
            self._group_setting(view, "slurm_compute_group", "slurm_compute"),
            self._group_setting(view, "slurm_login_group", "slurm_login"),
        ):
            if role_group in groups and not self.members(controller):
                self.error(
                    view.name,
                    f"{controller} (group)",
                    f"has no hosts, but the host is in {role_group}: slurmd and the Slurm clients need the "
                    "slurmctld host",
                    f"add the head node that runs slurmctld to {controller}, or take the host out of {role_group}",
                )
                return

    # The tools validation and the benchmarks run on GPU nodes, and the variable naming each one's path: by default
    # the benchmark_tools role's builds (roles/gpuforge/defaults/main/benchmark_tools.yml).
    BENCHMARK_TOOLS = (
        ("gpuforge_bench_nccl_binary", "nccl-tests' all_reduce_perf"),
        ("gpuforge_nvbandwidth_executable", "nvbandwidth"),
        # Absent, the p2p benchmark is reported skipped ("not found"): a plan with an unjudged benchmark.
        ("gpuforge_bench_p2p_binary", "p2pBandwidthLatencyTest"),
    )

    def check_benchmark_tools(self, view, groups):
        """A GPU node whose benchmark_tools role is off runs only tools the inventory names: the role's default paths
        would not exist there (validate.yml and benchmark.yml would fail on a tool nothing installed)."""
        if "gpu_nodes" not in groups or not view.defines("benchmark_tools_enabled"):
            return
        enabled = self.value(view, "benchmark_tools_enabled", True)
        if not (enabled is False or (isinstance(enabled, str) and enabled.strip().lower() in ("false", "no", "0"))):
            return
        for variable, tool in self.BENCHMARK_TOOLS:
            if not view.defines(variable):
                self.error(
                    view.name,
                    variable,
                    f"is the benchmark_tools role's build of {tool}, but benchmark_tools_enabled is false: nothing "
                    "installs it on this host",
                    f"set {variable} to the path of the site's own {tool} build, or set benchmark_tools_enabled: true",
                )

    def check_roce_gid_index(self, view):
        """One GID index on a host with RoCE ports: the one the GDR loopback benchmark gives ib_write_bw -x
        (gpuforge_gdr_gid_index; null: validate.yml uses roce_qos_gid_index) is the one validation checks is RoCE v2
        (roce_qos_gid_index, default the roce_qos role's). Two values would benchmark a GID nothing checked."""
        ports = self.value(view, "roce_qos_ports", report=False)
        benchmark = as_int(self.value(view, "gpuforge_gdr_gid_index", report=False))
        if not ports or benchmark is None:
            return
        roce_defaults = _load_yaml(PROJECT_ROOT / "roles" / "roce_qos" / "defaults" / "main.yml") or {}
        checked = as_int(self.value(view, "roce_qos_gid_index", roce_defaults.get("roce_qos_gid_index")))
        if checked is not None and benchmark != checked:
            self.error(
                view.name,
                "gpuforge_gdr_gid_index",
                f"is {benchmark}, but roce_qos_gid_index (the GID index validation checks is RoCE v2) is {checked}: "
                "the benchmark would use a GID nothing checked",
                f"set gpuforge_gdr_gid_index to {checked} or leave it null (validation then uses roce_qos_gid_index), "
                "or set roce_qos_gid_index to the index the benchmarks use",
            )

    def check_subnet_manager(self, view, groups):
        sm_group = self._group_setting(view, "mlnx_ofed_subnet_manager_group", "ib_subnet_manager")
        if sm_group not in groups:
            return
        if not groups & set(NODE_GROUPS):
            self.error(
                view.name,
                f"{sm_group} (group)",
                f"holds this host, which is in none of {', '.join(NODE_GROUPS)}: OpenSM needs an InfiniBand host "
                "(the groups whose hosts get the RDMA stack and IPoIB)",
                f"add it to storage_nodes or head_nodes (the host whose HCA runs OpenSM), or take it out of {sm_group}",
            )
            return
        systems = self.effective(view, "gpuforge_expected_systems")[0]
        speeds = self.effective(view, "gpuforge_expected_link_speeds")[0]
        name = self.value(view, "gpuforge_expected_system", report=False)
        system = systems.get(name) if isinstance(systems, dict) and isinstance(name, str) else None
        if not isinstance(system, dict) or not isinstance(speeds, dict) or not system.get("hcas"):
            return
        layers = {
            (speeds.get(port.get("link")) or {}).get("link_layer")
            for hca in system.get("hcas") or []
            if isinstance(hca, dict)
            for port in hca.get("ports") or []
            if isinstance(port, dict)
        }
        if "InfiniBand" not in layers:
            self.error(
                view.name,
                f"{sm_group} (group)",
                f"holds this host, but its expected system {name} has only Ethernet (RoCE) ports: "
                "a subnet manager needs an InfiniBand port",
                f"take it out of {sm_group} (RoCE needs no subnet manager) or put an InfiniBand host there",
            )

    def check_spectrum_scale(self, view, groups):
        if "spectrum_scale_clients" not in groups:
            return
        cluster = self._group_setting(view, "spectrum_scale_client_cluster_group", "spectrum_scale_cluster")
        if not self.members(cluster):
            # An error where the inventory configures the client role; an inventory that only names the clients
            # (for the Kubernetes add-ons' facts) can live without it until storage.yml runs.
            configures = any(name.startswith("spectrum_scale_client_") for name in view.names())
            self.add(
                "error" if configures else "warning",
                view.name,
                f"{cluster} (group)",
                "has no hosts, but the host is a Storage Scale client: the role runs the cluster commands "
                "(mmaddnode, mmchconfig) on a member of the existing cluster",
                f"put a node of the existing Storage Scale cluster (e.g. its quorum-manager) in {cluster}",
            )
        filesystems = self.value(view, "spectrum_scale_client_remote_filesystems", [])
        if not filesystems:
            return
        remote = self.value(view, "spectrum_scale_client_remote_cluster", {})
        missing = [key for key in ("name", "contact_nodes") if not (isinstance(remote, dict) and remote.get(key))]
        if missing:
            self.error(
                view.name,
                "spectrum_scale_client_remote_cluster",
                f"has no {' or '.join(missing)}, but spectrum_scale_client_remote_filesystems mounts remote file "
                "systems (mmremotecluster add needs both)",
                "set spectrum_scale_client_remote_cluster: {name: <owning cluster>, contact_nodes: <node1,node2>} "
                "as 'mmremotecluster show' prints them",
            )

    # -- IPoIB --------------------------------------------------------------------------------------

    def check_ipoib(self, view):
        host = view.name
        if not view.defines("ipoib_interfaces"):
            return
        interfaces = self.value(view, "ipoib_interfaces", [])
        if interfaces is None:
            return
        if not isinstance(interfaces, list):
            if _is_template(view.raw("ipoib_interfaces")):  # a literal non-list is reported by the spec check
                self.error(host, "ipoib_interfaces", f"is a {type(interfaces).__name__}, not a list", "write a list")
            return
        ports = set()
        for index, entry in enumerate(interfaces):
            var = f"ipoib_interfaces[{index}]"
            if not isinstance(entry, dict):
                continue  # the spec check names it
            if not entry.get("name") and not entry.get("hca"):
                self.error(
                    host,
                    var,
                    "names neither the interface (name) nor the HCA (hca)",
                    "add name: ib1, or hca: mlx5_1 with port: 1",
                )
            key = entry.get("name") or f"{entry.get('hca')}/{entry.get('port', 1)}"
            if key in ports:
                self.error(host, var, f"configures {key} a second time", "give each interface one entry")
            ports.add(key)
            self._check_ipoib_mtu(view, var, entry)
            address = entry.get("address")
            if address is None:
                continue  # required: reported by the spec check
            self._check_ipoib_address(host, f"{var}.address", address)

    def _check_ipoib_mtu(self, view, var, entry):
        """The MTU must fit the mode: datagram carries one IB MTU (4096) less the 4-byte header, connected 65520."""
        mode = entry.get("mode") or self.value(view, "ipoib_mode", "datagram")
        mtu_var = f"{var}.mtu" if "mtu" in entry else "ipoib_mtu"
        mtu = as_int(entry["mtu"] if "mtu" in entry else self.value(view, "ipoib_mtu", 2044, report=False))
        if mtu is None:
            return  # not an integer: reported by the spec check
        limit = IPOIB_MTU_MAX.get(str(mode))
        if limit and not 576 <= mtu <= limit:
            self.error(
                view.name,
                mtu_var,
                f"is {mtu}, outside 576..{limit}, the MTUs IPoIB {mode} mode allows for {var}",
                "use 2044 (2K IB MTU) or 4092 (4K IB MTU, if the subnet manager's partition allows it) in datagram "
                "mode, up to 65520 in connected mode",
            )

    def _check_ipoib_address(self, host, var, address):
        text = str(address).strip()
        if "/" not in text:
            self.error(
                host, var, f"is {_q(text)}, which has no prefix length", "write it in CIDR form, e.g. 198.51.100.11/24"
            )
            return
        try:
            interface = ipaddress.ip_interface(text)
        except ValueError as exc:
            self.error(host, var, f"is {_q(text)}, not an IP address with a prefix ({exc})", "e.g. 198.51.100.11/24")
            return
        network, ip = interface.network, interface.ip
        if network.prefixlen < 1:
            self.error(host, var, f"is {text}, a prefix of 0 (every address)", "use the subnet's prefix, e.g. /24")
            return
        if ip.is_unspecified or ip.is_loopback or ip.is_multicast:
            self.error(host, var, f"is {text}, which cannot be a host address", "use an address of the IPoIB subnet")
            return
        if ip.version == 4 and network.prefixlen <= 30 and ip in (network.network_address, network.broadcast_address):
            which = "network" if ip == network.network_address else "broadcast"
            self.error(
                host,
                var,
                f"is {text}, the {which} address of {network}, not a host address",
                f"use a host address between {network.network_address + 1} and {network.broadcast_address - 1}",
            )
            return
        self._ipoib.setdefault(str(ip), []).append((host, var))

    def check_ipoib_duplicates(self):
        for ip, owners in self._ipoib.items():
            if len(owners) < 2:
                continue
            for host, var in owners:
                others = [f"{h} ({v})" if h != host else v for h, v in owners if (h, v) != (host, var)]
                self.error(
                    host,
                    var,
                    f"{ip} is also the IPoIB address of {', '.join(others)}",
                    "give every host and interface its own address",
                )

    # -- URLs ---------------------------------------------------------------------------------------

    def check_urls(self, view):
        names = {n for n in self.defaults if _URL_VARIABLE.match(n)}
        names |= {n for n in view.names() if _URL_VARIABLE.match(n)}
        for name in sorted(names):
            value = self.effective(view, name)[0]
            if view.defines(name) and value is None and _is_template(view.raw(name)):
                continue  # could not be evaluated: value() already warned
            base = name.endswith("_base_url")
            default = self.defaults.get(name)
            example = f" (the default is {default})" if default and not _is_template(default) else ""
            if value is None or value == "":
                if base:
                    self.error(
                        view.name,
                        name,
                        "is empty: packages from this source cannot be found",
                        f"set it to the repository's base URL (http://, https:// or file://){example}",
                    )
                continue
            if not isinstance(value, str):
                self.error(view.name, name, f"is a {type(value).__name__}, not a URL", f"write a URL{example}")
                continue
            parts = urlsplit(value)
            if parts.scheme not in URL_SCHEMES or (parts.scheme != "file" and not parts.netloc) or " " in value:
                self.error(
                    view.name,
                    name,
                    f"is {_q(value)}, not an http(s):// or file:// URL",
                    f"write the full URL with its scheme, e.g. https://mirror.example.com/...{example}",
                )
            elif base and value.endswith("/"):
                self.warning(
                    view.name,
                    name,
                    f"ends with '/' ({value}); the roles append '/<path>'",
                    "drop the trailing slash",
                )

    # -- typos --------------------------------------------------------------------------------------

    # -- the managed node's Python ----------------------------------------------------------------------
    # gpuforge's ansible-core (2.19, meta/runtime.yml) runs its modules on Python 3.8 or newer on the node: ansible-core
    # 2.17 removed Python 2.7 and 3.6 as target Pythons (ansible/ansible PR 81866, "ansible-core 2.17 changelog and
    # porting guide", ansible/ansible issue 83054). RHEL 7 has only Python 2.7 and 3.6. RHEL 8's python3 and
    # /usr/libexec/platform-python are 3.6 (Red Hat, "Using Python in Red Hat Enterprise Linux 8"); a newer Python
    # from AppStream runs the other modules but has no dnf bindings (python3-dnf is built for platform-python only),
    # and ansible.builtin.dnf's respawn on platform-python cannot run either: "Could not import the dnf python module"
    # (ansible/ansible issues 82068, 83357, 83597; AlmaLinux cloud-images issue 236: ansible-core 2.16 is the last
    # that manages EL 8 packages). The lab's rhel8 shape reproduces that failure (tests/lab/test_rhel8_shape.py).
    SUPPORTED_RELEASES = "Debian 12, Ubuntu 22.04 and 24.04, and RHEL 9"
    _OLD_INTERPRETER = re.compile(r"(^|/)(python2(\.[0-9]+)?|python3\.[0-7]|platform-python)$")

    def _fact(self, view, name):
        """A fact the inventory or the fact cache holds for the host (ansible_facts.<name>, or ansible_<name>)."""
        facts = self.value(view, "ansible_facts", None, report=False) if view.defines("ansible_facts") else None
        if isinstance(facts, Mapping) and facts.get(name) not in (None, ""):
            return str(facts[name])
        if view.defines(f"ansible_{name}"):
            value = self.value(view, f"ansible_{name}", None, report=False)
            return None if value in (None, "") else str(value)
        return None

    def check_target_python(self, view):
        """A host ansible-core cannot run modules on is refused before any play touches it: RHEL 7 and RHEL 8 (known
        from the fact cache or the inventory), or an interpreter the inventory names that is older than Python 3.8."""
        host = view.name
        family, major = self._fact(view, "os_family"), self._fact(view, "distribution_major_version")
        interpreter = (
            self.value(view, "ansible_python_interpreter", None) if view.defines("ansible_python_interpreter") else None
        )
        if family == "RedHat" and major is not None and major.isdigit() and int(major) <= 7:
            self.error(
                host,
                "ansible_facts.distribution_major_version",
                f"is {major} (RHEL {major} or a rebuild): its Pythons are 2.7 and 3.6, which ansible-core 2.17 and "
                "later cannot run modules on (gpuforge's ansible-core 2.19 needs Python 3.8 or newer on the node)",
                f"gpuforge supports {self.SUPPORTED_RELEASES}: upgrade the host, or leave it out of the inventory",
            )
            return
        if family == "RedHat" and major == "8":
            self.error(
                host,
                "ansible_facts.distribution_major_version",
                "is 8 (RHEL 8 or a rebuild): its dnf Python bindings exist only for platform-python 3.6, which "
                "ansible-core 2.17 and later cannot run modules on, so gpuforge's package installs "
                "(ansible.builtin.dnf) fail there even with a newer Python installed",
                f"gpuforge supports {self.SUPPORTED_RELEASES}: upgrade the host to RHEL 9, or leave it out of the "
                "inventory",
            )
            return
        if not isinstance(interpreter, str):
            return
        if self._OLD_INTERPRETER.search(interpreter.strip()):
            self.error(
                host,
                "ansible_python_interpreter",
                f"is {_q(interpreter)}, a Python older than 3.8: gpuforge's ansible-core 2.19 cannot run modules on it",
                "set ansible_python_interpreter to the host's Python 3.8 or newer (/usr/bin/python3 on "
                f"{self.SUPPORTED_RELEASES}), or unset it so that ansible-core finds it",
            )

    def check_retired(self, view):
        for name in view.names():
            if name in RETIRED_VARIABLES:
                new = RETIRED_VARIABLES[name]
                self.error(view.name, name, f"was renamed to {new} (the unit in its name)", f"rename it to {new}")
        for variable, renamed in RETIRED_KEYS.items():
            table = self.value(view, variable) if view.defines(variable) else None
            for entry_name, entry in table.items() if isinstance(table, Mapping) else ():
                for old, new in renamed.items():
                    if isinstance(entry, Mapping) and old in entry:
                        self.error(
                            view.name,
                            f"{variable}.{entry_name}.{old}",
                            f"was renamed to {new} (the unit in its name)",
                            f"write {new}",
                        )

    def check_typos(self, view):
        if self._owned is None:
            self._owned = sorted(n for n in self.known if n.startswith(self.prefixes))
        owned = self._owned
        for name in view.names():
            if name in self.known or not name.startswith(self.prefixes):
                continue
            match = difflib.get_close_matches(name, owned, n=1, cutoff=0.85)
            if match:
                self.warning(
                    view.name,
                    name,
                    f"is not a variable gpuforge reads; it looks like a typo of {match[0]}",
                    f"rename it to {match[0]} (nothing reads {name}, so the setting has no effect)",
                )


# ---------------------------------------------------------------------------------------------------
# Entry points.


def check_inventory(hosts: Mapping, groups: Mapping, *, raw: Mapping | None = None, sources=None, **tables) -> list:
    """Problems of an inventory: hosts = {name: variables} (plain dicts, or hostvars[name] views).

    raw: {name: variables as written} where `hosts` templates on access (hostvars.raw_get); tables:
    defaults / specs / known / prefixes to check against something other than this checkout's roles.
    """
    views = {str(name): HostView(str(name), hosts[name], (raw or {}).get(name)) for name in hosts}
    return InventoryChecker(views, groups, **tables).run(sources)


def gpuforge_inventory_problems(hostvars, groups, sources=None):
    """{{ hostvars | gpuforge_inventory_problems(groups, ansible_inventory_sources) }}."""
    groups = {str(k): list(v or []) for k, v in dict(groups or {}).items()}
    hosts, raw = {}, {}
    for name in groups.get("all", []):
        hosts[name] = hostvars[name]
        raw[name] = hostvars.raw_get(name) if hasattr(hostvars, "raw_get") else hostvars[name]
    return check_inventory(hosts, groups, raw=raw, sources=list(sources or []))


def gpuforge_inventory_report(problems, severity=None, max_hosts=6, title=None):
    """One line per problem (hosts that share a problem on one line); with a title, one text under it."""
    merged: dict = {}
    for item in problems or []:
        if severity and item.get("severity") != severity:
            continue
        key = (item.get("severity"), item.get("variable"), item.get("problem"), item.get("fix"))
        merged.setdefault(key, []).append(str(item.get("host")))
    lines = []
    for (level, variable, problem, fix), hosts in merged.items():
        shown = ", ".join(hosts[:max_hosts]) + (f" (+{len(hosts) - max_hosts} more)" if len(hosts) > max_hosts else "")
        prefix = "" if severity else f"{str(level).upper()} "
        lines.append(f"{prefix}{shown}: {variable} {problem}. Fix: {fix}.")
    if title is not None:
        return "\n".join(
            [f"{title} ({len(lines)}; host: variable problem. Fix: ...):", *(f"- {line}" for line in lines)]
        )
    return lines


class FilterModule:
    def filters(self):
        return {
            "gpuforge_inventory_problems": gpuforge_inventory_problems,
            "gpuforge_inventory_report": gpuforge_inventory_report,
        }
