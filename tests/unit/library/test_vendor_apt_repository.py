"""vendor_apt_repository: key, fingerprint, takeover, deb822 source and pin file against a fake /etc/apt in a temp
dir. The key is served from a file:// URL (the module's real fetch_url). The keys are real OpenPGP keys and their
fingerprints what gpg printed for them (tests/fixtures/apt/SOURCES.md); the module reads them itself and runs no
command."""

from __future__ import annotations

import hashlib
import platform
from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.modules import vendor_apt_repository

HOST = platform.node()
CUDA = "http://mirror/cuda/repos/debian12/x86_64"
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "apt"
# An RSA 3072 key with an encryption subkey, ASCII-armored as vendors publish theirs (NVIDIA's 3bf863cc.pub is);
# gpg 2.2.40's --show-keys --with-colons fpr records (rsa3072-with-subkey.colons).
KEY = (FIXTURES / "rsa3072-with-subkey.asc").read_bytes()
FINGERPRINT = "5A7A0518C2971AF62EE0700BEA54EAEBC1A218DD"
SUBKEY = "FA1AC7CD36DEB5B34947B2335D67E893E9F4FBB6"
# Another real key: Debian's bookworm stable release key (binary, ed25519).
ROGUE_KEY = (FIXTURES / "debian-archive-bookworm-stable.gpg").read_bytes()
OTHER_FINGERPRINT = "4D64FEC119C2029067D6E791F8D2585B8783D481"
PINS = (
    "# Ansible managed\n"
    "# gpuforge vendor_repository 'cuda': these versions win over any other source\n"
    "# (apt_preferences(5)); the closure of a pinned meta-package otherwise floats to the newest build.\n"
    "\n"
    "Package: cuda-drivers-550 nvidia-driver*\n"
    "Pin: version 550.90.07-*\n"
    "Pin-Priority: 1001\n"
)
# cuda-keyring's /etc/apt/sources.list.d/cuda-debian12-x86_64.list (same URI, another Signed-By).
CUDA_KEYRING_LIST = f"deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] {CUDA}/ /\n"


class NoCommand:
    """run_command stand-in: the module reads the key's fingerprints itself, so any command it runs is recorded
    (and fails the test where it checks `calls`)."""

    def __init__(self):
        self.calls: list[list[str]] = []

    def __call__(self, argv, **kwargs):
        self.calls.append(list(argv))
        return 127, "", "no command expected"


class Host:
    """The paths of a fake host under tmp_path, and the key served at a file:// URL."""

    def __init__(self, root: Path):
        self.root = root
        self.etc = root / "etc" / "apt"
        self.keyrings = self.etc / "keyrings"
        self.sources = self.etc / "sources.list.d"
        self.preferences = self.etc / "preferences.d"
        self.served = root / "srv" / "3bf863cc.pub"
        self.served.parent.mkdir(parents=True)
        self.served.write_bytes(KEY)
        self.tmpdir = root / "ansible-tmp"
        self.tmpdir.mkdir()

    def make_dirs(self) -> None:
        for path in (self.keyrings, self.sources, self.preferences):
            path.mkdir(parents=True, exist_ok=True)

    @property
    def key(self) -> Path:
        return self.keyrings / "cuda.asc"

    @property
    def source(self) -> Path:
        return self.sources / "cuda.sources"

    @property
    def pref(self) -> Path:
        return self.preferences / "cuda.pref"

    def args(self, **extra) -> dict:
        return {
            "name": "cuda",
            "url": CUDA,
            "key_url": self.served.as_uri(),
            "key_fingerprint": FINGERPRINT,
            "preferences": PINS,
            "keyring_dir": str(self.keyrings),
            "sources_dir": str(self.sources),
            "preferences_dir": str(self.preferences),
            "_ansible_tmpdir": str(self.tmpdir),
            **extra,
        }

    def expected_source(self) -> str:
        return f"X-Repolib-Name: cuda\nSigned-By: {self.key}\nSuites: /\nTypes: deb\nURIs: {CUDA}/\n"

    def state(self) -> dict:
        """{relative path: (bytes, mode, mtime_ns)} of every file and directory under etc/."""
        found = {}
        for path in sorted(self.root.joinpath("etc").rglob("*")):
            stat = path.lstat()
            data = path.read_bytes() if path.is_file() else None
            found[str(path.relative_to(self.root))] = (data, stat.st_mode & 0o7777, stat.st_mtime_ns)
        return found


@pytest.fixture
def host(tmp_path):
    return Host(tmp_path)


@pytest.fixture
def run(ansible_module, host):
    def run(expect_failure=False, check_mode=False, diff=False, bin_path=None, **args):
        commands = NoCommand()
        result = ansible_module(
            vendor_apt_repository,
            host.args(**args),
            commands,
            expect_failure,
            check_mode,
            diff,
            bin_path=bin_path or "/usr/bin/{}".format,
        )
        return result, commands

    return run


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o7777


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------------------------------------
# A fresh host, a converged host


def test_fresh_host(run, host):
    host.make_dirs()
    result, commands = run()
    assert result["changed"] is True and result["index_stale"] is True
    assert (result["key_downloaded"], result["key_changed"], result["sources_changed"]) == (True, True, True)
    assert result["preferences_changed"] is True and result["removed_sources"] == []
    assert result["fingerprints"] == [FINGERPRINT, SUBKEY]
    assert host.key.read_bytes() == KEY
    assert host.source.read_text(encoding="utf-8") == host.expected_source() == result["sources"]
    assert host.pref.read_text(encoding="utf-8") == PINS
    assert {mode(path) for path in (host.key, host.source, host.pref)} == {0o644}
    assert (result["key_file"], result["sources_file"], result["preferences_file"]) == (
        str(host.key),
        str(host.source),
        str(host.pref),
    )
    # The fingerprints were read from the downloaded bytes: no command, no temporary file.
    assert commands.calls == [] and list(host.tmpdir.iterdir()) == []
    # nothing left beside the files (the temporary files of the atomic writes)
    assert sorted(p.name for p in host.etc.rglob("*")) == sorted(
        ["keyrings", "sources.list.d", "preferences.d", "cuda.asc", "cuda.sources", "cuda.pref"]
    )


def test_missing_directories_are_created(run, host):
    result, _ = run()
    assert result["changed"] is True
    assert {mode(path) for path in (host.keyrings, host.sources, host.preferences)} == {0o755}
    assert host.source.read_text(encoding="utf-8") == host.expected_source()


def test_converged_host_changes_nothing_and_downloads_nothing(run, host):
    host.make_dirs()
    run()
    before = host.state()
    host.served.unlink()  # a download would fail now
    result, commands = run(diff=True)
    assert result["changed"] is False and result["index_stale"] is False
    assert (result["key_downloaded"], result["key_changed"], result["sources_changed"]) == (False, False, False)
    assert result["preferences_changed"] is False and result["removed_sources"] == []
    assert result["diff"] == []
    assert host.state() == before
    # the fingerprint is still checked, on the key file itself
    assert result["fingerprints"] == [FINGERPRINT, SUBKEY] and commands.calls == []


def test_a_host_deb822_repository_set_up_is_converged(run, host):
    """The files the role's old tasks left (get_url, deb822_repository, template) are the module's."""
    host.make_dirs()
    host.key.write_bytes(KEY)
    host.source.write_text(host.expected_source(), encoding="utf-8")
    host.pref.write_text(PINS, encoding="utf-8")
    for path in (host.key, host.source, host.pref):
        path.chmod(0o644)
    before = host.state()
    result, _ = run()
    assert result["changed"] is False
    assert host.state() == before


# ---------------------------------------------------------------------------------------------------------
# Check mode


def test_check_mode_on_a_fresh_host_writes_nothing(run, host):
    result, _ = run(check_mode=True, diff=True)
    assert result["changed"] is True and result["index_stale"] is True
    assert (result["key_downloaded"], result["sources_changed"], result["preferences_changed"]) == (True, True, True)
    assert not (host.root / "etc").exists()
    # the download was checked all the same, and nothing was left behind
    assert result["fingerprints"] == [FINGERPRINT, SUBKEY] and list(host.tmpdir.iterdir()) == []
    diffs = {entry["after_header"]: entry for entry in result["diff"]}
    assert diffs[str(host.source)]["after"] == host.expected_source()
    assert diffs[str(host.pref)] == {
        "before_header": str(host.pref),
        "after_header": str(host.pref),
        "before": "",
        "after": PINS,
    }
    assert diffs[str(host.key)]["after"] == f"sha256 {sha256(KEY)}\n"


def test_check_mode_takes_nothing_over_and_removes_nothing(run, host):
    host.make_dirs()
    run(preferences=PINS)
    other = host.sources / "cuda-debian12-x86_64.list"
    other.write_text(CUDA_KEYRING_LIST, encoding="utf-8")
    before = host.state()
    result, _ = run(check_mode=True, preferences="")
    assert result["removed_sources"] == [str(other)]
    assert result["preferences_changed"] is True and result["index_stale"] is True
    assert host.state() == before


def test_a_host_without_gpg_checks_the_fingerprint_all_the_same(run, host):
    """A fresh host has no gnupg: the fingerprint is read by the module, in check mode too."""
    for check_mode in (True, False):
        result, commands = run(check_mode=check_mode, bin_path={}.get)
        assert result["changed"] is True and result["fingerprints"] == [FINGERPRINT, SUBKEY]
        assert commands.calls == []
    assert host.key.read_bytes() == KEY


# ---------------------------------------------------------------------------------------------------------
# The key: fingerprint, sha256


def test_a_key_with_another_fingerprint_is_refused_before_it_is_written(run, host):
    host.make_dirs()
    host.served.write_bytes(ROGUE_KEY)
    result, _ = run(key_fingerprint="b8b8 0b5b 623e ab6a d877  5c45 b7c5 d7d6 3509 47f8", expect_failure=True)
    assert result["msg"] == (
        f"{HOST}: the key at {host.served.as_uri()} is not b8b8 0b5b 623e ab6a d877  5c45 b7c5 d7d6 3509 47f8 "
        f"(found {OTHER_FINGERPRINT}). Remove {host.key} and check the key URL and the pinned fingerprint."
    )
    assert result["fingerprints"] == [OTHER_FINGERPRINT]
    assert not host.key.exists() and not host.source.exists()


def test_a_key_file_on_the_host_with_another_fingerprint_is_refused(run, host):
    host.make_dirs()
    host.key.write_bytes(ROGUE_KEY)
    result, _ = run(expect_failure=True)
    assert result["msg"] == (
        f"{HOST}: the key at {host.served.as_uri()} is not {FINGERPRINT} (found {OTHER_FINGERPRINT}). "
        f"Remove {host.key} and check the key URL and the pinned fingerprint."
    )
    assert host.key.read_bytes() == ROGUE_KEY and not host.source.exists()


def test_a_file_without_a_key_is_no_key(run, host):
    host.make_dirs()
    host.served.write_bytes(b"<html><body>404 Not Found</body></html>\n")
    result, _ = run(expect_failure=True)
    assert result["msg"] == (
        f"{HOST}: the key at {host.served.as_uri()} is not an OpenPGP public key that can be checked against "
        f"{FINGERPRINT}: byte 0 starts no OpenPGP packet. Remove {host.key} and check the key URL."
    )
    assert not host.key.exists()


def test_the_subkey_fingerprint_is_accepted(run, host):
    result, _ = run(key_fingerprint=SUBKEY.lower())
    assert result["changed"] is True and host.key.read_bytes() == KEY


def test_a_download_with_another_sha256_fails_naming_both(run, host):
    host.make_dirs()
    pinned = "0" * 64
    result, _ = run(key_sha256=pinned, key_fingerprint="", expect_failure=True)
    assert result["msg"] == (
        f"{HOST}: the key downloaded from {host.served.as_uri()} has sha256 {sha256(KEY)}, not the pinned {pinned}. "
        "Check the key URL and the pinned checksum (key_sha256)."
    )
    assert not host.key.exists() and not host.source.exists()


def test_a_key_file_with_another_sha256_is_downloaded_again(run, host):
    host.make_dirs()
    host.key.write_bytes(ROGUE_KEY)
    result, commands = run(key_sha256=sha256(KEY).upper(), key_fingerprint="", diff=True)
    assert result["key_downloaded"] is True and host.key.read_bytes() == KEY
    assert commands.calls == [] and result["fingerprints"] == []  # no fingerprint pinned: none read
    key_diff = next(entry for entry in result["diff"] if entry["after_header"] == str(host.key))
    assert (key_diff["before"], key_diff["after"]) == (f"sha256 {sha256(ROGUE_KEY)}\n", f"sha256 {sha256(KEY)}\n")


def test_a_key_file_with_the_pinned_sha256_is_kept(run, host):
    host.make_dirs()
    host.key.write_bytes(KEY)
    host.key.chmod(0o644)
    host.served.unlink()
    result, _ = run(key_sha256=sha256(KEY))
    assert (result["key_downloaded"], result["key_changed"]) == (False, False)


def test_without_a_checksum_a_key_file_on_the_host_is_kept_as_get_url_kept_it(run, host):
    host.make_dirs()
    host.key.write_bytes(KEY)
    host.key.chmod(0o600)
    host.served.write_bytes(ROGUE_KEY)
    result, _ = run()
    assert (result["key_downloaded"], result["key_changed"]) == (False, True)  # the mode only
    assert host.key.read_bytes() == KEY and mode(host.key) == 0o644
    assert result["index_stale"] is True  # the source and pins were new


def test_a_key_url_that_does_not_answer(run, host):
    host.served.unlink()
    result, _ = run(expect_failure=True)
    assert result["msg"].startswith(f"{HOST}: could not download the key from {host.served.as_uri()} (status -1: ")
    assert "Check the key URL" in result["msg"]


# ---------------------------------------------------------------------------------------------------------
# Takeover


def test_takeover_removes_other_sources_of_the_same_uri_only(run, host):
    host.make_dirs()
    files = {
        "cuda-debian12-x86_64.list": CUDA_KEYRING_LIST,
        "cuda-old.sources": f"Types: deb\nURIs: {CUDA}\nSuites: /\nSigned-By: /usr/share/keyrings/cuda.gpg\n",
        # a longer URI that only shares the prefix, another repository, and what find never looked at
        "cuda-extra.list": f"deb [signed-by=/usr/share/keyrings/x.gpg] {CUDA}-extra/ /\n",
        "debian.sources": "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\n",
        "cuda.list.save": CUDA_KEYRING_LIST,
        ".hidden.list": CUDA_KEYRING_LIST,
    }
    for name, text in files.items():
        (host.sources / name).write_text(text, encoding="utf-8")
    (host.sources / "link.list").symlink_to(host.sources / "cuda.list.save")
    result, _ = run(diff=True)
    removed = [str(host.sources / "cuda-debian12-x86_64.list"), str(host.sources / "cuda-old.sources")]
    assert result["removed_sources"] == removed
    assert sorted(p.name for p in host.sources.iterdir()) == sorted(
        [".hidden.list", "cuda-extra.list", "cuda.list.save", "cuda.sources", "debian.sources", "link.list"]
    )
    entry = next(entry for entry in result["diff"] if entry["before_header"] == removed[0])
    assert (entry["before"], entry["after"]) == (CUDA_KEYRING_LIST, "")
    assert result["index_stale"] is True
    # the next run finds nothing more to take over, and its own source is not taken over
    again, _ = run()
    assert again["removed_sources"] == [] and again["changed"] is False


def test_takeover_finds_nvidia_container_toolkit_list_with_arch_variable(run, host):
    host.make_dirs()
    nct = "https://nvidia.github.io/libnvidia-container/stable/deb/amd64"
    guide = host.sources / "nvidia-container-toolkit.list"
    guide.write_text(
        "deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] "
        "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /\n",
        encoding="utf-8",
    )
    result, _ = run(name="nvidia-container-toolkit", url=nct)
    # nvidia-container-toolkit.list is another file than nvidia-container-toolkit.sources: taken over
    assert result["removed_sources"] == [str(guide)]
    assert (host.sources / "nvidia-container-toolkit.sources").is_file()


def test_take_over_false_leaves_other_sources(run, host):
    host.make_dirs()
    other = host.sources / "cuda-debian12-x86_64.list"
    other.write_text(CUDA_KEYRING_LIST, encoding="utf-8")
    result, _ = run(take_over=False)
    assert result["removed_sources"] == [] and other.is_file()


# ---------------------------------------------------------------------------------------------------------
# The source and the pin file


def test_components_suites_and_the_source_file_name(run, host):
    host.make_dirs()
    result, _ = run(name="My_Repo", url="https://repo.example.com/gpfs//", suites=["bookworm"], components=["main"])
    path = host.sources / "my-repo.sources"  # deb822_repository's file name for that name
    assert result["sources_file"] == str(path)
    assert path.read_text(encoding="utf-8") == (
        "Components: main\n"
        "X-Repolib-Name: My_Repo\n"
        f"Signed-By: {host.keyrings / 'My_Repo.asc'}\n"
        "Suites: bookworm\n"
        "Types: deb\n"
        "URIs: https://repo.example.com/gpfs/\n"
    )
    assert (host.keyrings / "My_Repo.asc").is_file() and (host.preferences / "My_Repo.pref").is_file()


def test_a_changed_source_is_rewritten_with_its_diff(run, host):
    host.make_dirs()
    run()
    old = host.source.read_text(encoding="utf-8")
    result, _ = run(url="http://mirror2/cuda/repos/debian12/x86_64/", diff=True)
    assert result["sources_changed"] is True and result["index_stale"] is True
    assert result["key_changed"] is False and result["preferences_changed"] is False
    assert result["diff"] == [
        {
            "before_header": str(host.source),
            "after_header": str(host.source),
            "before": old,
            "after": old.replace("http://mirror/", "http://mirror2/"),
        }
    ]
    assert host.source.read_text(encoding="utf-8") == old.replace("http://mirror/", "http://mirror2/")


def test_a_source_with_another_mode_is_set_to_0644(run, host):
    host.make_dirs()
    run()
    host.source.chmod(0o600)
    result, _ = run(diff=True)
    assert result["sources_changed"] is True and result["diff"] == [] and mode(host.source) == 0o644


def test_the_pin_file_is_removed_when_there_are_no_pins(run, host):
    host.make_dirs()
    run()
    result, _ = run(preferences="", diff=True)
    assert not host.pref.exists()
    assert result["preferences_changed"] is True and result["index_stale"] is True and result["changed"] is True
    assert result["diff"] == [
        {"before_header": str(host.pref), "after_header": str(host.pref), "before": PINS, "after": ""}
    ]
    again, _ = run(preferences="")
    assert again["changed"] is False and again["preferences_changed"] is False


def test_a_key_change_alone_is_a_change_but_not_a_stale_index(run, host):
    host.make_dirs()
    run()
    host.key.chmod(0o600)
    result, _ = run()
    assert (result["changed"], result["key_changed"], result["index_stale"]) == (True, True, False)


# ---------------------------------------------------------------------------------------------------------
# Options


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"key_fingerprint": "", "key_sha256": ""}, "key_fingerprint or key_sha256 is required"),
        ({"key_sha256": "abc"}, "key_sha256 must be 64 hex digits"),
        ({"key_fingerprint": "not-hex"}, "key_fingerprint must be a hex fingerprint"),
        ({"name": "../cuda"}, "name must be a letter or digit"),
        ({"url": "mirror/cuda"}, "url must be an http://, https:// or file:// URL"),
        ({"key_url": "/srv/key.asc"}, "key_url must be an http(s)://, ftp:// or file:// URL"),
        ({"suites": []}, "suites must name at least one suite"),
        ({"components": ["main contrib"]}, "components[0] must be one word without white space"),
        ({"sources_dir": "sources.list.d"}, "sources_dir must be an absolute path"),
        ({"key_timeout": 0}, "key_timeout must be at least 1 second"),
    ],
)
def test_bad_options_fail_naming_the_option(run, host, args, message):
    result, commands = run(expect_failure=True, **args)
    # The host, the repository, the option and what to change: the role has no assert of its own on Debian.
    name = args.get("name", "cuda")
    assert result["msg"].startswith(message), result["msg"]
    assert f"(vendor repository {name!r} on {platform.node()}). " in result["msg"]
    assert result["msg"].endswith(
        "Set the base-URL, key and checksum variables for this source in the inventory (docs/operator-guide.md)."
    )
    assert commands.calls == [] and not (host.root / "etc").exists()


def test_the_module_runs_without_python_debian():
    source = Path(vendor_apt_repository.__file__).read_text(encoding="utf-8")
    assert "import debian" not in source and "from debian" not in source
