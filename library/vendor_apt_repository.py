#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: one signed vendor apt repository (key, takeover of other sources, deb822 source, pins), in
one call."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vendor_apt_repository
short_description: Add one signed vendor apt repository (key, source, pins, takeover) in one call
description:
  - "In this order, for one repository: the signing key at C(KEYRING_DIR/NAME.asc), kept when it is there
    (and has the sha256 I(key_sha256) when that is given), else downloaded from I(key_url) and checked against
    I(key_sha256); the key's fingerprints read from its OpenPGP packets (as C(gpg --show-keys) lists them)
    and I(key_fingerprint) required among them; every other C(*.list) or C(*.sources) file of I(sources_dir)
    that names the same URI removed (I(take_over)); the deb822 source C(SOURCES_DIR/NAME.sources) with
    C(Signed-By) that key only; the apt preferences file C(PREFERENCES_DIR/NAME.pref) written from
    I(preferences), or removed when that is empty."
  - The source file is byte for byte what C(ansible.builtin.deb822_repository) writes for the same values
    (its field order, C(X-Repolib-Name), mode 0644), so a host that module set up sees no change. It does not
    need python3-debian.
  - Replaces five tasks per repository (C(ansible.builtin.get_url), a C(gpg) command, C(ansible.builtin.find),
    C(ansible.builtin.deb822_repository), C(ansible.builtin.template)/C(ansible.builtin.file)); gpuforge's
    vendor_repository role calls it once per repository.
  - Writes are atomic (a temporary file in the same directory, then a rename) and leave mode 0644. A missing
    key, source or preferences directory is created (mode 0755).
options:
  name:
    description:
      - File name stem of the key (C(NAME.asc)) and preferences (C(NAME.pref)) files, and the source's
        C(X-Repolib-Name).
      - "The source file is C(SLUG.sources), SLUG being the name as C(deb822_repository) turns it into a file
        name: lowercase, runs of C(_) and white space as C(-), other characters but C([a-z0-9-]) dropped
        (the same as NAME for C(cuda) or C(nvidia-container-toolkit))."
      - A letter or digit, then letters, digits, C(_), C(.) and C(-).
    type: str
    required: true
  url:
    description:
      - The repository URL (C(http://), C(https://) or C(file://)); the source names it with exactly one
        trailing slash.
    type: str
    required: true
  suites:
    description: The source's suites (C(/) for a flat repository).
    type: list
    elements: str
    default: ["/"]
  components:
    description: The source's components (none for a flat repository; then the source has no C(Components)).
    type: list
    elements: str
    default: []
  key_url:
    description: Where to download the signing key (C(http://), C(https://), C(ftp://) or C(file://)).
    type: str
    required: true
  key_sha256:
    description:
      - The sha256 of the key file, 64 hex digits. A key file on the host with another checksum is downloaded
        again; a download with another checksum fails.
      - At least one of I(key_sha256) and I(key_fingerprint) is required.
    type: str
    default: ""
  key_fingerprint:
    description:
      - The fingerprint the key must have (primary key or subkey), as C(gpg) prints it; case and spaces do not
        matter. The module computes the fingerprints itself (version 4 keys, RFC 4880 section 12.2), so the host
        needs no gnupg; apt checks the repository's signatures with the key (gpgv or sqv).
    type: str
    default: ""
  key_timeout:
    description: Seconds the key download may take.
    type: int
    default: 30
  preferences:
    description:
      - The text of the apt preferences file (apt_preferences(5)); empty - no preferences file, and one that
        is there is removed.
      - Render it on the controller, for example with C(lookup('ansible.builtin.template', 'preferences.j2')).
    type: str
    default: ""
  take_over:
    description:
      - Remove the other C(.list) and C(.sources) files of I(sources_dir) that name the same URI (apt refuses two
        C(Signed-By) for one URI, "Conflicting values set for option Signed-By").
      - "Same URI: the URL with or without its trailing slash, followed by white space or the end of the file,
        searched in the whole file; a longer URI that only shares the prefix (C(.../x86_64-extra/)) is another
        repository, and a Debian architecture segment of the URL (C(.../deb/amd64)) also matches apt's
        C($(ARCH)) variable."
    type: bool
    default: true
  keyring_dir:
    description: Directory of the key file.
    type: path
    default: /etc/apt/keyrings
  sources_dir:
    description: Directory of the source files.
    type: path
    default: /etc/apt/sources.list.d
  preferences_dir:
    description: Directory of the apt preferences files.
    type: path
    default: /etc/apt/preferences.d
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuforge.cluster.common
attributes:
  check_mode:
    support: full
    details:
      - Writes and removes nothing. A key that would be downloaded is downloaded all the same and checked
        (sha256, fingerprint) in memory, written nowhere; the result says what would change.
  diff_mode:
    support: full
    details:
      - One entry per file that changes - the key (its sha256 before and after), the source, the preferences
        file, each source file taken over (after is empty).
  platform:
    platforms: debian
notes:
  - Runs as root (C(become)) to write under C(/etc/apt).
  - "A change of the source, the preferences or a source taken over needs an C(apt-get update): RV(index_stale)
    says so; the module does not refresh the package index itself."
seealso:
  - module: ansible.builtin.deb822_repository
  - module: ansible.builtin.get_url
"""

EXAMPLES = r"""
- name: Add the CUDA repository, trusting only its key, with version pins
  gpuforge.cluster.vendor_apt_repository:
    name: cuda
    url: https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64
    key_url: https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/3bf863cc.pub
    key_fingerprint: EB693B3035CD5710E231E123A4B469963BF863CC
    preferences: "{{ lookup('ansible.builtin.template', 'preferences.j2') }}"
  register: cuda_repository
  notify: Refresh the apt package index
  become: true

- name: A site repository with suites and components, key pinned by checksum, no pins
  gpuforge.cluster.vendor_apt_repository:
    name: gpuforge-gpfs
    url: https://repo.example.com/gpfs/5.1.9.3/ubuntu
    suites: [jammy]
    components: [main]
    key_url: https://repo.example.com/gpfs/site-repo-key.asc
    key_sha256: 0b6d4e1c5e1bbf4e4b5a2c3d9f8e7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f
    take_over: false
  become: true
"""

RETURN = r"""
key_file:
  description: Path of the key file.
  returned: always
  type: str
  sample: /etc/apt/keyrings/cuda.asc
key_downloaded:
  description: Whether the key was (in check mode, would be) downloaded and written.
  returned: always
  type: bool
  sample: false
key_changed:
  description: Whether the key file was (would be) written or its mode set to 0644.
  returned: always
  type: bool
  sample: false
fingerprints:
  description: The fingerprints of the key (primary key and subkeys, as C(gpg --show-keys) lists them); empty
    when I(key_fingerprint) is not given.
  returned: always
  type: list
  elements: str
  sample: [EB693B3035CD5710E231E123A4B469963BF863CC]
removed_sources:
  description: The source files taken over (removed; in check mode, that would be removed).
  returned: always
  type: list
  elements: str
  sample: [/etc/apt/sources.list.d/cuda-debian12-x86_64.list]
sources_file:
  description: Path of the deb822 source file.
  returned: always
  type: str
  sample: /etc/apt/sources.list.d/cuda.sources
sources:
  description: The text of the source file.
  returned: always
  type: str
  sample: |
    X-Repolib-Name: cuda
    Signed-By: /etc/apt/keyrings/cuda.asc
    Suites: /
    Types: deb
    URIs: https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/
sources_changed:
  description: Whether the source file was (would be) written or its mode set to 0644.
  returned: always
  type: bool
  sample: false
preferences_file:
  description: Path of the apt preferences file.
  returned: always
  type: str
  sample: /etc/apt/preferences.d/cuda.pref
preferences_changed:
  description: Whether the preferences file was (would be) written, removed or its mode set to 0644.
  returned: always
  type: bool
  sample: false
index_stale:
  description: Whether the source file, the preferences file or a source taken over changed, so that apt's
    package index no longer matches them (C(apt-get update) is due).
  returned: always
  type: bool
  sample: false
"""

import hashlib
import os
import re
import stat

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import fetch_url
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_apt_sources import (
    OpenPGPKeyError,
    deb822_slug,
    openpgp_fingerprints,
    render_source,
    same_repository,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import OptionError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_files import file_mode, write_atomic
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_options import show
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import this_host

FILE_MODE = 0o644
DIR_MODE = 0o755
# The CA bundle an HTTPS download is checked against: ca-certificates' file on Debian and Ubuntu, ca-certificates'
# on RHEL.
CA_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt")
# A signing key is a few KiB; a URL that answers with far more is not a key.
MAX_KEY_BYTES = 1024 * 1024
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
FINGERPRINT = re.compile(r"^[0-9A-F]{16,64}$")
URL_SCHEMES = ("http://", "https://", "file://")
KEY_SCHEMES = ("http://", "https://", "ftp://", "file://")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _words(path: str, values) -> list:
    """A list of suites or components: each a non-empty word without white space."""
    for index, value in enumerate(values):
        if not isinstance(value, str) or not value or re.search(r"\s", value):
            raise OptionError(f"{path}[{index}]", f"must be one word without white space, got {show(value)}")
    return list(values)


def check_options(params: dict) -> dict:
    """The options the module acts on, normalised; raises OptionError naming the option."""
    if not NAME.match(params["name"]):
        raise OptionError("name", f"must be a letter or digit, then letters, digits, _ . -, got {show(params['name'])}")
    url = params["url"].strip()
    if not url.startswith(URL_SCHEMES) or re.search(r"\s", url):
        raise OptionError("url", f"must be an http://, https:// or file:// URL without spaces, got {show(url)}")
    key_url = params["key_url"].strip()
    if not key_url.startswith(KEY_SCHEMES):
        raise OptionError("key_url", f"must be an http(s)://, ftp:// or file:// URL, got {show(key_url)}")
    sha256 = (params["key_sha256"] or "").strip().lower()
    if sha256 and not SHA256.match(sha256):
        raise OptionError("key_sha256", f"must be 64 hex digits, got {show(params['key_sha256'])}")
    fingerprint = re.sub(r"\s+", "", params["key_fingerprint"] or "").upper()
    if fingerprint and not FINGERPRINT.match(fingerprint):
        raise OptionError("key_fingerprint", f"must be a hex fingerprint, got {show(params['key_fingerprint'])}")
    if not sha256 and not fingerprint:
        raise OptionError("key_fingerprint", "or key_sha256 is required: a key checked by neither is trusted blindly")
    if not params["suites"]:
        raise OptionError("suites", "must name at least one suite (['/'] for a flat repository)")
    if params["key_timeout"] < 1:
        raise OptionError("key_timeout", f"must be at least 1 second, got {params['key_timeout']}")
    for option in ("keyring_dir", "sources_dir", "preferences_dir"):
        if not os.path.isabs(params[option]):
            raise OptionError(option, f"must be an absolute path, got {show(params[option])}")
    return {
        "url": url,
        "key_url": key_url,
        "sha256": sha256,
        "fingerprint": fingerprint,
        "fingerprint_as_given": (params["key_fingerprint"] or "").strip(),
        "suites": _words("suites", params["suites"]),
        "components": _words("components", params["components"]),
    }


class VendorAptRepository:
    def __init__(self, module: AnsibleModule):
        self.module = module
        self.params = module.params
        name = self.params["name"]
        self.result = {
            "changed": False,
            "key_file": os.path.join(self.params["keyring_dir"], f"{name}.asc"),
            "key_downloaded": False,
            "key_changed": False,
            "fingerprints": [],
            "removed_sources": [],
            "sources_file": os.path.join(self.params["sources_dir"], f"{deb822_slug(name)}.sources"),
            "sources": "",
            "sources_changed": False,
            "preferences_file": os.path.join(self.params["preferences_dir"], f"{name}.pref"),
            "preferences_changed": False,
            "index_stale": False,
        }
        self.diffs: list = []
        try:
            self.options = check_options(self.params)
        except OptionError as exc:
            # The option first, as every gpuforge module's option failure; then where and the fix (the role has
            # no assert of its own on Debian).
            self.fail(
                f"{exc} (vendor repository {show(name)} on {this_host()}). Set the base-URL, key and checksum "
                "variables for this source in the inventory (docs/operator-guide.md)."
            )

    def fail(self, msg: str, **extra) -> None:
        self.module.fail_json(msg=msg, **extra, **self.result)

    # -- files

    def read(self, path: str):
        """The bytes of path, or None where there is none."""
        try:
            with open(path, "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            self.fail(f"could not read {path} on {this_host()}: {exc}")
        return None

    def ensure_dir(self, path: str) -> None:
        if os.path.isdir(path):
            return
        try:
            os.makedirs(path, DIR_MODE)
        except OSError as exc:
            self.fail(f"could not create {path} on {this_host()}: {exc}")

    def write(self, path: str, data: bytes) -> None:
        """Replace path with data atomically (a temporary file beside it, then a rename), mode 0644."""
        self.ensure_dir(os.path.dirname(path))
        try:
            write_atomic(self.module, path, data, FILE_MODE)
        except OSError as exc:
            self.fail(f"could not write {path} on {this_host()}: {exc}")

    def remove(self, path: str) -> None:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            self.fail(f"could not remove {path} on {this_host()}: {exc}")

    def put(self, path: str, data: bytes) -> bool:
        """path holds data with mode 0644 (in check mode: would); whether that changed anything."""
        current = self.read(path)
        content_changed = current != data
        changed = content_changed or file_mode(path) != FILE_MODE
        if content_changed:
            self.diff(path, current, data)
        if changed and not self.module.check_mode:
            if content_changed:
                self.write(path, data)
            else:
                try:
                    os.chmod(path, FILE_MODE)
                except OSError as exc:
                    self.fail(f"could not set mode 0644 on {path} on {this_host()}: {exc}")
        return changed

    def diff(self, path: str, before, after) -> None:
        """A diff entry for path; before/after are the file's bytes (None: no file) or already text."""

        def text(data) -> str:
            return data if isinstance(data, str) else (data or b"").decode("utf-8", "replace")

        self.diffs.append({"before_header": path, "after_header": path, "before": text(before), "after": text(after)})

    # -- 1. the key, 2. its fingerprint

    def download(self) -> bytes:
        url = self.options["key_url"]
        response, info = fetch_url(self.module, url, timeout=self.params["key_timeout"])
        status = info.get("status")
        # A file:// or ftp:// answer has no HTTP status.
        if response is None or status not in (200, None):
            no_bundle = url.startswith("https://") and not any(os.path.exists(path) for path in CA_BUNDLES)
            self.fail(
                f"{this_host()}: could not download the key from {url} (status {status}: {info.get('msg', '')}). "
                + (
                    f"This host has no CA certificate bundle ({CA_BUNDLES[0]}): install ca-certificates."
                    if no_bundle
                    else "Check the key URL, and that this host reaches it (proxy, mirror of an air-gapped site)."
                )
            )
        data = response.read(MAX_KEY_BYTES + 1)
        if not data or len(data) > MAX_KEY_BYTES:
            size = "nothing" if not data else f"more than {MAX_KEY_BYTES} bytes"
            self.fail(f"{this_host()}: the key URL {url} answered with {size}, not a key. Check the key URL.")
        return data

    def check_fingerprint(self, data: bytes) -> None:
        """key_fingerprint is among the fingerprints of the key's OpenPGP packets (the key file's, or a download's)."""
        fingerprint = self.options["fingerprint"]
        if not fingerprint:
            return
        try:
            found = openpgp_fingerprints(data)
        except OpenPGPKeyError as exc:
            self.fail(
                f"{this_host()}: the key at {self.options['key_url']} is not an OpenPGP public key that can be "
                f"checked against {self.options['fingerprint_as_given']}: {exc}. Remove {self.result['key_file']} "
                "and check the key URL."
            )
        self.result["fingerprints"] = found
        if fingerprint in found:
            return
        self.fail(
            f"{this_host()}: the key at {self.options['key_url']} is not {self.options['fingerprint_as_given']} "
            f"(found {', '.join(found)}). Remove {self.result['key_file']} and check the key URL and the pinned "
            "fingerprint."
        )

    def key(self) -> None:
        path, pinned = self.result["key_file"], self.options["sha256"]
        current = self.read(path)
        if current is not None and (not pinned or _sha256(current) == pinned):
            # As get_url without force: a key file that is there is not downloaded again.
            self.check_fingerprint(current)
            self.result["key_changed"] = self.put(path, current)
            return
        data = self.download()
        actual = _sha256(data)
        if pinned and actual != pinned:
            self.fail(
                f"{this_host()}: the key downloaded from {self.options['key_url']} has sha256 {actual}, not the "
                f"pinned {pinned}. Check the key URL and the pinned checksum (key_sha256)."
            )
        self.check_fingerprint(data)
        self.result["key_downloaded"] = self.result["key_changed"] = True
        before = f"sha256 {_sha256(current)}\n" if current is not None else ""
        self.diff(path, before, f"sha256 {actual}\n")
        if not self.module.check_mode:
            self.write(path, data)

    # -- 3. other sources of the same URI

    def take_over(self) -> None:
        if not self.params["take_over"]:
            return
        directory = self.params["sources_dir"]
        try:
            entries = sorted(os.listdir(directory))
        except FileNotFoundError:
            return
        except OSError as exc:
            self.fail(f"could not list {directory} on {this_host()}: {exc}")
        own = os.path.basename(self.result["sources_file"])
        for entry in entries:
            # What ansible.builtin.find with patterns *.list/*.sources found: visible regular files, not ours.
            if entry.startswith(".") or entry == own or not entry.endswith((".list", ".sources")):
                continue
            path = os.path.join(directory, entry)
            try:
                if not stat.S_ISREG(os.lstat(path).st_mode):
                    continue
            except FileNotFoundError:
                continue
            content = self.read(path) or b""
            if not same_repository(content.decode("utf-8", "replace"), self.options["url"]):
                continue
            self.result["removed_sources"].append(path)
            self.diff(path, content, b"")
            if not self.module.check_mode:
                self.remove(path)

    # -- 4. the source, 5. the preferences

    def source(self) -> None:
        text = render_source(
            self.params["name"],
            self.options["url"],
            self.options["suites"],
            self.options["components"],
            self.result["key_file"],
        )
        self.result["sources"] = text
        self.result["sources_changed"] = self.put(self.result["sources_file"], text.encode("utf-8"))

    def preferences(self) -> None:
        path, text = self.result["preferences_file"], self.params["preferences"] or ""
        if text:
            self.result["preferences_changed"] = self.put(path, text.encode("utf-8"))
            return
        if not os.path.lexists(path):
            return
        if os.path.isdir(path) and not os.path.islink(path):
            self.fail(f"{path} on {this_host()} is a directory, not a preferences file: remove it by hand")
        self.diff(path, self.read(path), b"")
        self.result["preferences_changed"] = True
        if not self.module.check_mode:
            self.remove(path)

    def apply(self) -> dict:
        self.key()
        self.take_over()
        self.source()
        self.preferences()
        result = self.result
        result["index_stale"] = bool(
            result["sources_changed"] or result["preferences_changed"] or result["removed_sources"]
        )
        result["changed"] = result["index_stale"] or result["key_changed"]
        if self.module._diff:
            result["diff"] = self.diffs
        return result


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str", "required": True},
            "url": {"type": "str", "required": True},
            "suites": {"type": "list", "elements": "str", "default": ["/"]},
            "components": {"type": "list", "elements": "str", "default": []},
            # A URL, a checksum and a fingerprint: public, nothing to hide from the log.
            "key_url": {"type": "str", "required": True, "no_log": False},
            "key_sha256": {"type": "str", "default": "", "no_log": False},
            "key_fingerprint": {"type": "str", "default": "", "no_log": False},
            "key_timeout": {"type": "int", "default": 30},
            "preferences": {"type": "str", "default": ""},
            "take_over": {"type": "bool", "default": True},
            "keyring_dir": {"type": "path", "default": "/etc/apt/keyrings"},
            "sources_dir": {"type": "path", "default": "/etc/apt/sources.list.d"},
            "preferences_dir": {"type": "path", "default": "/etc/apt/preferences.d"},
        },
        supports_check_mode=True,
    )
    module.exit_json(**VendorAptRepository(module).apply())


if __name__ == "__main__":
    main()
