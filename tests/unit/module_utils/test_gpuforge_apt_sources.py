"""gpuforge_apt_sources: the takeover regex, the deb822 text ansible.builtin.deb822_repository writes, and the
fingerprints of real OpenPGP key files, against what `gpg --show-keys --with-colons` printed for them.

The expected .sources texts were written by ansible-core 2.19.5's deb822_repository module itself (python-debian
1.1.1, its Deb822.dump()), run with the same values; the first is also the file a lab node holds (cat -A of
/etc/apt/sources.list.d/cuda.sources, quoted in gpuforge issue 18).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_apt_sources import (
    OpenPGPKeyError,
    deb822_slug,
    enable_components_deb822,
    enable_components_one_line,
    openpgp_fingerprints,
    render_deb822,
    render_source,
    repository_uri,
    same_repository,
    takeover_pattern,
)

# `LC_ALL=C gpg --show-keys --with-colons /usr/share/keyrings/debian-archive-bookworm-automatic.gpg` (rc 0) with
# GnuPG 2.2.40 (gnupg 2.2.40-1.1+deb12u2) on Debian 12, debian-archive-keyring 2023.3+deb12u2 (that file's sha256:
# 59dbde1397f8edc4e4aa24829ba36f9583ea5b4480091c34b89dad9e56360a19): a primary key with revokers and a subkey,
# an fpr record after each key.
DEBIAN_AUTOMATIC_COLONS = (
    "pub:-:4096:1:B7C5D7D6350947F8:1674301461:1926589461::-:::scSC::::::23::0:\n"
    "rvk:::1::::::80E976F14A508A48E9CA3FE9BC372252CA1CF964:80:\n"
    "rvk:::1::::::FBFABDB541B5DC955BD9BA6EDB16CF5BB12525C4:80:\n"
    "rvk:::1::::::8C823DED10AA8041639E12105ACE8D6E0C14A470:80:\n"
    "rvk:::1::::::309911BEA966D0613053045711B4E5FF15B0FD82:80:\n"
    "rvk:::1::::::C74F6AC9E933B3067F52F33FA459EC6715B0705F:80:\n"
    "fpr:::::::::B8B80B5B623EAB6AD8775C45B7C5D7D6350947F8:\n"
    "uid:-::::1674301461::100567F0EA7B90BC2ED03949BE60B7A6CFD8619F::Debian Archive Automatic Signing Key "
    "(12/bookworm) <ftpmaster@debian.org>::::::::::0:\n"
    "sub:-:4096:1:6ED0E7B82643E131:1674301461:1926589461:::::s::::::23:\n"
    "fpr:::::::::4CB50190207B4758A3F73A796ED0E7B82643E131:\n"
)
# The same command on /usr/share/keyrings/debian-archive-bookworm-stable.gpg: one ed25519 key, no subkey.
DEBIAN_STABLE_COLONS = (
    "pub:-:255:22:F8D2585B8783D481:1674492243:1926780243::-:::scSC:::::ed25519:::0:\n"
    "fpr:::::::::4D64FEC119C2029067D6E791F8D2585B8783D481:\n"
    "uid:-::::1674492243::F511AE250D42128C160F8195C731AFD9683AA6CB::Debian Stable Release Key (12/bookworm) "
    "<debian-release@lists.debian.org>::::::::::0:\n"
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "apt"
CUDA = "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64"
NCT = "https://nvidia.github.io/libnvidia-container/stable/deb/amd64"


# ---------------------------------------------------------------------------------------------------------
# OpenPGP fingerprints, against what gpg printed for the same files


def gpg_fpr(colons: str) -> list:
    """The fpr records of `gpg --show-keys --with-colons` output (GnuPG's doc/DETAILS: field 10), in order."""
    return [line.split(":")[9] for line in colons.splitlines() if line.startswith("fpr:")]


KEY_FILES = [
    # (file, gpg's colon listing of it)
    ("debian-archive-bookworm-automatic.gpg", DEBIAN_AUTOMATIC_COLONS),
    ("debian-archive-bookworm-stable.gpg", DEBIAN_STABLE_COLONS),
    ("rsa3072-with-subkey.asc", None),
    ("ed25519-cv25519.gpg", None),
]


@pytest.mark.parametrize(("name", "colons"), KEY_FILES, ids=[name for name, _ in KEY_FILES])
def test_fingerprints_are_gpgs(name, colons):
    """Binary and armored files, RSA and ed25519/cv25519, a key with revokers and subkeys: gpg's fpr records."""
    colons = colons or (FIXTURES / name.replace(".asc", ".colons").replace(".gpg", ".colons")).read_text()
    assert openpgp_fingerprints((FIXTURES / name).read_bytes()) == gpg_fpr(colons)
    assert len(gpg_fpr(colons)) in (1, 2)


def test_two_keys_in_one_file_in_order_without_repeats():
    stable = (FIXTURES / "debian-archive-bookworm-stable.gpg").read_bytes()
    automatic = (FIXTURES / "debian-archive-bookworm-automatic.gpg").read_bytes()
    assert openpgp_fingerprints(stable + automatic + stable) == gpg_fpr(DEBIAN_STABLE_COLONS + DEBIAN_AUTOMATIC_COLONS)


def test_every_armored_block_of_a_file_is_read():
    """gpg reads every armored block of a file: two keys exported one after the other, in order."""
    rsa = (FIXTURES / "rsa3072-with-subkey.asc").read_bytes()
    ed25519 = (FIXTURES / "ed25519-cv25519.asc").read_bytes()
    expected = gpg_fpr((FIXTURES / "rsa3072-with-subkey.colons").read_text())
    expected += gpg_fpr((FIXTURES / "ed25519-cv25519.colons").read_text())
    assert openpgp_fingerprints(rsa + b"\n" + ed25519) == expected
    # The armored export of the ed25519 key holds the same key as the binary one.
    assert openpgp_fingerprints(ed25519) == openpgp_fingerprints((FIXTURES / "ed25519-cv25519.gpg").read_bytes())


def test_armor_headers_and_crlf_are_read():
    armored = (FIXTURES / "rsa3072-with-subkey.asc").read_text()
    with_header = armored.replace("-----\n\n", "-----\nComment: gpuforge test\n\n", 1).replace("\n", "\r\n")
    assert openpgp_fingerprints(with_header.encode()) == openpgp_fingerprints(armored.encode())


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"<html><body>404 Not Found</body></html>\n", "starts no OpenPGP packet"),
        (b"", "holds no OpenPGP public key"),
        (b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQINBGPL\n", "no END line"),
        (b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n%%%%\n-----END PGP PUBLIC KEY BLOCK-----\n", "not base64"),
        # A version 6 key packet (RFC 9580): new-format tag 6, length 2, version 6.
        (bytes([0xC6, 0x02, 0x06, 0x00]), "version 6 key"),
    ],
)
def test_what_is_not_a_readable_key(data, reason):
    with pytest.raises(OpenPGPKeyError, match=reason):
        openpgp_fingerprints(data)


def test_a_truncated_key_is_refused():
    data = (FIXTURES / "debian-archive-bookworm-stable.gpg").read_bytes()
    with pytest.raises(OpenPGPKeyError, match="ends inside a packet"):
        openpgp_fingerprints(data[: len(data) // 2])


# ---------------------------------------------------------------------------------------------------------
# deb822


def test_the_lab_nodes_cuda_source_byte_for_byte():
    text = render_source("cuda", "http://mirror/cuda/repos/debian12/x86_64/", ["/"], [], "/etc/apt/keyrings/cuda.asc")
    assert text == (
        "X-Repolib-Name: cuda\n"
        "Signed-By: /etc/apt/keyrings/cuda.asc\n"
        "Suites: /\n"
        "Types: deb\n"
        "URIs: http://mirror/cuda/repos/debian12/x86_64/\n"
    )


@pytest.mark.parametrize(
    "url", ["http://mirror/cuda/repos/debian12/x86_64", "http://mirror/cuda/repos/debian12/x86_64//"]
)
def test_the_uri_gets_exactly_one_trailing_slash(url):
    assert repository_uri(url) == "http://mirror/cuda/repos/debian12/x86_64/"
    assert "URIs: http://mirror/cuda/repos/debian12/x86_64/\n" in render_source("cuda", url, ["/"], [], "/k.asc")


def test_components_and_several_suites_in_deb822_repositorys_order():
    # deb822_repository adds the fields in the sorted order of its option names: `components` before `name`.
    text = render_source(
        "gpuforge-gpfs",
        "https://repo.example.com/gpfs",
        ["bookworm", "bookworm-updates"],
        ["main", "contrib"],
        "/etc/apt/keyrings/gpuforge-gpfs.asc",
    )
    assert text == (
        "Components: main contrib\n"
        "X-Repolib-Name: gpuforge-gpfs\n"
        "Signed-By: /etc/apt/keyrings/gpuforge-gpfs.asc\n"
        "Suites: bookworm bookworm-updates\n"
        "Types: deb\n"
        "URIs: https://repo.example.com/gpfs/\n"
    )


def test_render_deb822_formats_as_python_debian():
    assert render_deb822(
        {"trusted": False, "by_hash": True, "date_max_future": 10, "languages": [], "pdiffs": None}
    ) == ("By-Hash: yes\nDate-Max-Future: 10\nLanguages:\nTrusted: no\n")
    assert (
        render_deb822({"signed_by": "line one\n\nline three\n"}) == "Signed-By:\n    line one\n    .\n    line three\n"
    )


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("cuda", "cuda"),
        ("nvidia-container-toolkit", "nvidia-container-toolkit"),
        ("My_Repo.1", "my-repo1"),
        ("a  b", "a-b"),
    ],
)
def test_source_file_name_as_deb822_repository_makes_it(name, slug):
    assert deb822_slug(name) == slug


# ---------------------------------------------------------------------------------------------------------
# takeover


def test_takeover_pattern_text():
    # The regex the role's ansible.builtin.find used (its `contains`), for the same URLs.
    assert (
        takeover_pattern(CUDA + "/")
        == r"https://developer\.download\.nvidia\.com/compute/cuda/repos/debian12/x86_64/?(\s|$)"
    )
    assert (
        takeover_pattern(NCT)
        == r"https://nvidia\.github\.io/libnvidia\-container/stable/deb/(?:amd64|\$\(ARCH\))/?(\s|$)"
    )


def test_every_debian_architecture_segment_also_matches_arch_variable():
    for arch in ("amd64", "arm64", "armhf", "i386", "ppc64el", "s390x"):
        url = f"https://example.com/deb/{arch}"
        assert same_repository("deb https://example.com/deb/$(ARCH) /\n", url), arch
        assert same_repository(f"deb {url} /\n", url), arch
    # only a whole segment: amd64x is not an architecture
    assert not same_repository("deb https://example.com/deb/$(ARCH)x /\n", "https://example.com/deb/amd64x")


def test_takeover_is_searched_in_the_whole_file():
    other = "# cuda-keyring\n\n" + f"deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] {CUDA}/ /\n"
    assert same_repository(other, CUDA)
    assert re.search(takeover_pattern(CUDA), other).start() > 0


def test_takeover_escapes_the_url():
    # a dot of the URL is a dot, not any character
    assert not same_repository(
        "deb https://developerXdownload.nvidia.com/compute/cuda/repos/debian12/x86_64/ /\n", CUDA
    )


# --- the distribution archive's components (apt_archive_components) ---


def test_contrib_joins_both_stanzas_of_the_debian_image_sources():
    text = (FIXTURES / "debian12-image-debian.sources").read_text()
    new, entries = enable_components_deb822(text, "bookworm", ["contrib"])
    assert entries == 2
    assert new == text.replace("Components: main\n", "Components: main contrib\n")
    # A second run changes nothing and still counts the entries.
    assert enable_components_deb822(new, "bookworm", ["contrib"]) == (new, 2)


def test_contrib_joins_every_archive_line_of_the_installer_sources_list():
    text = (FIXTURES / "debian12-installer-sources.list").read_text()
    new, entries = enable_components_one_line(text, "bookworm", ["contrib"])
    assert entries == 6
    expected = "".join(
        line if line.startswith("#") else line.replace("main non-free-firmware\n", "main non-free-firmware contrib\n")
        for line in text.splitlines(keepends=True)
    )
    # The commented cdrom line (which lists contrib) and the comments stay.
    assert new == expected and new.splitlines()[0] == text.splitlines()[0]
    assert enable_components_one_line(new, "bookworm", ["contrib"]) == (new, 6)


def test_vendor_and_other_release_entries_are_left_alone():
    lines = (
        "deb [signed-by=/etc/apt/keyrings/cuda.asc arch=amd64] http://mirror/cuda/repos/debian12/x86_64/ /\n"
        "deb http://deb.debian.org/debian trixie main\n"
        "deb http://vendor.example/debian bookworm stable\n"
        "deb http://deb.debian.org/debian bookworm main # archive\r\n"
    )
    new, entries = enable_components_one_line(lines, "bookworm", ["contrib", "non-free"])
    assert entries == 1
    assert new.splitlines(keepends=True)[:3] == lines.splitlines(keepends=True)[:3]
    # Appended before the comment; the CRLF ending kept.
    archive = "deb http://deb.debian.org/debian bookworm main contrib non-free # archive\r\n"
    assert new.splitlines(keepends=True)[3] == archive


def test_deb822_vendor_disabled_and_continued_stanzas():
    text = (
        "X-Repolib-Name: cuda\nSigned-By: /etc/apt/keyrings/cuda.asc\nSuites: /\nTypes: deb\nURIs: http://mirror/cuda/\n"
        "\n"
        "Types: deb\nURIs: http://old/debian\nSuites: bookworm\nComponents: main\nEnabled: no\n"
        "\n"
        "types: deb\nuris: http://deb.debian.org/debian\nsuites: bookworm-backports\n"
        "components: main\n non-free-firmware\n"
    )
    new, entries = enable_components_deb822(text, "bookworm", ["contrib"])
    assert entries == 1
    continued = "components: main\n non-free-firmware"
    assert new == text.replace(continued + "\n", continued + " contrib\n")


def test_an_entry_without_main_or_of_another_release_is_not_the_archive():
    restricted = "Types: deb\nSuites: noble\nComponents: restricted\n"
    assert enable_components_deb822(restricted, "noble", ["universe"])[1] == 0
    assert enable_components_one_line("deb http://x bookworm2 main\n", "bookworm", ["contrib"])[1] == 0
