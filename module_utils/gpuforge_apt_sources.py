"""apt sources of a vendor repository, for the vendor_apt_repository module: the regex that finds the other
sources of the same URI (takeover), the deb822 .sources text exactly as ansible.builtin.deb822_repository writes
it (so hosts it converged see no change), and the fingerprints in `gpg --show-keys --with-colons` output.

Pure functions; no I/O. Python 3.8+ (they run on the managed node).
"""

from __future__ import annotations

import re

__all__ = [
    "DEBIAN_ARCHITECTURES",
    "deb822_slug",
    "gpg_fingerprints",
    "render_deb822",
    "render_source",
    "repository_uri",
    "same_repository",
    "takeover_pattern",
]

# Debian architecture names a repository URL may end a path segment with (NVIDIA's .../stable/deb/amd64).
DEBIAN_ARCHITECTURES = ("amd64", "arm64", "armhf", "i386", "ppc64el", "s390x")
_ARCH_SEGMENT = re.compile(r"/(" + "|".join(DEBIAN_ARCHITECTURES) + r")(?=/|$)")


def repository_uri(url: str) -> str:
    """The URL with exactly one trailing slash, as the .sources file names it."""
    return re.sub(r"/+$", "", url) + "/"


def takeover_pattern(url: str) -> str:
    """The regex (for re.search over a whole file) that finds a source of the same URI as url.

    The URI, with or without its trailing slash, followed by white space or the end: a longer URI that only shares
    the prefix (".../x86_64-extra/", ".../x86_64/sub/") is another repository. apt expands $(ARCH) in a URI
    (sources.list(5)) and NVIDIA's nvidia-container-toolkit.list is written with it (".../stable/deb/$(ARCH) /"),
    so a Debian architecture segment of the URL also matches a literal "$(ARCH)". No flags: `$` is the end of the
    file (or before its final newline), `\\s` also matches the newline that ends a line.
    """
    escaped = re.escape(re.sub(r"/+$", "", url))
    return _ARCH_SEGMENT.sub(r"/(?:\1|\$\(ARCH\))", escaped) + r"/?(\s|$)"


def same_repository(content: str, url: str) -> bool:
    """Whether a .list/.sources file's content names the repository at url (see takeover_pattern)."""
    return re.search(takeover_pattern(url), content) is not None


def deb822_slug(name: str) -> str:
    """The file name stem deb822_repository gives a repository name: lowercase, runs of `_` and white space
    become `-`, anything but [a-z0-9-] dropped (`cuda` -> `cuda`, `My_Repo.1` -> `my-repo1`)."""
    return re.sub(r"[^a-z0-9-]+", "", re.sub(r"[_\s]+", "-", name.lower()))


def _field_name(option: str) -> str:
    if option == "name":
        return "X-Repolib-Name"
    if option == "uris":
        return "URIs"
    return option.replace("_", "-").title()


def _field_value(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return " ".join(value)
    return str(value)


def render_deb822(options: dict) -> str:
    """One deb822 stanza from deb822_repository-style options ({option: value}), byte for byte as that module
    writes it: options in sorted order of their names (so `components` comes before `name`), None left out,
    lists joined by spaces, booleans yes/no, field names X-Repolib-Name, URIs, else Title-Case with `-`; one
    `Field: value` line each (`Field:` alone for an empty value), every line ending in a newline. A value with a
    newline is written as python-debian writes a multi-line field (each line indented 4 spaces, empty ones `.`)."""
    lines = []
    for option, value in sorted(options.items()):
        if value is None:
            continue
        text = _field_value(value)
        if "\n" in text:
            text = "\n" + "\n".join("    " + (line.strip() or ".") for line in text.strip().splitlines())
        separator = ":" if not text or text.startswith("\n") else ": "
        lines.append(f"{_field_name(option)}{separator}{text}\n")
    return "".join(lines)


def render_source(name: str, url: str, suites: list, components: list, signed_by: str) -> str:
    """The .sources text of one signed repository, as the vendor_repository role's deb822_repository task
    wrote it: Types deb, URIs the URL with one trailing slash, Components only when there are any."""
    return render_deb822(
        {
            "name": name,
            "types": ["deb"],
            "uris": [repository_uri(url)],
            "suites": list(suites),
            "components": list(components) if components else None,
            "signed_by": signed_by,
        }
    )


def gpg_fingerprints(colons: str) -> list:
    """The fingerprints (field 10 of each `fpr` record: primary keys and subkeys) in `gpg --show-keys
    --with-colons` output, uppercased, in order, without repeats (GnuPG's doc/DETAILS)."""
    found = []
    for line in (colons or "").splitlines():
        fields = line.split(":")
        if fields[0] == "fpr" and len(fields) > 9 and fields[9]:
            fingerprint = fields[9].upper()
            if fingerprint not in found:
                found.append(fingerprint)
    return found
