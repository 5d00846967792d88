"""vendor_apt_repository: key, fingerprint, takeover, deb822 source and pin file against a fake /etc/apt in a temp
dir. The key is served from a file:// URL (the module's real fetch_url); `gpg --show-keys --with-colons` is a
fake answering with real colon output (tests/unit/module_utils/test_gpuforge_apt_sources.py says where it was
captured), chosen by the bytes of the file gpg is asked about."""

from __future__ import annotations

import hashlib
import platform
from pathlib import Path

import pytest
from ansible.module_utils.common.warnings import get_warning_messages
from ansible_collections.gpuforge.cluster.plugins.modules import vendor_apt_repository

HOST = platform.node()
CUDA = "http://mirror/cuda/repos/debian12/x86_64"
FINGERPRINT = "B8B80B5B623EAB6AD8775C45B7C5D7D6350947F8"
SUBKEY = "4CB50190207B4758A3F73A796ED0E7B82643E131"
OTHER_FINGERPRINT = "4D64FEC119C2029067D6E791F8D2585B8783D481"
KEY = b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nthe repository's key\n-----END PGP PUBLIC KEY BLOCK-----\n"
ROGUE_KEY = b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nsomeone else's key\n-----END PGP PUBLIC KEY BLOCK-----\n"
# debian-archive-bookworm-automatic.gpg and -stable.gpg (see the module_utils test): one stands for the
# repository's key, the other for a rogue one.
COLONS = {
    KEY: (
        "pub:-:4096:1:B7C5D7D6350947F8:1674301461:1926589461::-:::scSC::::::23::0:\n"
        "rvk:::1::::::80E976F14A508A48E9CA3FE9BC372252CA1CF964:80:\n"
        f"fpr:::::::::{FINGERPRINT}:\n"
        "uid:-::::1674301461::100567F0EA7B90BC2ED03949BE60B7A6CFD8619F::Debian Archive Automatic Signing Key "
        "(12/bookworm) <ftpmaster@debian.org>::::::::::0:\n"
        "sub:-:4096:1:6ED0E7B82643E131:1674301461:1926589461:::::s::::::23:\n"
        f"fpr:::::::::{SUBKEY}:\n"
    ),
    ROGUE_KEY: (
        "pub:-:255:22:F8D2585B8783D481:1674492243:1926780243::-:::scSC:::::ed25519:::0:\n"
        f"fpr:::::::::{OTHER_FINGERPRINT}:\n"
        "uid:-::::1674492243::F511AE250D42128C160F8195C731AFD9683AA6CB::Debian Stable Release Key (12/bookworm) "
        "<debian-release@lists.debian.org>::::::::::0:\n"
    ),
}
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


class FakeGpg:
    """`gpg --show-keys --with-colons FILE`: the colon output of the key FILE holds (COLONS), else gpg's answer
    to a file without a key. Records every call, its kwargs and the bytes of the file it was given."""

    def __init__(self, rc=None, out=None, err=""):
        self.fixed = None if rc is None else (rc, out or "", err)
        self.calls: list[list[str]] = []
        self.kwargs: list[dict] = []
        self.seen: list[bytes] = []

    def __call__(self, argv, **kwargs):
        argv = list(argv)
        self.calls.append(argv)
        self.kwargs.append(kwargs)
        assert argv[:3] == ["/usr/bin/gpg", "--show-keys", "--with-colons"], argv
        data = Path(argv[3]).read_bytes()
        self.seen.append(data)
        if self.fixed:
            return self.fixed
        if data in COLONS:
            return 0, COLONS[data], ""
        return 2, "", "gpg: no valid OpenPGP data found.\n"


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
    def run(gpg=None, expect_failure=False, check_mode=False, diff=False, bin_path=None, **args):
        gpg = gpg or FakeGpg()
        result = ansible_module(
            vendor_apt_repository,
            host.args(**args),
            gpg,
            expect_failure,
            check_mode,
            diff,
            bin_path=bin_path or "/usr/bin/{}".format,
        )
        return result, gpg

    return run


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o7777


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------------------------------------
# A fresh host, a converged host


def test_fresh_host(run, host):
    host.make_dirs()
    result, gpg = run()
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
    # gpg read the downloaded bytes from a temporary file of Ansible's temporary directory, removed after
    assert len(gpg.calls) == 1 and gpg.seen == [KEY]
    assert Path(gpg.calls[0][3]).parent == host.tmpdir and list(host.tmpdir.iterdir()) == []
    assert gpg.kwargs[0]["environ_update"] == {"LC_ALL": "C"}
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
    result, gpg = run(diff=True)
    assert result["changed"] is False and result["index_stale"] is False
    assert (result["key_downloaded"], result["key_changed"], result["sources_changed"]) == (False, False, False)
    assert result["preferences_changed"] is False and result["removed_sources"] == []
    assert result["diff"] == []
    assert host.state() == before
    # the fingerprint is still checked, on the key file itself
    assert gpg.calls == [["/usr/bin/gpg", "--show-keys", "--with-colons", str(host.key)]]
    assert result["fingerprints"] == [FINGERPRINT, SUBKEY]


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
    result, gpg = run(check_mode=True, diff=True)
    assert result["changed"] is True and result["index_stale"] is True
    assert (result["key_downloaded"], result["sources_changed"], result["preferences_changed"]) == (True, True, True)
    assert not (host.root / "etc").exists()
    # the download was checked all the same, from a temporary file removed after
    assert gpg.seen == [KEY] and list(host.tmpdir.iterdir()) == []
    assert result["fingerprints"] == [FINGERPRINT, SUBKEY]
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


def test_check_mode_without_gpg_warns_and_skips_the_fingerprint(run, host, capsys):
    result, gpg = run(check_mode=True, bin_path={}.get)
    assert result["changed"] is True and gpg.calls == [] and result["fingerprints"] == []
    # ansible-core collects module warnings, or prints them at once when a controller display is already set up
    # in this test process (test order decides): either way the warning must be there.
    said = [*get_warning_messages(), capsys.readouterr().err]
    assert any("gpg is not installed yet" in text for text in said)
    assert not (host.root / "etc").exists()


def test_without_gpg_the_task_fails_naming_the_fix(run, host):
    result, _ = run(bin_path={}.get, expect_failure=True)
    assert result["msg"] == f"gpg not found in PATH on {HOST}: {vendor_apt_repository.GPG_FIX}"
    assert "install gnupg" in result["msg"]
    assert not host.key.exists()


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
    result, gpg = run(expect_failure=True)
    assert result["msg"] == (
        f"{HOST}: the key at {host.served.as_uri()} is not {FINGERPRINT} (found {OTHER_FINGERPRINT}). "
        f"Remove {host.key} and check the key URL and the pinned fingerprint."
    )
    assert gpg.calls[0][3] == str(host.key)
    assert host.key.read_bytes() == ROGUE_KEY and not host.source.exists()


def test_a_file_without_a_key_is_no_key(run, host):
    host.make_dirs()
    host.served.write_bytes(b"<html><body>404 Not Found</body></html>\n")
    result, _ = run(expect_failure=True)
    assert result["msg"].startswith(f"{HOST}: the key at {host.served.as_uri()} is not {FINGERPRINT} (found no key).")
    assert result["msg"].endswith("exited 2: gpg: no valid OpenPGP data found.")
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
    result, gpg = run(key_sha256=sha256(KEY).upper(), key_fingerprint="", diff=True)
    assert result["key_downloaded"] is True and host.key.read_bytes() == KEY
    assert gpg.calls == []  # no fingerprint pinned: gpg is not needed
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
    result, gpg = run(expect_failure=True, **args)
    # The host, the repository, the option and what to change: the role has no assert of its own on Debian.
    name = args.get("name", "cuda")
    assert result["msg"].startswith(message), result["msg"]
    assert f"(vendor repository {name!r} on {platform.node()}). " in result["msg"]
    assert result["msg"].endswith(
        "Set the base-URL, key and checksum variables for this source in the inventory (docs/operator-guide.md)."
    )
    assert gpg.calls == [] and not (host.root / "etc").exists()


@pytest.mark.parametrize("gpg_on_path", [True, False])
def test_gpg_found_says_whether_gpg_is_on_the_path(run, host, gpg_on_path):
    """The role installs gnupg on a host until a run says gpg is there (tasks/setup-Debian.yml)."""
    host.make_dirs()
    found = "/usr/bin/{}".format if gpg_on_path else (lambda name: None if name == "gpg" else f"/usr/bin/{name}")
    result, _ = run(key_fingerprint="", key_sha256=sha256(host.served.read_bytes()), bin_path=found)
    assert result["gpg_found"] is gpg_on_path


def test_the_module_runs_without_python_debian():
    source = Path(vendor_apt_repository.__file__).read_text(encoding="utf-8")
    assert "import debian" not in source and "from debian" not in source
