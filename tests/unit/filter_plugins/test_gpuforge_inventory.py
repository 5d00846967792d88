"""The inventory check (filter_plugins/gpuforge_inventory.py): each check fails with the host, the variable and the
fix, and passes on a correct inventory. Tables and argument specs are this checkout's role defaults."""

from __future__ import annotations

import copy

import pytest
import yaml
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.vars.hostvars import HostVars
from ansible.vars.manager import VariableManager
from ansible_collections.gpuforge.cluster.plugins.filter.gpuforge_inventory import (
    as_int,
    check_inventory,
    gpuforge_inventory_problems,
    gpuforge_inventory_report,
)

GPU = {
    "gpuforge_expected_system": "dgx1-v100-edr",
    "gpuforge_expected_gpu_count": 8,
    "ipoib_interfaces": [{"hca": "mlx5_1", "port": 1, "address": "198.51.100.11/24"}],
}


def run(hosts: dict, groups: dict, **kwargs) -> list[dict]:
    """check_inventory with groups given as {group: [hosts]}; 'all' is every host."""
    groups = {"all": list(hosts), **groups}
    return check_inventory({name: copy.deepcopy(v) for name, v in hosts.items()}, groups, **kwargs)


def gpu_cluster(**overrides) -> tuple[dict, dict]:
    hosts = {"gpu01": {**GPU, **overrides}}
    return hosts, {"gpu_nodes": ["gpu01"]}


def only(problems, severity="error"):
    return [p for p in problems if p["severity"] == severity]


def one(problems, variable, severity="error") -> dict:
    found = [p for p in problems if p["variable"] == variable and p["severity"] == severity]
    assert len(found) == 1, problems
    return found[0]


def test_a_correct_gpu_node_has_no_problems():
    assert run(*gpu_cluster()) == []


# -- integers ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["eight", 8.0, True, -1, "8 ", "", [8]])
def test_gpu_count_must_really_be_an_integer(bad):
    problem = one(run(*gpu_cluster(gpuforge_expected_gpu_count=bad)), "gpuforge_expected_gpu_count")
    assert problem["host"] == "gpu01"
    assert "not a whole number" in problem["problem"]
    assert "gpuforge_expected_gpu_count: 8" in problem["fix"]


@pytest.mark.parametrize("good", [8, "8"])
def test_gpu_count_as_int_or_digits_passes(good):
    assert run(*gpu_cluster(gpuforge_expected_gpu_count=good)) == []


def test_eight_is_an_error_on_any_host_not_only_gpu_nodes():
    problems = run({"head01": {"gpuforge_expected_gpu_count": "eight"}}, {"head_nodes": ["head01"]})
    assert one(problems, "gpuforge_expected_gpu_count")["host"] == "head01"


def test_as_int():
    assert [as_int(v) for v in (8, "8", "-1", "eight", 8.0, True, None)] == [8, 8, -1, None, None, None, None]


def test_role_option_types_come_from_argument_specs():
    problems = run(*gpu_cluster(ipoib_mtu="big", ipoib_apply="maybe", ipoib_mode="conected"))
    assert "not a whole number" in one(problems, "ipoib_mtu")["problem"]
    assert "roles/ipoib/meta/argument_specs.yml" in one(problems, "ipoib_mtu")["fix"]
    assert "not a boolean" in one(problems, "ipoib_apply")["problem"]
    mode = one(problems, "ipoib_mode")
    assert 'not one of "datagram", "connected"' in mode["problem"]
    assert 'did you mean "connected"' in mode["problem"]
    assert run(*gpu_cluster(ipoib_mtu="2044", ipoib_apply="yes", ipoib_mode="connected")) == []


def test_nested_options_required_unknown_and_typed():
    mounts = [
        {"path": "/home", "server": "198.51.100.10"},  # no export
        {"path": "/apps", "server": "198.51.100.10", "export": "/export/apps", "optoins": ["rw"]},
        {"path": "/scratch", "server": "198.51.100.10", "export": "/scratch", "rdma": "perhaps"},
    ]
    problems = run({"gpu01": {**GPU, "nfs_client_mounts": mounts}}, {"gpu_nodes": ["gpu01"]})
    assert one(problems, "nfs_client_mounts[0].export")["problem"] == "is missing (required)"
    unknown = one(problems, "nfs_client_mounts[1].optoins")
    assert 'did you mean "options"' in unknown["problem"]
    assert "not a boolean" in one(problems, "nfs_client_mounts[2].rdma")["problem"]


def test_templated_values_are_left_to_the_role():
    hosts, groups = gpu_cluster(ipoib_mtu="{{ site_mtu }}")
    assert run(hosts, groups) == []


# -- expected systems ---------------------------------------------------------------------------------------------


def test_unknown_expected_system_names_the_choices():
    problem = one(run(*gpu_cluster(gpuforge_expected_system="dgx1-v100-ebr")), "gpuforge_expected_system")
    assert 'did you mean "dgx1-v100-edr"' in problem["problem"]
    assert "dgx-h100-ndr" in problem["fix"] and "gpuforge inventory capture" in problem["fix"]


def test_gpu_node_without_expected_system_is_a_warning():
    hosts = {"gpu01": {"gpuforge_expected_gpu_count": 8}}
    problems = run(hosts, {"gpu_nodes": ["gpu01"]})
    assert only(problems) == []
    assert "validate.yml cannot judge" in one(problems, "gpuforge_expected_system", "warning")["problem"]


def test_only_gpu_nodes_need_a_known_system():
    # The lab sets gpuforge_expected_system to the profile on every node, "storage" and "head" included.
    hosts = {"storage01": {"gpuforge_expected_system": "storage"}}
    assert run(hosts, {"storage_nodes": ["storage01"]}) == []


def test_gpu_count_must_agree_with_the_system():
    problem = one(run(*gpu_cluster(gpuforge_expected_gpu_count=4)), "gpuforge_expected_gpu_count")
    assert problem["problem"] == "is 4, but its expected system dgx1-v100-edr has gpu_count 8"
    assert "gpuforge_expected_gpu_count: 8" in problem["fix"]


def site_system(**changes) -> dict:
    system = {
        "gpu_sku": "H100-80GB-HBM3",
        "gpu_count": 8,
        "hcas": [{"name": "mlx5_0", "ports": [{"port": 1, "link": "NDR"}]}],
        "numa_affinity": [{"gpus": [0, 1, 2, 3], "hcas": ["mlx5_0"], "numa": 0}],
    }
    system.update(changes)
    return {"gpuforge_expected_system": "site", "gpuforge_expected_systems": {"site": system}}


def test_a_site_system_in_the_inventory_passes():
    assert run(*gpu_cluster(gpuforge_expected_gpu_count=8, **site_system())) == []


@pytest.mark.parametrize(
    ("changes", "variable", "text"),
    [
        ({"gpu_sku": "H100-SXM"}, "gpuforge_expected_systems.site.gpu_sku", "not a key of gpuforge_expected_gpu_skus"),
        ({"gpu_count": "eight"}, "gpuforge_expected_systems.site.gpu_count", "not a whole number of GPUs"),
        (
            {"hcas": [{"name": "mlx5_0", "ports": [{"port": 1, "link": "NRD"}]}]},
            "gpuforge_expected_systems.site.hcas[0].ports[0].link",
            'not a key of gpuforge_expected_link_speeds (did you mean "NDR"?)',
        ),
        (
            {"numa_affinity": [{"gpus": [0, 8], "hcas": ["mlx5_0"], "numa": 0}]},
            "gpuforge_expected_systems.site.numa_affinity[0].gpus",
            "lists GPU 8, but the system's GPUs are 0..7",
        ),
        (
            {"numa_affinity": [{"gpus": [0], "hcas": ["mlx5_9"], "numa": 0}]},
            "gpuforge_expected_systems.site.numa_affinity[0].hcas",
            "not one of the system's HCAs (mlx5_0)",
        ),
        (
            {"numa_affinity": [{"gpus": [0], "hcas": [], "numa": "zero"}]},
            "gpuforge_expected_systems.site.numa_affinity[0].numa",
            "not a NUMA node number",
        ),
    ],
)
def test_system_tables_are_checked(changes, variable, text):
    problems = run(*gpu_cluster(gpuforge_expected_gpu_count=8, **site_system(**changes)))
    problem = one(problems, variable)
    assert text in problem["problem"], problem
    assert problem["host"] == "gpu01" and problem["fix"]


def test_sku_and_link_speed_entries_are_typed():
    hosts, groups = gpu_cluster(
        gpuforge_expected_gpu_count=8,
        gpuforge_expected_gpu_skus={"H100-80GB-HBM3": {"gpu_model": "NVIDIA H100 80GB HBM3", "nvlink_links": "18x"}},
        gpuforge_expected_link_speeds={"NDR": {"rate_gbit_per_s": "fast", "link_layer": "IB"}},
        **site_system(),
    )
    problems = run(hosts, groups)
    assert "not a whole number" in one(problems, "gpuforge_expected_gpu_skus.H100-80GB-HBM3.nvlink_links")["problem"]
    assert "not a rate" in one(problems, "gpuforge_expected_link_speeds.NDR.rate_gbit_per_s")["problem"]
    assert "InfiniBand, Ethernet" in one(problems, "gpuforge_expected_link_speeds.NDR.link_layer")["problem"]


def test_gpu_architecture_and_nvswitch():
    problems = run(*gpu_cluster(gpuforge_gpu_architecture="Hoper", gpuforge_gpu_nvswitch="sometimes"))
    assert 'did you mean "Hopper"' in one(problems, "gpuforge_gpu_architecture")["problem"]
    assert "not a boolean" in one(problems, "gpuforge_gpu_nvswitch")["problem"]
    assert run(*gpu_cluster(gpuforge_gpu_architecture="Volta", gpuforge_gpu_nvswitch=False)) == []


# -- groups that need each other -----------------------------------------------------------------------------------


def test_every_host_is_in_a_gpuforge_group():
    problem = one(run({"stray": {}}, {"misc": ["stray"]}), "group_names")
    assert problem["host"] == "stray"
    assert "the host is in: misc" in problem["problem"]
    assert "gpu_nodes, storage_nodes or head_nodes" in problem["fix"]
    # Hosts only in a role group (nfs_clients, spectrum_scale_cluster) are fine.
    assert run({"scale00": {}}, {"spectrum_scale_cluster": ["scale00"]}) == []


def test_slurm_compute_needs_a_controller():
    hosts = {"gpu01": dict(GPU), "head01": {}}
    problem = one(run(hosts, {"gpu_nodes": ["gpu01"], "slurm_compute": ["gpu01"]}), "slurm_controller (group)")
    assert problem["host"] == "gpu01"
    assert "has no hosts, but the host is in slurm_compute" in problem["problem"]
    assert "add the head node that runs slurmctld to slurm_controller" in problem["fix"]
    groups = {
        "gpu_nodes": ["gpu01"],
        "slurm_compute": ["gpu01"],
        "head_nodes": ["head01"],
        "slurm_controller": ["head01"],
    }
    assert run(hosts, groups) == []


def test_slurm_controller_group_name_is_the_roles_variable():
    hosts = {"gpu01": {**GPU, "slurm_controller_group": "ctl"}, "head01": {}}
    groups = {"gpu_nodes": ["gpu01"], "slurm_compute": ["gpu01"], "head_nodes": ["head01"], "ctl": ["head01"]}
    assert run(hosts, groups) == []


def test_subnet_manager_must_be_an_infiniband_host():
    problems = run({"sm01": {}}, {"ib_subnet_manager": ["sm01"]})
    problem = one(problems, "ib_subnet_manager (group)")
    assert "in none of gpu_nodes, storage_nodes, head_nodes" in problem["problem"]
    assert "add it to storage_nodes or head_nodes" in problem["fix"]
    assert run({"sm01": {}}, {"ib_subnet_manager": ["sm01"], "storage_nodes": ["sm01"]}) == []


def test_subnet_manager_on_a_roce_only_system_is_an_error():
    hosts = {"vm01": {"gpuforge_expected_system": "vsphere-t4-vgpu-roce", "gpuforge_expected_gpu_count": 1}}
    problem = one(run(hosts, {"gpu_nodes": ["vm01"], "ib_subnet_manager": ["vm01"]}), "ib_subnet_manager (group)")
    assert "only Ethernet (RoCE) ports" in problem["problem"]


def test_spectrum_scale_clients_need_a_cluster_member_and_a_complete_remote_cluster():
    client = {
        **GPU,
        "spectrum_scale_client_remote_filesystems": [{"device": "fs0", "mount_point": "/gpfs/fs0"}],
        "spectrum_scale_client_remote_cluster": {"name": "ess.example.com"},
    }
    problems = run({"gpu01": client}, {"gpu_nodes": ["gpu01"], "spectrum_scale_clients": ["gpu01"]})
    member = one(problems, "spectrum_scale_cluster (group)")
    assert "Storage Scale client" in member["problem"] and "quorum-manager" in member["fix"]
    remote = one(problems, "spectrum_scale_client_remote_cluster")
    assert "has no contact_nodes" in remote["problem"]
    client["spectrum_scale_client_remote_cluster"]["contact_nodes"] = "ess1,ess2"
    hosts = {"gpu01": client, "scale00": {}}
    groups = {"gpu_nodes": ["gpu01"], "spectrum_scale_clients": ["gpu01"], "spectrum_scale_cluster": ["scale00"]}
    assert run(hosts, groups) == []


def test_scale_clients_that_the_inventory_does_not_configure_only_warn():
    # An inventory that names the clients for the Kubernetes add-ons only (tests/fixtures/k8s/dgx1_edr).
    problems = run({"gpu01": dict(GPU)}, {"gpu_nodes": ["gpu01"], "spectrum_scale_clients": ["gpu01"]})
    assert only(problems) == []
    assert one(problems, "spectrum_scale_cluster (group)", "warning")["host"] == "gpu01"


def test_lab_needs_its_generated_vars():
    problems = run({"gpu01": {**GPU, "gpuforge_lab": True}}, {"gpu_nodes": ["gpu01"]})
    assert "gpuforge lab up" in one(problems, "gpuforge_lab_mirror_url")["fix"]
    assert (
        run(
            {"gpu01": {**GPU, "gpuforge_lab": True, "gpuforge_lab_mirror_url": "http://mirror"}},
            {"gpu_nodes": ["gpu01"]},
        )
        == []
    )


# -- IPoIB -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "text"),
    [
        ("198.51.100.11", "has no prefix length"),
        ("198.51.100.300/24", "not an IP address"),
        ("198.51.100.11/33", "not an IP address"),
        ("198.51.100.11/0", "a prefix of 0"),
        ("198.51.100.0/24", "the network address of 198.51.100.0/24"),
        ("198.51.100.255/24", "the broadcast address of 198.51.100.0/24"),
        ("127.0.0.1/8", "cannot be a host address"),
    ],
)
def test_ipoib_addresses(address, text):
    hosts, groups = gpu_cluster(ipoib_interfaces=[{"hca": "mlx5_1", "address": address}])
    problem = one(run(hosts, groups), "ipoib_interfaces[0].address")
    assert text in problem["problem"]
    assert problem["host"] == "gpu01" and problem["fix"]


@pytest.mark.parametrize("address", ["198.51.100.11/24", "198.51.100.11/32", "10.10.11.1/31", "2001:db8::11/64"])
def test_valid_ipoib_addresses(address):
    assert run(*gpu_cluster(ipoib_interfaces=[{"name": "ib1", "address": address}])) == []


def test_ipoib_addresses_are_unique_across_hosts():
    same = [{"hca": "mlx5_1", "address": "198.51.100.11/24"}]
    hosts = {"gpu01": dict(GPU), "gpu02": {**GPU, "ipoib_interfaces": same}, "gpu03": dict(GPU)}
    hosts["gpu03"]["ipoib_interfaces"] = [{"hca": "mlx5_1", "address": "198.51.100.13/24"}]
    problems = run(hosts, {"gpu_nodes": ["gpu01", "gpu02", "gpu03"]})
    assert sorted(p["host"] for p in problems) == ["gpu01", "gpu02"]
    assert problems[0]["variable"] == "ipoib_interfaces[0].address"
    assert (
        "198.51.100.11 is also the IPoIB address of gpu02"
        in next(p for p in problems if p["host"] == "gpu01")["problem"]
    )


def test_ipoib_entry_needs_an_interface_and_an_mtu_that_fits_the_mode():
    interfaces = [
        {"port": 1, "address": "198.51.100.11/24"},
        {"name": "ib1", "address": "198.51.100.12/24", "mtu": 9000},
        {"name": "ib1", "address": "198.51.100.13/24", "mode": "connected", "mtu": 65520},
    ]
    problems = run(*gpu_cluster(ipoib_interfaces=interfaces))
    assert "names neither the interface" in one(problems, "ipoib_interfaces[0]")["problem"]
    assert "outside 576..4092" in one(problems, "ipoib_interfaces[1].mtu")["problem"]
    assert "configures ib1 a second time" in one(problems, "ipoib_interfaces[2]")["problem"]
    problems = run(*gpu_cluster(ipoib_mode="datagram", ipoib_mtu=4096))
    assert "outside 576..4092" in one(problems, "ipoib_mtu")["problem"]


# -- URLs -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "text"),
    [
        ("", "is empty"),
        ("mirror.example.com/cuda", "not an http(s):// or file:// URL"),
        ("ftp://mirror.example.com/cuda", "not an http(s):// or file:// URL"),
        ("https:///cuda", "not an http(s):// or file:// URL"),
        (42, "not a URL"),
    ],
)
def test_base_urls(url, text):
    problem = one(run(*gpu_cluster(gpuforge_cuda_repo_base_url=url)), "gpuforge_cuda_repo_base_url")
    assert text in problem["problem"]
    assert "developer.download.nvidia.com" in problem["fix"]  # the default, as an example


@pytest.mark.parametrize("url", ["https://mirror.example.com/cuda/repos", "http://mirror/cuda", "file:///srv/repo"])
def test_good_base_urls(url):
    assert run(*gpu_cluster(gpuforge_cuda_repo_base_url=url)) == []


def test_other_urls_are_checked_when_set_and_a_trailing_slash_warns():
    problems = run(
        *gpu_cluster(gpuforge_cuda_repo_key_url="keys/cuda.pub", gpuforge_epel_base_url="https://m.example.com/epel/")
    )
    assert "not an http(s)://" in one(problems, "gpuforge_cuda_repo_key_url")["problem"]
    assert "ends with '/'" in one(problems, "gpuforge_epel_base_url", "warning")["problem"]
    assert run(*gpu_cluster(gpuforge_cuda_repo_key_url="")) == []  # empty = not used


# -- typos ------------------------------------------------------------------------------------------------------


def test_typo_of_a_known_variable_is_a_warning():
    problems = run(*gpu_cluster(gpuforge_expected_sytem="dgx1-v100-edr", ipoib_interface=[]))
    assert only(problems) == []
    warning = one(problems, "gpuforge_expected_sytem", "warning")
    assert "typo of gpuforge_expected_system" in warning["problem"]
    assert "rename it to gpuforge_expected_system" in warning["fix"]
    assert "typo of ipoib_interfaces" in one(problems, "ipoib_interface", "warning")["problem"]


def test_site_variables_are_not_typos():
    assert run(*gpu_cluster(site_mirror="https://mirror.example.com", gpuforge_site_owner="hpc-team")) == []


# -- the inventory itself ------------------------------------------------------------------------------------------


def test_an_inventory_without_hosts_is_an_error(tmp_path):
    problems = check_inventory({}, {"all": [], "ungrouped": []}, sources=[str(tmp_path / "hosts.yml")])
    assert [p["problem"] for p in problems][:1] == ["does not exist"]
    assert "has no hosts" in problems[1]["problem"]
    assert problems[1]["host"] == "(inventory)"


def test_report_merges_hosts_with_the_same_problem():
    hosts = {f"gpu{i:02d}": {**GPU, "gpuforge_expected_gpu_count": "eight", "ipoib_interfaces": []} for i in range(8)}
    problems = run(hosts, {"gpu_nodes": list(hosts)})
    lines = gpuforge_inventory_report(problems, "error")
    assert lines == [
        'gpu00, gpu01, gpu02, gpu03, gpu04, gpu05 (+2 more): gpuforge_expected_gpu_count is "eight", not a whole '
        "number of GPUs (the int filter would read it as 0). Fix: write the number of GPUs as digits, e.g. "
        "gpuforge_expected_gpu_count: 8."
    ]
    text = gpuforge_inventory_report(problems, "error", title="The inventory has errors")
    assert text.splitlines()[0] == "The inventory has errors (1; host: variable problem. Fix: ...):"
    assert gpuforge_inventory_report(problems, "warning") == []


# -- through Ansible: hostvars template on access, raw values, omit and undefined -----------------------------------


def init_collection_loader() -> None:
    """Lookups such as ansible.builtin.env resolve as under ansible-playbook."""
    from ansible.utils.collection_loader import AnsibleCollectionConfig

    if AnsibleCollectionConfig.collection_finder is None:
        from ansible.plugins.loader import init_plugin_loader

        init_plugin_loader()


def load(tmp_path, hosts_yml: str, group_vars: dict | None = None):
    init_collection_loader()
    (tmp_path / "hosts.yml").write_text(hosts_yml, encoding="utf-8")
    if group_vars:
        (tmp_path / "group_vars").mkdir()
        (tmp_path / "group_vars" / "all.yml").write_text(yaml.safe_dump(group_vars), encoding="utf-8")
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(tmp_path / "hosts.yml")])
    variables = VariableManager(loader=loader, inventory=inventory)
    return HostVars(inventory, variables, loader), inventory.get_groups_dict()


def test_filter_on_ansible_hostvars(tmp_path):
    hostvars, groups = load(
        tmp_path,
        """
all:
  children:
    gpu_nodes:
      hosts:
        gpu01: {ipoib_interfaces: [{hca: mlx5_1, address: "{{ ipoib_net }}.11/24"}]}
        gpu02: {ipoib_interfaces: [{hca: mlx5_1, address: "{{ ipoib_net }}.11/24"}]}
        gpu03: {gpuforge_expected_system: "{{ lab_profile | default(omit) }}"}
        gpu04: {gpuforge_expected_gpu_count: "{{ facts_count }}"}
""",
        {
            "ipoib_net": "198.51.100",
            "gpuforge_expected_system": "dgx1-v100-edr",
            "mirror": "https://mirror.example.com",
            "gpuforge_cuda_repo_base_url": "{{ mirror }}/cuda/repos",
            "gpuforge_epel_base_url": "{{ mirror }}",
            "gpuforge_doca_ofed_base_url": "{{ mirror | replace('https://', '') }}/doca",
        },
    )
    problems = gpuforge_inventory_problems(hostvars, groups, [str(tmp_path / "hosts.yml")])
    by = {(p["host"], p["variable"], p["severity"]) for p in problems}
    # Templates are evaluated like the play would: duplicate addresses and a scheme-less URL are found.
    assert ("gpu01", "ipoib_interfaces[0].address", "error") in by
    assert ("gpu02", "ipoib_interfaces[0].address", "error") in by
    assert {(h, "gpuforge_doca_ofed_base_url", "error") for h in ("gpu01", "gpu02", "gpu03", "gpu04")} <= by
    assert not any(v == "gpuforge_cuda_repo_base_url" for _, v, _ in by)
    # omit leaves the variable unset (a warning on a GPU node), an undefined template cannot be checked.
    assert ("gpu03", "gpuforge_expected_system", "warning") in by
    undefined = next(p for p in problems if p["host"] == "gpu04" and p["variable"] == "gpuforge_expected_gpu_count")
    assert undefined["severity"] == "warning" and "could not be evaluated" in undefined["problem"]


def test_filter_never_evaluates_variables_it_does_not_check(tmp_path):
    marker = tmp_path / "side-effect"
    hostvars, groups = load(
        tmp_path,
        f"""
all:
  children:
    gpu_nodes:
      hosts:
        gpu01:
          gpuforge_expected_system: dgx1-v100-edr
          spectrum_scale_csi_clusters:
            - password: "{{{{ lookup('ansible.builtin.password', '{marker}') }}}}"
""",
    )
    assert gpuforge_inventory_problems(hostvars, groups, []) == []
    assert not marker.exists()


@pytest.mark.parametrize(
    ("old", "new", "value"),
    [
        ("gpuforge_bench_ib_expected_gbps", "gpuforge_bench_ib_expected_gbit_per_s", 56),  # the retired name
        ("gpuforge_bench_nccl_min_busbw", "gpuforge_bench_nccl_min_busbw_gbyte_per_s", 40.0),  # the retired name
    ],
)
def test_a_variable_renamed_for_its_unit_is_an_error_naming_the_new_name(old, new, value):
    problem = one(run(*gpu_cluster(**{old: value})), old)
    assert f"renamed to {new}" in problem["problem"]
    assert f"rename it to {new}" in problem["fix"]
    assert run(*gpu_cluster(**{new: value})) == []


def test_a_link_speed_with_the_retired_rate_key_is_an_error_naming_the_new_key():
    old = {"NDR": {"rate_gbps": 400, "link_layer": "InfiniBand"}}  # the retired key
    problems = run(*gpu_cluster(gpuforge_expected_gpu_count=8, gpuforge_expected_link_speeds=old, **site_system()))
    problem = one(problems, "gpuforge_expected_link_speeds.NDR.rate_gbps")  # retired
    assert "renamed to rate_gbit_per_s" in problem["problem"]
    new = {"NDR": {"rate_gbit_per_s": 400, "link_layer": "InfiniBand"}}
    problems = run(*gpu_cluster(gpuforge_expected_gpu_count=8, gpuforge_expected_link_speeds=new, **site_system()))
    assert [p for p in problems if "gpuforge_expected_link_speeds" in p["variable"]] == []


def test_an_nccl_floor_with_the_retired_gb_per_s_key_is_an_error_naming_the_new_key():
    old = {"H100-80GB-HBM3": {"gpus": 8, "min_busbw_gb_per_s": 460}}  # the retired key
    problems = run(*gpu_cluster(gpuforge_expected_nccl_single_node_busbw=old))
    problem = one(problems, "gpuforge_expected_nccl_single_node_busbw.H100-80GB-HBM3.min_busbw_gb_per_s")  # retired
    assert "renamed to min_busbw_gbyte_per_s" in problem["problem"]
    assert problem["fix"] == "write min_busbw_gbyte_per_s"
    new = {"H100-80GB-HBM3": {"gpus": 8, "min_busbw_gbyte_per_s": 460}}
    assert run(*gpu_cluster(gpuforge_expected_nccl_single_node_busbw=new)) == []
