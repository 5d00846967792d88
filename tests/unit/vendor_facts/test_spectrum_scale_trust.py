"""spectrum_scale_client trusts nothing unverified (vendor-fidelity review M11, M15, section 4):

* dnf: IBM's RPMs are GPG-signed by IBM, so gpgcheck stays on whatever the package source (repository URL or
  local directory), and the role refuses to run without IBM's key pinned by fingerprint or sha256;
* apt repository: IBM publishes no signed apt metadata (its own role adds "deb [trusted=yes]"), so the role only
  adds a site-signed repository through vendor_repository, never a trusted=yes source;
* apt local_path: each .deb is installed only after its sha256 matched a pinned one; a file without a pinned
  sha256 is refused.
"""

from __future__ import annotations

import pytest
import yaml
from ansible.template import trust_as_template
from gpu_stack_render import ROOT, RoleRender

ROLE = "spectrum_scale_client"
TASKS = ROOT / "roles" / ROLE / "tasks"
KEY_URL = "https://repo.example.com/gpfs/5.1.9.3/SpectrumScale_public_key.pgp"
SHA = "ab" * 32


def render(os_name: str, **extra) -> RoleRender:
    """The role for one OS, with the vars tasks/main.yml hands to the install tasks."""
    main = RoleRender(ROLE, os_name).find_task("main.yml", "Install the Storage Scale packages")
    return RoleRender(ROLE, os_name, **{**(main.get("vars") or {}), **extra})


def all_tasks(tasks):
    for task in tasks or []:
        yield task
        for section in ("block", "rescue", "always"):
            yield from all_tasks(task.get(section))


# --- dnf ---------------------------------------------------------------------------------------------------

DNF_SOURCES = {
    "repository, key by fingerprint": {
        "gpuforge_spectrum_scale_repo_url": "https://repo.example.com/gpfs/5.1.9.3/gpfs_rpms",
        "gpuforge_spectrum_scale_key_url": KEY_URL,
        "gpuforge_spectrum_scale_key_fingerprint": "0123456789ABCDEF0123456789ABCDEF01234567",
    },
    "local directory, key by sha256": {
        "spectrum_scale_client_local_path": "/usr/lpp/mmfs/5.1.9.3/gpfs_rpms",
        "gpuforge_spectrum_scale_key_url": "file:///usr/lpp/mmfs/5.1.9.3/Public_Keys/SpectrumScale_public_key.pgp",
        "gpuforge_spectrum_scale_key_sha256": SHA,
    },
    "local directory, no key": {"spectrum_scale_client_local_path": "/usr/lpp/mmfs/5.1.9.3/gpfs_rpms"},
    "repository, no key": {"gpuforge_spectrum_scale_repo_url": "https://repo.example.com/gpfs_rpms"},
}


def test_dnf_tasks_never_switch_signature_checks_off():
    text = (TASKS / "setup-RedHat.yml").read_text(encoding="utf-8")
    for task in all_tasks(yaml.safe_load(text)):
        for module in ("ansible.builtin.yum_repository", "ansible.builtin.dnf"):
            args = task.get(module) or {}
            assert args.get("gpgcheck", True) is not False, task["name"]
            assert not args.get("disable_gpg_check"), task["name"]
        assert (task.get("vars") or {}).get("vendor_repository_dnf_gpgcheck", True) is True, task["name"]


@pytest.mark.parametrize("os_name", ["rhel8", "rhel9"])
@pytest.mark.parametrize("source", sorted(DNF_SOURCES))
def test_dnf_path_renders_gpgcheck_on_for_every_source(os_name, source):
    role = render(os_name, **DNF_SOURCES[source])
    # Whatever the configuration, no repository the role writes has gpgcheck off.
    for task in all_tasks(yaml.safe_load((TASKS / "setup-RedHat.yml").read_text(encoding="utf-8"))):
        if "ansible.builtin.yum_repository" in task:
            assert role.task_args("setup-RedHat.yml", task["name"])["gpgcheck"] is True
    name, included = role.included_role("setup-RedHat.yml", "Trust the Storage Scale repository")
    assert name == "vendor_repository"
    assert included["vendor_repository_name"] == "gpuforge-gpfs"
    assert included["vendor_repository_dnf_gpgcheck"] is True
    repo = RoleRender("vendor_repository", os_name, **included).task_args(
        "setup-RedHat.yml", "Add the repository with signature checking"
    )
    assert repo["gpgcheck"] is True
    assert repo["baseurl"] in (
        DNF_SOURCES[source].get("gpuforge_spectrum_scale_repo_url"),
        "file://" + DNF_SOURCES[source].get("spectrum_scale_client_local_path", ""),
    )


@pytest.mark.parametrize("os_name", ["rhel8", "rhel9"])
@pytest.mark.parametrize("source", sorted(DNF_SOURCES))
def test_dnf_path_requires_ibms_key_pinned(os_name, source):
    role = render(os_name, **DNF_SOURCES[source])
    keyed = "no key" not in source
    assert all(role.conditions("setup-RedHat.yml", "Require IBM's package signing key", "that")) is keyed
    if not keyed:
        message = role.message("setup-RedHat.yml", "Require IBM's package signing key")
        assert "gpuforge_spectrum_scale_key_url" in message
        assert "gpuforge_spectrum_scale_key_fingerprint" in message
        assert "Public_Keys/SpectrumScale_public_key.pgp" in message


def test_dnf_key_must_be_pinned_not_just_named():
    # A key URL alone is not enough: the key must be pinned by fingerprint or sha256.
    role = render(
        "rhel9", gpuforge_spectrum_scale_repo_url="https://repo.example.com/r", gpuforge_spectrum_scale_key_url=KEY_URL
    )
    assert not all(role.conditions("setup-RedHat.yml", "Require IBM's package signing key", "that"))
    # The role-level name wins over the pin table's.
    role = render(
        "rhel9",
        gpuforge_spectrum_scale_key_url=KEY_URL,
        gpuforge_spectrum_scale_key_fingerprint="",
        spectrum_scale_client_key_fingerprint="0123456789ABCDEF0123456789ABCDEF01234567",
    )
    assert all(role.conditions("setup-RedHat.yml", "Require IBM's package signing key", "that"))


# --- apt repository ------------------------------------------------------------------------------------------


def test_no_task_adds_an_unsigned_apt_source():
    for path in TASKS.glob("*.yml"):
        for task in all_tasks(yaml.safe_load(path.read_text(encoding="utf-8"))):
            body = {key: value for key, value in task.items() if key not in ("block", "rescue", "always")}
            text = yaml.safe_dump(body)
            assert "trusted=yes" not in text and "allow_unauthenticated" not in text, (path.name, task["name"])
            assert "ansible.builtin.apt_repository" not in task and "ansible.builtin.deb822_repository" not in task, (
                "apt sources come from vendor_repository"
            )


@pytest.mark.parametrize("os_name", ["debian12", "ubuntu2204", "ubuntu2404"])
def test_apt_repository_path_needs_a_site_signed_repository(os_name):
    unsigned = render(os_name, gpuforge_spectrum_scale_repo_url="https://repo.example.com/gpfs_debs")
    assert unsigned.conditions("setup-Debian.yml", "Require the site's signed repository") == [True]
    assert not all(unsigned.conditions("setup-Debian.yml", "Require the site's signed repository", "that"))
    signed = render(
        os_name,
        gpuforge_spectrum_scale_repo_url="https://repo.example.com/gpfs_debs",
        gpuforge_spectrum_scale_key_url=KEY_URL,
        gpuforge_spectrum_scale_key_sha256=SHA,
    )
    assert all(signed.conditions("setup-Debian.yml", "Require the site's signed repository", "that"))
    name, included = signed.included_role("setup-Debian.yml", "Trust the site's Storage Scale repository")
    assert name == "vendor_repository"
    assert (included["vendor_repository_name"], included["vendor_repository_url"]) == (
        "gpuforge-gpfs",
        "https://repo.example.com/gpfs_debs",
    )
    assert (included["vendor_repository_key_url"], included["vendor_repository_key_sha256"]) == (KEY_URL, SHA)


# --- apt local_path ------------------------------------------------------------------------------------------

LOCAL = "/usr/lpp/mmfs/5.1.9.3/gpfs_debs"


def deb_items(role: RoleRender) -> list[dict]:
    """What the local_path tasks loop over (package name -> version, as dict2items)."""
    task = role.find_task("deb_files.yml", "Require a pinned sha256 for each package file")
    return role.task_templar(task).template(trust_as_template(task["loop"]))


def deb_file(role: RoleRender, item: dict) -> str:
    task = role.find_task("deb_files.yml", "Require a pinned sha256 for each package file")
    templar = role.task_templar(task, spectrum_scale_client_deb=item)
    return templar.template(trust_as_template("{{ spectrum_scale_client_deb_file }}"))


@pytest.mark.parametrize("os_name", ["debian12", "ubuntu2204"])
def test_local_path_refuses_a_package_file_without_a_pinned_sha256(os_name):
    role = render(os_name, spectrum_scale_client_local_path=LOCAL, gpuforge_spectrum_scale_deb_sha256={})
    # A local path: setup-Debian.yml includes deb_files.yml; packages not installed at their pins (no read here:
    # every package counts as unmet).
    assert role.conditions("setup-Debian.yml", "Install the package files from a local directory") == [True]
    assert role.conditions("deb_files.yml", "Install from a local directory") == [True]
    # Installed at their pins (the dpkg read before): no package file is checked or installed.
    read = {
        "installed": dict(item.split("=", 1) for item in role.var("spectrum_scale_client_package_pins")),
        "below_floor": [],
    }
    assert role.conditions(
        "deb_files.yml", "Install from a local directory", spectrum_scale_client_packages_read=read
    ) == [False]
    assert role.conditions("setup-Debian.yml", "Install from the site's signed repository") == [False]
    items = deb_items(role)
    # Every package the repository path would install is checked here too.
    pins = role.var("spectrum_scale_client_package_pins")
    assert [f"{item['key']}={item['value']}" for item in items] == pins
    for item in items:
        check = role.conditions(
            "deb_files.yml", "Require a pinned sha256 for each package file", "that", spectrum_scale_client_deb=item
        )
        assert check == [False], item
    message = role.message(
        "deb_files.yml", "Require a pinned sha256 for each package file", spectrum_scale_client_deb=items[0]
    )
    assert "gpuforge_spectrum_scale_deb_sha256" in message and deb_file(role, items[0]) in message


@pytest.mark.parametrize("os_name", ["debian12", "ubuntu2404"])
def test_local_path_accepts_only_pinned_files_with_that_sha256(os_name):
    base = render(os_name, spectrum_scale_client_local_path=LOCAL)
    items = deb_items(base)
    assert deb_file(base, {"key": "gpfs.base", "value": "5.1.9-3"}) == "gpfs.base_5.1.9-3_amd64.deb"
    pins = {deb_file(base, item): SHA for item in items}
    # Every file pinned but one: only that one is refused.
    unpinned = items[0]
    role = render(
        os_name,
        spectrum_scale_client_local_path=LOCAL,
        gpuforge_spectrum_scale_deb_sha256={k: v for k, v in pins.items() if k != deb_file(base, unpinned)},
    )
    for item in items:
        check = role.conditions(
            "deb_files.yml", "Require a pinned sha256 for each package file", "that", spectrum_scale_client_deb=item
        )
        assert all(check) is (item != unpinned), item
    # The file on the host must have the pinned sha256 (checked after the stat, before the install).
    role = render(os_name, spectrum_scale_client_local_path=LOCAL, gpuforge_spectrum_scale_deb_sha256=pins)
    item = items[0]
    for stat, accepted in (
        ({"exists": True, "checksum": SHA}, True),
        ({"exists": True, "checksum": "cd" * 32}, False),
        ({"exists": False}, False),
    ):
        result = {"stat": stat, "spectrum_scale_client_deb": item}
        check = role.conditions(
            "deb_files.yml", "Refuse a package file that is missing", "that", spectrum_scale_client_deb_result=result
        )
        assert all(check) is accepted, stat


def test_local_path_installs_only_after_the_checks():
    tasks = yaml.safe_load((TASKS / "deb_files.yml").read_text(encoding="utf-8"))
    block = next(t for t in tasks if t["name"].startswith("Install from a local directory"))
    names = [task["name"] for task in block["block"]]
    installs = [i for i, task in enumerate(block["block"]) if "ansible.builtin.apt" in task]
    assert len(installs) == 1
    assert names.index("Require a pinned sha256 for each package file") < installs[0]
    refuse = next(i for i, name in enumerate(names) if name.startswith("Refuse a package file"))
    assert refuse < installs[0]
    # The files checked are the files installed.
    checked = [task["loop"] for task in block["block"] if "ansible.builtin.stat" in task or task["name"] == names[0]]
    assert checked == [block["block"][installs[0]]["loop"]] * 2
    # No task outside the checked block installs package files.
    setup = yaml.safe_load((TASKS / "setup-Debian.yml").read_text(encoding="utf-8"))
    for task in [*all_tasks(tasks), *all_tasks(setup)]:
        if task not in block["block"]:
            assert "deb" not in (task.get("ansible.builtin.apt") or {}), task["name"]
