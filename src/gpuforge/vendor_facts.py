"""The vendor facts registry (vendor_facts/README.md): loading, validation, and an apt-like resolver.

The registry records what the vendors publish, with sources, independently of the roles. The cross-check
tests resolve what a role asks for against it, and the lab mirror builds its packages from it.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import yaml

from gpuforge.paths import PROJECT_ROOT

REGISTRY_DIR = PROJECT_ROOT / "vendor_facts"
SCHEMA = 1
EVIDENCE_LEVELS = ("quoted", "documented", "inferred")
PACKAGE_FORMATS = ("deb", "rpm", "none")


class RegistryError(ValueError):
    """A registry file breaks the format; the message names the file and the entry."""


class ResolveError(RuntimeError):
    """What was asked for cannot be installed from the registry's repositories (as apt would refuse it)."""


@dataclass(frozen=True)
class Package:
    """One version of one package in one repository."""

    name: str
    version: str
    repository: str
    depends: tuple[str, ...] = ()
    provides: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    architecture: str = "amd64"
    files: tuple[str, ...] = ()
    units: tuple[str, ...] = ()
    kernel_modules: tuple[str, ...] = ()
    component: str = ""
    source: str = ""
    evidence: str = ""
    note: str = ""
    confirm: str = ""

    @property
    def upstream(self) -> str:
        return self.version.rsplit("-", 1)[0] if "-" in self.version else self.version


@dataclass
class Repository:
    """One registry file: a vendor repository (or fact sheet) for one OS or release."""

    key: str
    path: Path
    title: str
    vendor: str
    os: str
    package_format: str
    source: str
    url: str = ""
    lab_path: str = ""
    signing_key: dict = field(default_factory=dict)
    facts: dict = field(default_factory=dict)
    packages: list[Package] = field(default_factory=list)

    def fact(self, name: str):
        if name not in self.facts:
            raise KeyError(f"{self.key}: no fact {name!r} (has {', '.join(sorted(self.facts)) or 'none'})")
        return self.facts[name]["value"]

    def versions(self, name: str) -> list[str]:
        return sorted({p.version for p in self.packages if p.name == name}, key=VersionKey)

    def package(self, name: str, version: str) -> Package:
        for package in self.packages:
            if package.name == name and package.version == version:
                return package
        raise KeyError(f"{self.key}: no package {name} {version}")


def _require(data: dict, key: str, where: str):
    value = data.get(key)
    if value in (None, "", [], {}):
        raise RegistryError(f"{where}: '{key}' is required")
    return value


def _check_evidence(entry: dict, where: str) -> None:
    _require(entry, "source", where)
    evidence = _require(entry, "evidence", where)
    if evidence not in EVIDENCE_LEVELS:
        raise RegistryError(f"{where}: evidence must be one of {', '.join(EVIDENCE_LEVELS)} (got {evidence!r})")
    if evidence == "inferred" and not entry.get("note"):
        raise RegistryError(f"{where}: an inferred fact needs a 'note' saying what it was inferred from")
    confirm = entry.get("confirm")
    if confirm is not None and not isinstance(confirm, str):
        raise RegistryError(f"{where}: 'confirm' must be a string (got {confirm!r})")
    if evidence == "inferred" and not (confirm or "").strip():
        raise RegistryError(f"{where}: an inferred fact needs 'confirm' naming what would confirm it")


def _expand(relation: str, version: str) -> str:
    """{version}: the package version; {upstream}: without the Debian revision; {branch}: its first field."""
    upstream = version.rsplit("-", 1)[0] if "-" in version else version
    branch = upstream.split(":")[-1].split(".")[0]
    return relation.replace("{version}", version).replace("{upstream}", upstream).replace("{branch}", branch)


def load(path: Path) -> Repository:
    """One registry file, validated (RegistryError names the file and entry at fault)."""
    key = f"{path.parent.name}/{path.stem}"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise RegistryError(f"{key}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise RegistryError(f"{key}: must be a mapping with schema: {SCHEMA}")
    repo = _require(data, "repository", key)
    for name in ("title", "vendor", "os", "package_format", "source"):
        _require(repo, name, f"{key} repository")
    if repo["package_format"] not in PACKAGE_FORMATS:
        raise RegistryError(f"{key}: package_format must be one of {', '.join(PACKAGE_FORMATS)}")
    signing_key = repo.get("key") or {}
    if signing_key:
        _require(signing_key, "source", f"{key} repository key")
    facts = data.get("facts") or {}
    for name, entry in facts.items():
        if not isinstance(entry, dict) or "value" not in entry:
            raise RegistryError(f"{key} fact {name}: needs 'value', 'source' and 'evidence'")
        _check_evidence(entry, f"{key} fact {name}")
    packages = []
    for index, entry in enumerate(data.get("packages") or []):
        where = f"{key} packages[{index}] {entry.get('name', '?')}"
        name = _require(entry, "name", where)
        versions = _require(entry, "versions", where)
        _check_evidence(entry, where)
        for version in versions:
            if not isinstance(version, str):
                raise RegistryError(f"{where}: versions must be quoted strings (got {version!r})")
            packages.append(
                Package(
                    name=name,
                    version=version,
                    repository=key,
                    depends=tuple(_expand(d, version) for d in entry.get("depends") or ()),
                    provides=tuple(_expand(p, version) for p in entry.get("provides") or ()),
                    conflicts=tuple(_expand(c, version) for c in entry.get("conflicts") or ()),
                    architecture=entry.get("architecture", "amd64"),
                    files=tuple(entry.get("files") or ()),
                    units=tuple(entry.get("units") or ()),
                    kernel_modules=tuple(entry.get("kernel_modules") or ()),
                    component=entry.get("component", ""),
                    source=entry["source"],
                    evidence=entry["evidence"],
                    note=entry.get("note", ""),
                    confirm=entry.get("confirm", ""),
                )
            )
    return Repository(
        key=key,
        path=path,
        title=repo["title"],
        vendor=repo["vendor"],
        os=str(repo["os"]),
        package_format=repo["package_format"],
        source=repo["source"],
        url=repo.get("url", ""),
        lab_path=repo.get("lab_path", ""),
        signing_key=signing_key,
        facts=facts,
        packages=packages,
    )


@cache
def load_all(root: Path = REGISTRY_DIR) -> dict[str, Repository]:
    """Every registry file under root, by key '<source>/<os-or-release>'."""
    return {repo.key: repo for repo in (load(path) for path in sorted(root.glob("*/*.yml")))}


def repository(key: str) -> Repository:
    repos = load_all()
    if key not in repos:
        raise KeyError(f"no registry file vendor_facts/{key}.yml (have: {', '.join(sorted(repos))})")
    return repos[key]


# --- Debian version ordering (Debian Policy Manual, section 5.6.12 "Version") ---------------------------


def _order(char: str) -> int:
    if char == "~":
        return -1
    if char.isdigit():
        return 0
    if char.isalpha():
        return ord(char)
    return ord(char) + 256


def _compare_part(a: str, b: str) -> int:
    while a or b:
        a_text = re.match(r"^[^0-9]*", a).group(0)
        b_text = re.match(r"^[^0-9]*", b).group(0)
        for i in range(max(len(a_text), len(b_text))):
            ca = _order(a_text[i]) if i < len(a_text) else 0
            cb = _order(b_text[i]) if i < len(b_text) else 0
            if ca != cb:
                return -1 if ca < cb else 1
        a, b = a[len(a_text) :], b[len(b_text) :]
        a_num = re.match(r"^[0-9]*", a).group(0)
        b_num = re.match(r"^[0-9]*", b).group(0)
        if int(a_num or 0) != int(b_num or 0):
            return -1 if int(a_num or 0) < int(b_num or 0) else 1
        a, b = a[len(a_num) :], b[len(b_num) :]
    return 0


def compare_versions(a: str, b: str) -> int:
    """dpkg's ordering of two version strings: -1, 0 or 1."""

    def split(version: str) -> tuple[int, str, str]:
        epoch, _, rest = version.rpartition(":") if ":" in version else ("0", "", version)
        upstream, _, revision = rest.rpartition("-") if "-" in rest else (rest, "", "0")
        return int(epoch or 0), upstream, revision

    ea, ua, ra = split(a)
    eb, ub, rb = split(b)
    if ea != eb:
        return -1 if ea < eb else 1
    return _compare_part(ua, ub) or _compare_part(ra, rb)


class VersionKey:
    """Sort key in dpkg order."""

    def __init__(self, version: str):
        self.version = version

    def __lt__(self, other: VersionKey) -> bool:
        return compare_versions(self.version, other.version) < 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VersionKey) and compare_versions(self.version, other.version) == 0


# A name may end in an RPM capability qualifier, "system-release(releasever)" (rpm: "Dependencies", Provides).
_RELATION = re.compile(r"^\s*([^\s(]+(?:\([^\s()]+\))?)\s*(?:\(\s*(<<|<=|=|>=|>>)\s*([^\s)]+)\s*\))?\s*$")


def parse_relation(text: str) -> list[tuple[str, str, str]]:
    """'a (>= 1) | b' -> [('a', '>=', '1'), ('b', '', '')]."""
    alternatives = []
    for part in text.split("|"):
        match = _RELATION.match(part)
        if not match:
            raise RegistryError(f"not a Debian relation: {text!r}")
        name, op, version = match.groups()
        alternatives.append((name.split(":")[0], op or "", version or ""))
    return alternatives


def satisfies(version: str, op: str, wanted: str) -> bool:
    if not op:
        return True
    cmp = compare_versions(version, wanted)
    return {"<<": cmp < 0, "<=": cmp <= 0, "=": cmp == 0, ">=": cmp >= 0, ">>": cmp > 0}[op]


# --- apt-like resolution --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pin:
    """One apt preferences stanza: 'Package: <patterns>' / 'Pin: version <glob>' / 'Pin-Priority: <n>'."""

    packages: tuple[str, ...]
    version: str
    priority: int

    def applies(self, package: Package) -> bool:
        named = any(fnmatch.fnmatchcase(package.name, pattern) for pattern in self.packages)
        return named and fnmatch.fnmatchcase(package.version, self.version)


def parse_preferences(text: str) -> list[Pin]:
    """apt_preferences(5) stanzas of the 'Pin: version' kind (the only kind gpuforge writes)."""
    pins = []
    for stanza in re.split(r"\n\s*\n", text.strip()):
        fields = {}
        for line in stanza.splitlines():
            if line.strip() and not line.lstrip().startswith("#") and ":" in line:
                name, _, value = line.partition(":")
                fields[name.strip().lower()] = value.strip()
        if not fields:
            continue
        pin = fields.get("pin", "")
        if not pin.startswith("version "):
            raise ResolveError(f"unsupported apt preferences pin {pin!r} (gpuforge writes 'Pin: version <glob>')")
        pins.append(Pin(tuple(fields["package"].split()), pin.split(None, 1)[1], int(fields["pin-priority"])))
    return pins


@dataclass
class Resolution:
    """What apt would install: name -> chosen Package."""

    chosen: dict[str, Package]

    def version(self, name: str) -> str:
        return self.chosen[name].version

    def names(self) -> set[str]:
        return set(self.chosen)


def _unmet(name: str, chosen: dict[str, Package], candidate: Package | None) -> str:
    """apt's wording for an unmet dependency alternative."""
    if name in chosen:
        return f"{name} {chosen[name].version} is to be installed"
    if candidate is not None:
        return f"{name} {candidate.version} is to be installed"
    return f"{name} is not installable"


def resolve(repos: list[Repository], requests: list[str], preferences: list[Pin] = ()) -> Resolution:
    """Resolve `apt-get install <requests>` against the repositories, as apt would on a host that has
    nothing of them installed: each package's candidate is the highest-priority, then highest, version
    (apt_preferences(5): 500 by default, the pin's priority where one applies; a priority < 0 never
    installs); a request 'name=glob' takes the highest version matching the glob; a dependency is satisfied
    by an already-chosen package or the first alternative whose candidate satisfies it. apt does not
    fall back to an older, non-candidate version, so neither does this: that is what makes an unpinned
    closure float to the newest build."""
    available: dict[str, list[Package]] = {}
    providers: dict[str, list[str]] = {}
    for repo in repos:
        for package in repo.packages:
            available.setdefault(package.name, []).append(package)
            for provided in package.provides:
                providers.setdefault(parse_relation(provided)[0][0], []).append(package.name)

    def priority(package: Package) -> int:
        for pin in preferences:
            if pin.applies(package):
                return pin.priority
        return 500

    def candidate(name: str) -> Package | None:
        options = [p for p in available.get(name, []) if priority(p) >= 0]
        if not options:
            return None
        best = max(priority(p) for p in options)
        return max((p for p in options if priority(p) == best), key=lambda p: VersionKey(p.version))

    chosen: dict[str, Package] = {}
    queue: list[Package] = []
    for request in requests:
        name, _, glob = request.partition("=")
        if glob:
            matching = [p for p in available.get(name, []) if fnmatch.fnmatchcase(p.version, glob)]
            if not matching:
                have = ", ".join(p.version for p in available.get(name, [])) or "none"
                raise ResolveError(f"Version '{glob}' for '{name}' was not found (published: {have})")
            package = max(matching, key=lambda p: VersionKey(p.version))
        else:
            package = candidate(name)
            if package is None:
                raise ResolveError(f"Unable to locate package {name}")
        chosen[name] = package
        queue.append(package)

    while queue:
        package = queue.pop(0)
        for relation in package.depends:
            alternatives = parse_relation(relation)
            if any(
                (name in chosen and satisfies(chosen[name].version, op, version))
                or (not op and any(p in chosen for p in providers.get(name, [])))
                for name, op, version in alternatives
            ):
                continue
            picked = None
            for name, op, version in alternatives:
                if name in chosen:
                    continue  # chosen at another version that does not satisfy this alternative
                found = candidate(name)
                if found is not None and satisfies(found.version, op, version):
                    picked = found
                    break
                if found is None and not op and providers.get(name):
                    picked = candidate(providers[name][0])
                    break
            if picked is None:
                raise ResolveError(
                    f"{package.name} ({package.version}) Depends: {relation}, but "
                    + "; ".join(_unmet(name, chosen, candidate(name)) for name, _, _ in alternatives)
                )
            chosen[picked.name] = picked
            queue.append(picked)

    for package in chosen.values():
        for relation in package.conflicts:
            for name, op, version in parse_relation(relation):
                if name in chosen and name != package.name and satisfies(chosen[name].version, op, version):
                    raise ResolveError(f"{package.name} conflicts with {name} {chosen[name].version}")
    return Resolution(chosen)
