"""gpuforge_apt_sources: the takeover regex, the deb822 text ansible.builtin.deb822_repository writes, and the
fingerprints of real `gpg --show-keys --with-colons` output.

The expected .sources texts were written by ansible-core 2.19.5's deb822_repository module itself (python-debian
1.1.1, its Deb822.dump()), run with the same values; the first is also the file a lab node holds (cat -A of
/etc/apt/sources.list.d/cuda.sources, quoted in gpuforge issue 18).
"""

from __future__ import annotations

import re

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_apt_sources import (
    deb822_slug,
    gpg_fingerprints,
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

CUDA = "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64"
NCT = "https://nvidia.github.io/libnvidia-container/stable/deb/amd64"


# ---------------------------------------------------------------------------------------------------------
# gpg --show-keys --with-colons


def test_fingerprints_of_a_key_with_a_subkey_not_its_revokers():
    assert gpg_fingerprints(DEBIAN_AUTOMATIC_COLONS) == [
        "B8B80B5B623EAB6AD8775C45B7C5D7D6350947F8",
        "4CB50190207B4758A3F73A796ED0E7B82643E131",
    ]


def test_fingerprints_of_a_single_key_and_of_two_keys_in_one_file():
    assert gpg_fingerprints(DEBIAN_STABLE_COLONS) == ["4D64FEC119C2029067D6E791F8D2585B8783D481"]
    both = gpg_fingerprints(DEBIAN_STABLE_COLONS + DEBIAN_AUTOMATIC_COLONS + DEBIAN_STABLE_COLONS)
    assert both[0] == "4D64FEC119C2029067D6E791F8D2585B8783D481" and len(both) == 3


@pytest.mark.parametrize(
    "text",
    [
        "",
        None,
        # what gpg prints on stdout for a file that holds no key (an HTML error page): nothing; and noise
        "gpg: no valid OpenPGP data found.\n",
        "fpr:::\n",
        "pub:-:255:22:F8D2585B8783D481:1674492243:1926780243::-:::scSC:::::ed25519:::0:\n",
    ],
)
def test_no_fingerprint(text):
    assert gpg_fingerprints(text) == []


def test_fingerprints_are_uppercased():
    assert gpg_fingerprints("fpr:::::::::4d64fec119c2029067d6e791f8d2585b8783d481:\n") == [
        "4D64FEC119C2029067D6E791F8D2585B8783D481"
    ]


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
