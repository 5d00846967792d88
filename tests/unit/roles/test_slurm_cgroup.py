"""slurm's cgroup confinement against the Slurm build's plugins (second vendor review, F1): Ubuntu 22.04's Slurm 21.08
has no cgroup/v2 plugin and 22.04 boots the unified cgroup v2 hierarchy, where slurmd cannot initialise
proctrack/cgroup. The pin table says which builds have the plugin (checked against the registry's file lists), the
role reads the hierarchy of compute nodes only under such a build, turns `auto` off there and refuses `true`."""

from __future__ import annotations

import pytest
from gpu_stack_render import ROOT, RoleRender
from role_yaml import load_yaml

from gpuforge import vendor_facts

PINS = load_yaml(ROOT / "roles" / "gpuforge" / "defaults" / "main" / "slurm.yml")["gpuforge_slurm_packages"]
ARCHIVES = {"bookworm": "debian/bookworm", "jammy": "ubuntu/jammy", "noble": "ubuntu/noble"}
PLUGIN_DIR = "/usr/lib/x86_64-linux-gnu/slurm-wlm/"
READ = "Read whether compute nodes boot the unified cgroup v2 hierarchy"
REFUSE = "Refuse cgroup confinement that this Slurm cannot run on cgroup v2 nodes"


@pytest.mark.parametrize("release", sorted(ARCHIVES))
def test_the_pin_tables_plugin_flag_is_the_registrys_file_list(release):
    repo = vendor_facts.repository(ARCHIVES[release])
    (plugins,) = [
        p for p in repo.packages if p.name == "slurm-wlm-basic-plugins" and p.version == PINS[release]["slurm"]
    ]
    assert PLUGIN_DIR + "cgroup_v1.so" in plugins.files
    assert PINS[release]["cgroup_v2_plugin"] is (PLUGIN_DIR + "cgroup_v2.so" in plugins.files)


def _render(release: str, unified: dict[str, bool], slurm_cgroup="auto", virtualization="kvm") -> RoleRender:
    os_name = {"bookworm": "debian12", "jammy": "ubuntu2204", "noble": "ubuntu2404"}[release]
    hostvars = {
        host: {
            "ansible_facts": {"virtualization_type": virtualization},
            **({"slurm_cgroup_hierarchy": {"stat": {"exists": value}}} if value is not None else {}),
        }
        for host, value in unified.items()
    }
    hostvars["head"] = {"ansible_facts": {"virtualization_type": virtualization}}
    return RoleRender(
        "slurm",
        os_name,
        inventory_hostname="head",
        groups={"slurm_compute": list(unified), "slurm_controller": ["head"], "gpu_nodes": list(unified)},
        hostvars=hostvars,
        slurm_pins=PINS[release],
        slurm_cgroup=slurm_cgroup,
        slurm_is_compute=False,
    )


def test_jammy_auto_turns_confinement_off_on_cgroup_v2_nodes_and_true_is_refused():
    render = _render("jammy", {"gpu01": True, "gpu02": False})
    assert render.var("slurm_cgroup_v2_plugin") is False
    assert render.var("slurm_cgroup_unified_nodes") == ["gpu01"]
    assert render.var("slurm_cgroup_enabled") is False
    assert not render.refused("main.yml", REFUSE)
    forced = _render("jammy", {"gpu01": True, "gpu02": False}, slurm_cgroup=True)
    assert forced.var("slurm_cgroup_enabled") is True
    assert forced.refused("main.yml", REFUSE)
    message = " ".join(forced.message("main.yml", REFUSE).split())
    assert "Slurm 21.08.5-2ubuntu1 of Ubuntu 22.04 has no cgroup/v2 plugin" in message
    assert "compute nodes gpu01 boot the unified cgroup v2 hierarchy" in message
    assert "systemd.unified_cgroup_hierarchy=0" in message


def test_jammy_on_a_cgroup_v1_hierarchy_keeps_confinement():
    render = _render("jammy", {"gpu01": False, "gpu02": False})
    assert render.var("slurm_cgroup_enabled") is True
    assert not _render("jammy", {"gpu01": False}, slurm_cgroup=True).refused("main.yml", REFUSE)


@pytest.mark.parametrize("release", ["bookworm", "noble"])
def test_builds_with_the_v2_plugin_read_nothing_and_keep_confinement(release):
    render = _render(release, {"gpu01": None})
    assert render.var("slurm_cgroup_v2_plugin") is True
    assert render.var("slurm_cgroup_enabled") is True
    compute = RoleRender("slurm", "debian12", slurm_pins=PINS[release], slurm_is_compute=True)
    assert compute.conditions("main.yml", READ) == [False]
    assert not _render(release, {"gpu01": None}, slurm_cgroup=True).refused("main.yml", REFUSE)


def test_only_compute_nodes_under_a_build_without_the_plugin_read_the_hierarchy():
    compute = RoleRender("slurm", "ubuntu2204", slurm_pins=PINS["jammy"], slurm_is_compute=True)
    assert compute.conditions("main.yml", READ) == [True]
    controller = RoleRender("slurm", "ubuntu2204", slurm_pins=PINS["jammy"], slurm_is_compute=False)
    assert controller.conditions("main.yml", READ) == [False]


def test_container_nodes_stay_off_under_auto():
    assert _render("bookworm", {"gpu01": None}, virtualization="container").var("slurm_cgroup_enabled") is False
