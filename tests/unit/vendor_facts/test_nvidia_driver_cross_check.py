"""nvidia_driver against the vendor facts registry, for every OS path the role claims.

The registry (vendor_facts/) records what NVIDIA's and Canonical's repositories publish, with sources and
independently of the role. Each path is resolved the way apt would resolve it on a host that has the
vendor's repository and the distribution's archive: the names and versions the role asks for must exist,
and the resolved closure must hold the driver, the kernel modules, nvidia-smi and the fabric manager on the
one release the role's verify step expects. RHEL and Ubuntu cannot be converged here; this is their guard.
"""

from __future__ import annotations

import pytest
from gpu_stack_render import RoleRender
from role_requests import apt_pins

from gpuforge import vendor_facts

ARCH_OF_FLAVOUR = {"proprietary": "Volta", "open": "Hopper"}
APT_PATHS = [
    ("debian12", "cuda", "proprietary"),
    ("debian12", "cuda", "open"),
    ("ubuntu2204", "cuda", "proprietary"),
    ("ubuntu2204", "cuda", "open"),
    ("ubuntu2404", "cuda", "proprietary"),
    ("ubuntu2404", "cuda", "open"),
    ("ubuntu2204", "canonical", "proprietary"),
    ("ubuntu2204", "canonical", "open"),
]


def _render(os_name: str, source: str, flavour: str, **extra) -> RoleRender:
    return RoleRender(
        "nvidia_driver",
        os_name,
        gpuforge_gpu_architecture=ARCH_OF_FLAVOUR[flavour],
        nvidia_driver_source=source,
        gpuforge_gpu_nvswitch=True,
        **extra,
    )


def _host_repositories(os_name: str, source: str) -> list[vendor_facts.Repository]:
    """What a host of this OS can install from: the distribution's archive and, on the cuda path, NVIDIA's."""
    keys = {"debian12": ["debian-contrib/bookworm"], "ubuntu2204": ["ubuntu-drivers/ubuntu2204"]}
    keys["ubuntu2404"] = ["ubuntu-drivers/ubuntu2404"]
    if source == "cuda":
        keys[os_name] = [f"nvidia-cuda/{os_name}", *keys[os_name]]
    return [vendor_facts.repository(key) for key in keys[os_name]]


def _requests(render: RoleRender) -> list[str]:
    names = render.task("setup-Debian.yml", "Install the driver packages")["name"]
    fabric_manager = render.task("setup-Debian.yml", "Install the fabric manager")["name"]
    return [*names, *fabric_manager]


def _pins(render: RoleRender, source: str) -> list[vendor_facts.Pin]:
    return apt_pins(render, "setup-Debian.yml", "Trust the CUDA repository") if source == "cuda" else []


def _provider(resolution: vendor_facts.Resolution, path: str) -> vendor_facts.Package:
    owners = [p for p in resolution.chosen.values() if path in p.files]
    assert len(owners) == 1, f"{path} is shipped by {[p.name for p in owners]}"
    return owners[0]


@pytest.mark.parametrize(("os_name", "source", "flavour"), APT_PATHS)
def test_every_requested_package_is_published_at_the_pinned_release(os_name, source, flavour):
    render = _render(os_name, source, flavour)
    repos = _host_repositories(os_name, source)
    for request in _requests(render):
        name, _, glob = request.partition("=")
        versions = [v for repo in repos for v in repo.versions(name)]
        assert versions, f"{os_name}/{source}: no repository publishes {name}"
        assert any(vendor_facts.fnmatch.fnmatchcase(v, glob) for v in versions), (
            f"{os_name}/{source}: {name} is published at {versions}, the role asks for {glob}"
        )


@pytest.mark.parametrize(("os_name", "source", "flavour"), APT_PATHS)
def test_the_resolved_closure_is_one_release_driver_modules_smi_and_fabric_manager(os_name, source, flavour):
    render = _render(os_name, source, flavour)
    release = render.var("nvidia_driver_version")
    resolution = vendor_facts.resolve(_host_repositories(os_name, source), _requests(render), _pins(render, source))
    smi = _provider(resolution, "/usr/bin/nvidia-smi")
    modules = [p for p in resolution.chosen.values() if "nvidia" in p.kernel_modules]
    assert smi.upstream.startswith(release + "-") or smi.upstream == release, (smi.name, smi.version, release)
    assert [p.upstream.split("-")[0] for p in modules] == [release], modules
    fabric_manager = resolution.chosen[render.var("nvidia_driver_fabricmanager_package")]
    assert fabric_manager.upstream.split("-")[0] == release
    # Every NVIDIA package of the branch the pins cover is on the release (no library floated alone).
    for package in resolution.chosen.values():
        if package.repository.startswith("nvidia-cuda/") and package.name != "cuda-drivers":
            assert package.upstream.split("-")[0] == release, (package.name, package.version)
    flavour_module = {p.name for p in modules}
    assert all(("open" in name) == (flavour == "open") for name in flavour_module), flavour_module


@pytest.mark.parametrize(("os_name", "flavour"), [("debian12", "proprietary"), ("ubuntu2204", "proprietary")])
def test_the_pins_hold_the_release_through_an_upgrade_and_without_them_it_floats(os_name, flavour):
    # Why the pins exist: NVIDIA's cuda-drivers-<branch> depends on the driver with ">=" (dstackai/dstack
    # PR 2355) and the repository offers newer builds, so an upgrade of the installed packages (apt's candidate
    # for each name, as unattended-upgrades would take it) leaves the release unless apt preferences hold it.
    render = _render(os_name, "cuda", flavour)
    release = render.var("nvidia_driver_version")
    repos = _host_repositories(os_name, "cuda")
    pins = _pins(render, "cuda")
    installed = vendor_facts.resolve(repos, _requests(render), pins)
    upgrade = sorted(installed.names())
    held = vendor_facts.resolve(repos, upgrade, pins)
    assert _provider(held, "/usr/bin/nvidia-smi").upstream.split("-")[0] == release
    try:
        floated = vendor_facts.resolve(repos, upgrade, [])
    except vendor_facts.ResolveError:
        return  # apt gives up: also not the pinned release
    assert _provider(floated, "/usr/bin/nvidia-smi").upstream.split("-")[0] != release


def test_debian_needs_contrib_and_the_role_enables_it():
    cuda = vendor_facts.repository("nvidia-cuda/debian12")
    render = _render("debian12", "cuda", "proprietary")
    enabled = set(render.var("nvidia_driver_archive_components"))
    assert set(cuda.fact("debian_components_required")) - {"main"} <= enabled
    contrib = vendor_facts.repository("debian-contrib/bookworm")
    needed = {dep for p in cuda.packages for dep in p.depends if dep in {q.name for q in contrib.packages}}
    assert needed == {"nvidia-installer-cleanup"}
    assert all(p.component == "contrib" for p in contrib.packages)


@pytest.mark.parametrize("os_name", ["debian12", "ubuntu2204", "ubuntu2404"])
def test_repository_url_and_key_are_the_vendors(os_name):
    render = _render(os_name, "cuda", "proprietary")
    repo = vendor_facts.repository(f"nvidia-cuda/{os_name}")
    assert render.var("nvidia_driver_cuda_repo_url") + "/" == repo.url
    assert render.var("gpuforge_cuda_repo_key_fingerprint") == repo.signing_key["fingerprint"]
    key_url = render.expr("{{ gpuforge_cuda_repo_key_url or (nvidia_driver_cuda_repo_url ~ '/3bf863cc.pub') }}")
    assert key_url == repo.signing_key["url"]


def test_noble_canonical_535_builds_are_transitional_and_the_role_has_no_canonical_release_there():
    # Second vendor review, F4: the archive's only 535-server build on 24.04 pulls the 580 server branch, so a
    # canonical 535 pin there installs R580 (or, with the 580 packages absent here, cannot resolve at all).
    archive = vendor_facts.repository("ubuntu-drivers/ubuntu2404")
    assert archive.fact("transitional_server_branches")["535"] == "580"
    for name in ("nvidia-headless-535-server", "nvidia-headless-535-server-open", "nvidia-utils-535-server"):
        (build,) = [p for p in archive.packages if p.name == name]
        assert any("-580-server" in relation for relation in build.depends), build
    with pytest.raises(vendor_facts.ResolveError, match="580-server"):
        vendor_facts.resolve(
            [archive], ["nvidia-headless-535-server=535.309.01-*", "nvidia-utils-535-server=535.309.01-*"]
        )
    render = _render("ubuntu2404", "canonical", "proprietary")
    assert render.var("nvidia_driver_version") == ""
    assert "535" in render.var("nvidia_driver_canonical_transitional_branches")


@pytest.mark.parametrize("os_name", ["ubuntu2204", "ubuntu2404"])
def test_canonical_path_creates_device_nodes_without_nvidia_modprobe(os_name):
    archive = vendor_facts.repository(f"ubuntu-drivers/{os_name}")
    assert archive.fact("ships_nvidia_modprobe") is False
    render = _render(os_name, "canonical", "proprietary")
    assert render.var("nvidia_driver_device_nodes_command")[0] != "nvidia-modprobe"
    assert _render(os_name, "cuda", "proprietary").var("nvidia_driver_device_nodes_command")[0] == "nvidia-modprobe"


@pytest.mark.parametrize("os_name", ["rhel8", "rhel9"])
@pytest.mark.parametrize("flavour", ["open", "proprietary"])
def test_rhel_streams_and_packages_exist(os_name, flavour):
    render = _render(os_name, "cuda", flavour)
    repo = vendor_facts.repository(f"nvidia-cuda/{os_name}")
    release = render.var("nvidia_driver_version")
    stream, *packages = render.var("nvidia_driver_rhel_packages")
    assert stream.removeprefix("@nvidia-driver:") in repo.fact("module_streams")
    packages.append(render.var("nvidia_driver_fabricmanager_package"))
    for spec in packages:
        name = spec.removesuffix("-" + release)
        assert name != spec, spec
        upstreams = [v.split(":")[-1].split("-")[0] for v in repo.versions(name)]
        assert release in upstreams, f"{os_name}: {name} published at {repo.versions(name)}"
    assert render.var("nvidia_driver_cuda_repo_url") + "/" == repo.url


@pytest.mark.parametrize(("os_name", "major"), [("rhel8", "8"), ("rhel9", "9")])
def test_rhel_epel_comes_from_the_base_url_not_the_release_package(os_name, major):
    # epel-release's repo file uses the public metalink whatever URL it came from (vendor_facts/epel/el.yml).
    epel = vendor_facts.repository("epel/el")
    assert epel.fact("release_package_repo_uses_metalink") is True
    render = _render(os_name, "cuda", "proprietary", gpuforge_epel_base_url="http://mirror.site/epel")
    from role_requests import include_vars, task

    # Every role that needs EPEL adds it through vendor_repository's one definition (tasks/epel.yml).
    for role in ("nvidia_driver", "apptainer", "slurm"):
        include = task(render, f"../../{role}/tasks/setup-RedHat.yml", "Add EPEL")["ansible.builtin.include_role"]
        assert include == {"name": "vendor_repository", "tasks_from": "epel"}, role
        tasks = (render.role_dir.parent / role / "tasks" / "setup-RedHat.yml").read_text(encoding="utf-8")
        assert "epel-release-latest" not in tasks and "gpuforge_epel_base_url" not in tasks, role
    values = include_vars(render, "../../vendor_repository/tasks/epel.yml", "Add EPEL")
    assert values["vendor_repository_url"].strip() == f"http://mirror.site/epel/{major}/Everything/x86_64/"
    assert values["vendor_repository_key_url"] == f"http://mirror.site/epel/RPM-GPG-KEY-EPEL-{major}"
    assert values["vendor_repository_key_fingerprint"] == epel.fact("key_fingerprints")[major]


@pytest.mark.parametrize("os_name", ["debian12", "ubuntu2204", "ubuntu2404"])
def test_the_pin_covers_every_package_published_at_the_release(os_name):
    # Version locks cover the whole closure (second vendor review, F3: nvidia-driver-libs depends on
    # libgl1-nvidia-glvnd-glx and nvidia-egl-icd at exactly its version, names no nvidia-* glob matches): every package
    # NVIDIA publishes at the pinned release is held by the CUDA pin file.
    render = _render(os_name, "cuda", "proprietary")
    release = render.var("nvidia_driver_version")
    pins = [pin for pin in _pins(render, "cuda") if pin.version.startswith(release)]
    repo = vendor_facts.repository(f"nvidia-cuda/{os_name}")
    at_release = [p for p in repo.packages if p.upstream.split("-")[0] == release]
    assert at_release
    unpinned = sorted({p.name for p in at_release if not any(pin.applies(p) for pin in pins)})
    assert unpinned == []


@pytest.mark.parametrize("os_name", ["rhel8", "rhel9"])
@pytest.mark.parametrize("flavour", ["open", "proprietary"])
def test_rhel_versionlock_covers_the_exact_requires_closure(os_name, flavour):
    # Second vendor review, F5: NVIDIA's packages chain exact Requires (nvidia-driver -> nvidia-driver-libs,
    # nvidia-kmod-common -> nvidia-kmod, ...) and the streams carry newer builds; NVIDIA's version-locking guide locks
    # every package of the release. Every package of the registry's closure of the role's request is locked.
    render = _render(os_name, "cuda", flavour)
    release = render.var("nvidia_driver_version")
    repo = vendor_facts.repository(f"nvidia-cuda/{os_name}")
    kmod = render.var("nvidia_driver_rhel_kmod_package")
    _stream, *specs = render.var("nvidia_driver_rhel_packages")
    requests = [spec.removesuffix("-" + release) for spec in [*specs, f"{kmod}-{release}"]]
    # the driver's part of the lock (DCGM's pair, locked beside it at its own version, is not this closure)
    lock = [spec for spec in render.var("nvidia_driver_dnf_versionlock") if not spec.startswith("datacenter-")]
    assert all(spec.endswith("-" + release) for spec in lock)
    locked = [spec.removesuffix("-" + release) for spec in lock]

    def versionlock(names):
        # dnf versionlock: a locked name offers only its locked release, other names every build
        return [vendor_facts.Pin((name,), f"*:{release}-*", 1001) for name in names] + [
            vendor_facts.Pin((name,), "*", -1) for name in names
        ]

    closure = vendor_facts.resolve([repo], requests, versionlock(locked))
    assert sorted(closure.names() - set(locked)) == []
    assert {p.upstream.split("-")[0].split(":")[-1] for p in closure.chosen.values()} == {release}
    # The four-package lock of before leaves the chain free: the newer build of an unlocked name breaks it.
    four = ["nvidia-driver", "nvidia-driver-cuda", "nvidia-modprobe", "nvidia-persistenced"]
    with pytest.raises(vendor_facts.ResolveError, match=r"535\.309\.01"):
        vendor_facts.resolve([repo], requests, versionlock(four))


@pytest.mark.parametrize("os_name", ["rhel8", "rhel9"])
def test_rhel_fabric_manager_name_follows_the_branch(os_name):
    # Second vendor review, F6: nvidia-fabric-manager before branch 580, nvidia-fabricmanager from 580.
    repo = vendor_facts.repository(f"nvidia-cuda/{os_name}")
    for release in ("535.183.01", "580.126.20"):
        render = _render(os_name, "cuda", "open", gpuforge_nvidia_driver_version=release)
        name = render.var("nvidia_driver_fabricmanager_package").removesuffix("-" + release)
        assert [v for v in repo.versions(name) if v.split("-")[0] == release], (release, name)
        assert name + "-" + release in render.var("nvidia_driver_dnf_versionlock")


@pytest.mark.parametrize("os_name", ["ubuntu2204", "ubuntu2404"])
def test_ubuntu_branch_590_names_are_refused(os_name):
    # Second vendor review, F6: from branch 590 NVIDIA's Ubuntu packages have no branch in their names.
    refuse = "Refuse unsupported systems and inconsistent settings"
    render = _render(os_name, "cuda", "open", gpuforge_nvidia_driver_version="590.44.01")
    assert render.refused("main.yml", refuse)
    assert "drop the branch from their names from branch 590" in " ".join(render.message("main.yml", refuse).split())
    assert not _render(os_name, "cuda", "open").refused("main.yml", refuse)


@pytest.mark.parametrize(("os_name", "release"), [("ubuntu2204", "22.04"), ("ubuntu2404", "24.04")])
def test_the_roles_transitional_server_branches_are_the_archives(os_name, release):
    # Second vendor review, F4, beyond 535 on 24.04: every server branch whose archive builds are transitional
    # packages (packages.ubuntu.com) is one the canonical source refuses, on the Ubuntu release that has them; the
    # branch the role pins by default on 22.04 is not one of them.
    archive = vendor_facts.repository(f"ubuntu-drivers/{os_name}")
    transitional = archive.fact("transitional_server_branches")
    render = _render(os_name, "canonical", "proprietary")
    assert render.var("nvidia_driver_os_version") == release
    assert render.var("nvidia_driver_canonical_transitional_branches") == transitional
    for branch, target in transitional.items():
        builds = [p for p in archive.packages if p.name == f"nvidia-headless-{branch}-server"]
        assert all(any(f"-{target}-server" in relation for relation in p.depends) for p in builds), builds
    if os_name == "ubuntu2204":
        assert render.var("nvidia_driver_branch") not in transitional


def test_a_canonical_565_server_release_on_noble_is_refused():
    # noble's nvidia-headless-565-server (565.57.01-0ubuntu0.24.04.4) is a transitional package to the 580 server
    # branch: an override to a 565 release installs R580 there, so the role refuses it as it refuses 535.
    archive = vendor_facts.repository("ubuntu-drivers/ubuntu2404")
    with pytest.raises(vendor_facts.ResolveError, match="580-server"):
        vendor_facts.resolve([archive], ["nvidia-headless-565-server=565.57.01-*"])
    render = _render("ubuntu2404", "canonical", "proprietary", gpuforge_nvidia_driver_version="565.57.01")
    assert render.var("nvidia_driver_branch") == "565"
    refusal = "Refuse unsupported systems and inconsistent settings"
    assert render.refused("main.yml", refusal)
    message = " ".join(render.message("main.yml", refusal).split())
    assert "565-server packages on 24.04 are transitional packages to the 580 server branch" in message
