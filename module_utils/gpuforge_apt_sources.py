"""apt sources of a vendor repository, for the vendor_apt_repository module: the regex that finds the other
sources of the same URI (takeover), the deb822 .sources text exactly as ansible.builtin.deb822_repository writes
it (so hosts it converged see no change), and the fingerprints of an OpenPGP key file (as `gpg --show-keys` lists
them). And the
distribution archive's components, for the apt_archive_components module: the entries of a release's suites that
list `main`, in the one-line format (sources.list) and in deb822 (.sources), with components appended.

Pure functions; no I/O. Python 3.8+ (they run on the managed node).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError

__all__ = [
    "DEBIAN_ARCHITECTURES",
    "OpenPGPKeyError",
    "deb822_slug",
    "enable_components_deb822",
    "enable_components_one_line",
    "openpgp_fingerprints",
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


def _archive_suite(token: str, release: str) -> bool:
    """Whether a suite is one of the release's archive suites: the release itself or release-<pocket>
    (bookworm-updates, bookworm-security, noble-backports)."""
    return token == release or token.startswith(release + "-")


def enable_components_one_line(text: str, release: str, components: list) -> tuple:
    """(new text, number of archive entries) for a one-line-format file (sources.list(5)): every `deb`/`deb-src` line
    of one of the release's suites that lists component `main` (the distribution's archive; a vendor repository is
    flat or names its own components) gets each missing component appended, before a trailing comment. Comment
    lines, other entries and line endings stay as they are."""
    out = []
    entries = 0
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        ending = line[len(body) :]
        code, hash_, comment = body.partition("#")
        words = code.split()
        if not words or words[0] not in ("deb", "deb-src"):
            out.append(line)
            continue
        rest = code.split(None, 1)[1] if len(words) > 1 else ""
        if rest.lstrip().startswith("["):
            rest = rest.split("]", 1)[1] if "]" in rest else ""
        fields = rest.split()
        if len(fields) < 3 or not _archive_suite(fields[1], release) or "main" not in fields[2:]:
            out.append(line)
            continue
        entries += 1
        missing = [name for name in components if name not in fields[2:]]
        if missing:
            kept = code.rstrip()
            spacing = code[len(kept) :] if hash_ else ""
            code = kept + " " + " ".join(missing) + spacing
        out.append(code + hash_ + comment + ending)
    return "".join(out), entries


_FIELD = re.compile(r"^([A-Za-z0-9-]+)[ \t]*:(.*)$")


def enable_components_deb822(text: str, release: str, components: list) -> tuple:
    """(new text, number of archive entries) for a deb822 .sources file (sources.list(5)): every stanza that is not
    `Enabled: no`, names one of the release's suites and lists component `main` gets each missing component
    appended to its Components field (on the field's last line when it continues over several). Field names are
    case-insensitive; comments, other stanzas and line endings stay as they are."""
    lines = text.splitlines(keepends=True)
    stanzas = []
    current = []
    for index, line in enumerate(lines):
        if line.strip():
            current.append(index)
        elif current:
            stanzas.append(current)
            current = []
    if current:
        stanzas.append(current)
    entries = 0
    for stanza in stanzas:
        fields = {}
        name = None
        for index in stanza:
            line = lines[index]
            if line.startswith("#"):
                continue
            if line[:1] in (" ", "\t") and name is not None:
                fields[name]["last"] = index
                fields[name]["value"] += " " + line.strip()
                continue
            match = _FIELD.match(line.rstrip("\r\n"))
            if match:
                name = match.group(1).lower()
                fields[name] = {"last": index, "value": match.group(2).strip()}
        suites = fields.get("suites", {}).get("value", "").split()
        present = fields.get("components", {}).get("value", "").split()
        if fields.get("enabled", {}).get("value", "yes").lower() in ("no", "false", "0"):
            continue
        if not any(_archive_suite(suite, release) for suite in suites) or "main" not in present:
            continue
        entries += 1
        missing = [component for component in components if component not in present]
        if missing:
            index = fields["components"]["last"]
            body = lines[index].rstrip("\r\n")
            lines[index] = body.rstrip() + " " + " ".join(missing) + lines[index][len(body) :]
    return "".join(lines), entries


class OpenPGPKeyError(ParseError):
    """Bytes that are not an OpenPGP public key (an HTML error page, a truncated download); the message says why."""


_ARMOR_BEGIN = "-----BEGIN PGP PUBLIC KEY BLOCK-----"
_ARMOR_END = "-----END PGP PUBLIC KEY BLOCK-----"
# Packet tags of keys that have a fingerprint (RFC 4880 section 4.3): Public-Key 6, Public-Subkey 14.
_KEY_TAGS = (6, 14)


def _dearmor(data: bytes) -> bytes:
    """The binary packets of an ASCII-armored key file (RFC 4880 section 6.2), every armored block of it in order
    (a file may hold several, as gpg reads them): the base64 lines after each block's armor headers and blank line,
    up to its checksum line (`=XXXX`) or END line. Binary data is returned as it is."""
    text = data.decode("ascii", errors="replace")
    if _ARMOR_BEGIN not in text:
        return data
    packets = b""
    for block in text.split(_ARMOR_BEGIN)[1:]:
        if _ARMOR_END not in block:
            raise OpenPGPKeyError("its ASCII armor has no END line (a truncated download?)")
        lines = block.split(_ARMOR_END, 1)[0].strip("\r\n").splitlines()
        # Armor headers (Version:, Comment:) end at the first blank line; some writers leave none.
        if any(not line.strip() for line in lines):
            lines = lines[[not line.strip() for line in lines].index(True) + 1 :]
        encoded = "".join(line.strip() for line in lines if line.strip() and not line.startswith("="))
        try:
            packets += base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise OpenPGPKeyError(f"its ASCII armor is not base64 ({exc})") from exc
    return packets


def _packets(data: bytes):
    """(tag, body) of each OpenPGP packet (RFC 4880 section 4.2, old and new formats)."""
    position = 0
    while position < len(data):
        first = data[position]
        if not first & 0x80:
            raise OpenPGPKeyError(f"byte {position} starts no OpenPGP packet")
        if first & 0x40:  # new format
            tag = first & 0x3F
            octet = data[position + 1] if position + 1 < len(data) else None
            if octet is None:
                raise OpenPGPKeyError("it ends inside a packet header")
            if octet < 192:
                length, header = octet, 2
            elif octet < 224:
                if position + 2 >= len(data):
                    raise OpenPGPKeyError("it ends inside a packet header")
                length, header = ((octet - 192) << 8) + data[position + 2] + 192, 3
            elif octet == 255:
                length, header = int.from_bytes(data[position + 2 : position + 6], "big"), 6
            else:
                raise OpenPGPKeyError("it has a partial-length packet, which no key packet uses")
        else:  # old format
            tag = (first >> 2) & 0x0F
            kind = first & 0x03
            if kind == 3:
                length, header = len(data) - position - 1, 1
            else:
                size = (1, 2, 4)[kind]
                length, header = int.from_bytes(data[position + 1 : position + 1 + size], "big"), 1 + size
        body = data[position + header : position + header + length]
        if len(body) != length:
            raise OpenPGPKeyError(f"it ends inside a packet (tag {tag}: {len(body)} of {length} bytes)")
        yield tag, body
        position += header + length


def openpgp_fingerprints(data: bytes) -> list:
    """The fingerprints of the public keys and subkeys in an OpenPGP key file, binary or ASCII-armored, uppercased
    hex, in order, without repeats: what `gpg --show-keys --with-colons` lists in its `fpr` records.

    A version 4 key's fingerprint is the SHA-1 of 0x99, the key packet body's length in two octets and the body
    (RFC 4880 section 12.2). Other versions raise OpenPGPKeyError (version 6, RFC 9580, hashes with SHA-256
    under another prefix: no vendor key gpuforge pins is one), as do bytes that hold no public key at all."""
    found = []
    for tag, body in _packets(_dearmor(data)):
        if tag not in _KEY_TAGS:
            continue
        version = body[0] if body else None
        if version != 4:
            raise OpenPGPKeyError(
                f"it holds a version {version} key; gpuforge reads the fingerprints of version 4 keys"
            )
        fingerprint = hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body).hexdigest().upper()
        if fingerprint not in found:
            found.append(fingerprint)
    if not found:
        raise OpenPGPKeyError("it holds no OpenPGP public key")
    return found
