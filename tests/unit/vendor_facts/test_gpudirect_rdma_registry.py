"""gpudirect_rdma against the vendor facts registry (vendor_facts/mellanox-nv-peer-memory/1.3-0.yml): the driver
branch from which the role loads the driver's own nvidia_peermem, and, for older drivers, the files the legacy
nv_peer_memory build really produces and where (M12). The build cannot run here (no kernel headers, no driver):
the role's build commands, output paths and artifact names are rendered per OS and compared with the registry."""

from __future__ import annotations

import pytest
import yaml
from gpu_stack_render import RoleRender
from role_yaml import trusted

from gpuforge import vendor_facts

PLAY = {"ansible_play_hosts": ["gpu01", "gpu02"], "playbook_dir": "/srv/gpuforge/playbooks"}
DEB_OSES = ["debian12", "ubuntu2204", "ubuntu2404"]
RPM_OSES = ["rhel8", "rhel9"]


@pytest.fixture(scope="module")
def release() -> vendor_facts.Repository:
    return vendor_facts.repository("mellanox-nv-peer-memory/1.3-0")


def _task(render: RoleRender, name_start: str, **loop_vars) -> dict | None:
    """The rendered module arguments of the first task in tasks/legacy.yml, blocks included, whose name starts
    with name_start (loop_vars: e.g. the loop's `item`); None when there is none."""

    def walk(tasks):
        for task in tasks:
            if task.get("name", "").startswith(name_start):
                return task
            found = walk(task.get("block", []) + task.get("rescue", []) + task.get("always", []))
            if found:
                return found
        return None

    task = walk(yaml.safe_load((render.role_dir / "tasks" / "legacy.yml").read_text(encoding="utf-8")))
    if task is None:
        return None
    module = next(key for key in task if key.startswith("ansible.builtin."))
    templar = render.templar.copy_with_new_env(available_variables={**render.templar.available_variables, **loop_vars})
    return templar.template(trusted(task[module]))


def _render(os_name: str, release: vendor_facts.Repository, changelog: str | None = None) -> RoleRender:
    # What `dpkg-parsechangelog -S Version` prints on the build host (gpu01) in the unpacked 1.3-0 source.
    printed = changelog if changelog is not None else release.fact("deb_changelog_version")
    hostvars = {"gpu01": {"gpudirect_rdma_legacy_changelog": {"stdout": printed + "\n", "rc": 0}}}
    return RoleRender("gpudirect_rdma", os_name, hostvars=hostvars, **PLAY)


@pytest.mark.parametrize("os_name", DEB_OSES + RPM_OSES)
def test_nvidia_peermem_from_the_first_branch_that_ships_it(os_name, release):
    render = _render(os_name, release)
    assert int(render.var("gpudirect_rdma_peermem_min_branch")) == release.fact("peermem_min_branch")
    assert render.var("gpuforge_nv_peer_memory_version") == release.fact("tag")


@pytest.mark.parametrize("os_name", DEB_OSES)
def test_deb_build_reads_its_version_from_debian_changelog(os_name, release):
    render = _render(os_name, release)
    build_dir = render.var("gpudirect_rdma_legacy_build_dir")
    source_dir = f"{build_dir}/{release.fact('source_directory')}"
    read = _task(render, "Read the package version")
    assert read is not None, "the role must read the .deb version the build will use (debian/changelog)"
    shows_version = (["dpkg-parsechangelog", "-S", "Version"], ["dpkg-parsechangelog", "--show-field", "Version"])
    assert read["argv"] in shows_version
    assert read["chdir"] == source_dir
    build = _task(render, "Build the binary packages")
    assert build["argv"][0] == "dpkg-buildpackage"
    assert build["chdir"] == source_dir


@pytest.mark.parametrize("os_name", DEB_OSES)
def test_deb_build_dependencies_are_installed_first(os_name, release):
    # dpkg-buildpackage stops on any missing Build-Depends of debian/control.
    deps = set(_render(os_name, release).var("gpudirect_rdma_legacy_build_deps"))
    wanted = {relation.split()[0] for relation in release.fact("deb_build_depends")}
    assert wanted <= deps, sorted(wanted - deps)


@pytest.mark.parametrize("os_name", DEB_OSES)
def test_deb_artifacts_are_the_ones_dpkg_buildpackage_writes(os_name, release):
    render = _render(os_name, release)
    build_dir = render.var("gpudirect_rdma_legacy_build_dir")
    artifacts = release.fact("deb_artifacts")
    assert render.var("gpudirect_rdma_legacy_packages") == artifacts
    # dpkg-buildpackage writes to the parent of the source tree, which the role unpacks into the build dir.
    assert _task(render, "Unpack the source")["dest"] == build_dir
    assert _task(render, "Build the binary packages")["creates"] == f"{build_dir}/{artifacts[0]}"
    assert _task(render, "Collect the packages", item=artifacts[1])["src"] == f"{build_dir}/{artifacts[1]}"


def test_deb_artifact_names_follow_the_changelog_not_the_tag(release):
    # A later tag whose changelog is current (say 1.4-0) gives 1.4-0 names without editing the role.
    render = _render("debian12", release, changelog="1.4-0")
    assert render.var("gpudirect_rdma_legacy_packages") == [
        "nvidia-peer-memory_1.4-0_all.deb",
        "nvidia-peer-memory-dkms_1.4-0_all.deb",
    ]


@pytest.mark.parametrize("os_name", RPM_OSES)
def test_rpm_is_rebuilt_into_a_known_topdir_and_fetched_from_there(os_name, release):
    render = _render(os_name, release)
    assert render.var("gpudirect_rdma_legacy_orig") == release.fact("rpm_source_package")
    command = render.var("gpudirect_rdma_legacy_build_cmd")
    assert command[:2] == ["rpmbuild", "--rebuild"] and command[-1] == release.fact("rpm_source_package")
    defines = [command[i + 1] for i, word in enumerate(command) if word == "--define"]
    topdirs = [value.split(None, 1)[1] for value in defines if value.startswith("_topdir ")]
    assert len(topdirs) == 1 and topdirs[0].startswith(render.var("gpudirect_rdma_legacy_build_dir") + "/")
    output = release.fact("rpm_output_directory").replace("%{_topdir}", topdirs[0])
    artifacts = release.fact("rpm_artifacts")
    assert render.var("gpudirect_rdma_legacy_packages") == artifacts
    assert _task(render, "Build the binary packages")["creates"] == f"{output}/{artifacts[0]}"
    assert _task(render, "Collect the packages", item=artifacts[0])["src"] == f"{output}/{artifacts[0]}"
