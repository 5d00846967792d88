"""Lab specs and the inventory written from them."""

from __future__ import annotations

import pytest

from gpuforge.lab import inventory, spec, ssh


def test_counts_name_nodes_by_kind_and_assign_groups():
    lab = spec.from_counts(3, ["dgx1-v100-edr", "dgx1-v100-edr", "storage"])
    assert [(node.name, node.profile) for node in lab.nodes] == [
        ("gpu01", "dgx1-v100-edr"),
        ("gpu02", "dgx1-v100-edr"),
        ("storage01", "storage"),
    ]
    assert "gpu_nodes" in lab.nodes[0].groups
    assert "spectrum_scale_cluster" in lab.nodes[2].groups


def test_spec_file_rejects_duplicates_and_missing_fields(tmp_path):
    path = tmp_path / "lab.yml"
    path.write_text("nodes:\n  - {name: a, profile: head}\n  - {name: a, profile: head}\n")
    with pytest.raises(ValueError, match="unique"):
        spec.from_file(path)
    path.write_text("nodes:\n  - {name: a}\n")
    with pytest.raises(ValueError, match="'name' and 'profile'"):
        spec.from_file(path)


def test_inventory_reaches_nodes_by_ssh_with_the_lab_known_hosts_and_carries_faults(tmp_path):
    path = tmp_path / "lab.yml"
    path.write_text(
        "nodes:\n  - name: gpu03\n    profile: dgx1-v100-edr\n    faults: [{type: ecc_dbe, gpu: 3, count: 2}]\n"
    )
    lab = spec.from_file(path)
    rendered = inventory.render(lab, ["10.242.0.11"])
    group = rendered["all"]["children"]["lab"]
    host = group["hosts"]["gpu03"]
    assert host["ansible_host"] == "10.242.0.11"
    assert "ansible_connection" not in host
    assert group["vars"]["ansible_connection"] == "ssh"
    assert group["vars"]["ansible_user"] == "root"
    assert group["vars"]["ansible_ssh_private_key_file"] == str(ssh.CLIENT_KEY)
    # The lab's own known_hosts, and nothing that turns host key checking off.
    args = group["vars"]["ansible_ssh_common_args"]
    assert f"UserKnownHostsFile={ssh.KNOWN_HOSTS}" in args
    assert "StrictHostKeyChecking" not in args
    assert host["gpuforge_lab_faults"] == [{"type": "ecc_dbe", "gpu": 3, "count": 2}]
    assert rendered["all"]["children"]["gpu_nodes"]["hosts"] == {"gpu03": None}
    assert lab.hardware(lab.nodes[0])["faults"][0]["count"] == 2
