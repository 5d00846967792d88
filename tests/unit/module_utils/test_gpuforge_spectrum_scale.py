"""mmlsconfig parsers (plain and -Y) and the per-scope diff the spectrum_scale_config module applies; the parsers of
the cluster state spectrum_scale_facts reads for the spectrum_scale_client role (mmgetstate, mmlsnodeclass,
mmremotecluster, mmremotefs, mmlsmount)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_spectrum_scale import (
    ParseError,
    apply_changes,
    config_changes,
    effective_value,
    filesystem_uid,
    parse_mmgetstate_y,
    parse_mmlscluster_y,
    parse_mmlsconfig,
    parse_mmlsconfig_y,
    parse_mmlsfs,
    parse_mmlsmount,
    parse_mmlsnodeclass,
    parse_mmremotecluster_show,
    parse_mmremotefs_show,
    same_node,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "mmlsconfig"
SEED = (FIXTURES / "redp5610_dgx_common.txt").read_text(encoding="utf-8")
Y_TEXT = """mmlsconfig::HEADER:version:reserved:reserved:configParameter:value:nodeList:
mmlsconfig::0:1:::clusterName:lab.gpfs::
mmlsconfig::0:1:::pagepool:1G::
mmlsconfig::0:1:::pagepool:128G:dgx:
mmlsconfig::0:1:::verbsPorts:mlx5_0%2F1%20mlx5_1%2F1:dgx:
mmlsconfig::0:1:::subnets:10.10.11.0%2Fess3000%3Bscale:dgx01%2Cdgx02:
"""


def test_plain_seed_stanzas():
    config = parse_mmlsconfig(SEED)
    assert config["dgx"]["pagepool"] == "128G"
    assert config["dgx"]["verbsPorts"] == "mlx5_0/1 mlx5_1/1 mlx5_2/1 mlx5_3/1"
    assert config["dgx"]["subnets"] == "10.10.11.0/ess3000.bda.scale.ibm.com;SpectrumScale.ocp4.scale.ibm.com"
    assert len(config["dgx"]) == 9
    assert config["common"]["maxMBpS"] == "20000"
    assert config["common"]["clusterId"] == "16217308676014575381"
    assert "ess3000_4M" not in str(config)  # the file system list is not configuration


def test_y_format_decodes_values_and_node_lists():
    config = parse_mmlsconfig_y(Y_TEXT)
    assert config["common"] == {"clusterName": "lab.gpfs", "pagepool": "1G"}
    assert config["dgx"] == {"pagepool": "128G", "verbsPorts": "mlx5_0/1 mlx5_1/1"}
    assert config["dgx01,dgx02"]["subnets"] == "10.10.11.0/ess3000;scale"


def test_effective_value_falls_back_to_common():
    config = parse_mmlsconfig_y(Y_TEXT)
    assert effective_value(config, "dgx", "pagepool") == "128G"
    assert effective_value(config, "other", "pagepool") == "1G"
    assert effective_value(config, "dgx", "maxMBpS") is None


def test_changes_only_for_differing_keys():
    config = parse_mmlsconfig(SEED)
    wanted = {"pagepool": "128G", "workerThreads": "512", "verbsRdmaSend": "YES", "maxMBpS": "20000", "new": "x"}
    changes = config_changes(config, "dgx", wanted)
    assert changes == {
        "workerThreads": {"before": "1024", "after": "512"},
        "new": {"before": None, "after": "x"},
    }


def test_list_value_whitespace_is_not_a_change():
    config = parse_mmlsconfig(SEED)
    assert config_changes(config, "dgx", {"verbsPorts": "mlx5_0/1  mlx5_1/1 mlx5_2/1 mlx5_3/1"}) == {}


def test_apply_changes_sets_the_scope_stanza_and_leaves_the_input_alone():
    config = parse_mmlsconfig(SEED)
    before = {scope: dict(values) for scope, values in config.items()}
    changes = config_changes(config, "dgx", {"workerThreads": "512", "maxStatCache": "1M", "nsdBufSpace": "30"})
    updated = apply_changes(config, "dgx", changes)
    assert config == before
    assert updated["dgx"]["workerThreads"] == "512"
    assert updated["dgx"]["nsdBufSpace"] == "30"
    assert updated["common"] == config["common"]
    assert config_changes(updated, "dgx", {"workerThreads": "512", "nsdBufSpace": "30"}) == {}


def test_apply_changes_to_common_is_what_a_class_without_its_own_value_compares_with():
    config = parse_mmlsconfig(SEED)
    wanted = {"maxMBpS": "40000"}
    updated = apply_changes(config, "common", config_changes(config, "common", wanted))
    assert updated["common"]["maxMBpS"] == "40000"
    assert config_changes(config, "dgx", wanted) == {"maxMBpS": {"before": "20000", "after": "40000"}}
    assert config_changes(updated, "dgx", wanted) == {}  # dgx has no maxMBpS of its own
    # A class with its own value keeps it: setting [common] does not change what applies to dgx.
    updated = apply_changes(config, "common", config_changes(config, "common", {"pagepool": "4G"}))
    assert effective_value(updated, "dgx", "pagepool") == "128G"


def test_apply_changes_creates_a_stanza_and_default_falls_back_to_common():
    config = parse_mmlsconfig_y(Y_TEXT)
    updated = apply_changes(config, "dgx01", config_changes(config, "dgx01", {"pagepool": "64G"}))
    assert updated["dgx01"] == {"pagepool": "64G"}
    assert "dgx01" not in config
    reset = apply_changes(updated, "dgx", config_changes(updated, "dgx", {"pagepool": "DEFAULT"}))
    assert "pagepool" not in reset["dgx"]
    assert effective_value(reset, "dgx", "pagepool") == "1G"
    assert reset["dgx"]["verbsPorts"] == "mlx5_0/1 mlx5_1/1"
    assert apply_changes(config, "dgx", {}) == config


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no HEADER"),
        ("mmlsconfig::0:1:::pagepool:1G::\n", "before the HEADER"),
        ("garbage line\n", "not an mmlsconfig record"),
        (Y_TEXT.splitlines()[0] + "\nmmlsconfig::0:1:::pagepool", "not an mmlsconfig record"),
    ],
)
def test_y_format_errors(text, message):
    with pytest.raises(ParseError, match=message):
        parse_mmlsconfig_y(text)


def test_plain_errors():
    with pytest.raises(ParseError, match="no 'Configuration data"):
        parse_mmlsconfig("mmlsconfig: This node does not belong to a GPFS cluster.\n")
    with pytest.raises(ParseError, match="line 3 has no value"):
        parse_mmlsconfig("Configuration data for cluster x:\n---\npagepool\n")


# IBM Redpaper REDP-5610's cluster in the -Y layout (tests/fixtures/mmlscluster/SOURCE.md).
MMLSCLUSTER_Y = (Path(__file__).resolve().parents[2] / "fixtures" / "mmlscluster" / "redp5610_Y.txt").read_text(
    encoding="utf-8"
)


def test_mmlscluster_y_redp5610():
    cluster = parse_mmlscluster_y(MMLSCLUSTER_Y)
    assert cluster["id"] == "16217308676014575381"
    assert cluster["name"] == "SpectrumScale.ocp4.scale.ibm.com"
    assert cluster["repository_type"] == "CCR"
    assert cluster["nodes"][0] == {
        "number": 1,
        "name": "scale00.ocp4.scale.com",
        "ip": "192.168.1.30",
        "admin_name": "scale00.ocp4.scale.ibm.com",
        "designation": ["quorum", "manager", "perfmon"],
    }
    assert [node["name"] for node in cluster["nodes"]] == ["scale00.ocp4.scale.com", "dgx01.ocp4.scale.com"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no HEADER"),
        (MMLSCLUSTER_Y.splitlines()[1], "before its HEADER"),
        (MMLSCLUSTER_Y.splitlines()[2] + "\n", "no clusterSummary"),
        ("mmcommon: not a member\n", "not an mmlscluster record"),
    ],
)
def test_mmlscluster_y_errors(text, message):
    with pytest.raises(ParseError, match=message):
        parse_mmlscluster_y(text)


# The plain mmlsfs table: a value with spaces (-V), and a value longer than its column that pushes the
# description right (the -d row's shape in a public mmlsfs transcript).
MMLSFS_TABLE = """flag                value                    description
------------------- ------------------------ -----------------------------------
 -B                 4194304                  Block size
 -V                 35.00 (5.1.9.0)          File system version
 -d                 GPFS_MD_LUN01;GPFS_MD_LUN02;GPFS_DATA_LUN01  Disks in file system
 --uid              099b6a7a:5eb99743        File system UID
"""


def test_mmlsfs_table_rows():
    rows = parse_mmlsfs(MMLSFS_TABLE)
    assert rows["-B"] == {"value": "4194304", "description": "Block size"}
    assert rows["-V"] == {"value": "35.00 (5.1.9.0)", "description": "File system version"}
    assert rows["-d"]["value"] == "GPFS_MD_LUN01;GPFS_MD_LUN02;GPFS_DATA_LUN01"
    assert rows["-d"]["description"] == "Disks in file system"


def test_filesystem_uid_is_upper_case_and_checked():
    assert filesystem_uid(MMLSFS_TABLE) == "099B6A7A:5EB99743"
    with pytest.raises(ParseError, match="not a 'flag value description' row"):
        filesystem_uid(MMLSFS_TABLE + "garbage here\n")
    with pytest.raises(ParseError, match="no --uid row"):
        filesystem_uid(MMLSFS_TABLE.replace(" --uid ", " -Q    "))


# --- The cluster state spectrum_scale_client decides on (IBM Redpaper REDP-5610 fixtures, tests/fixtures/*/SOURCES.md)

FIXTURE_ROOT = FIXTURES.parent


def fixture(relative: str) -> str:
    return (FIXTURE_ROOT / relative).read_text(encoding="utf-8")


def test_mmgetstate_y_redp5610():
    assert parse_mmgetstate_y(fixture("mmgetstate/redp5610_dgx01_Y.txt")) == [
        {
            "name": "dgx01.ocp4.scale.com",
            "number": 2,
            "state": "active",
            "quorum": 1,
            "nodes_up": 3,
            "total_nodes": 3,
            "remarks": "",
        }
    ]


def test_mmgetstate_y_newer_release_fields_and_several_nodes():
    # 5.2 adds daemonShortName and daemonNodeName after cnfsState; fields are read by the HEADER's names.
    text = (
        "mmgetstate::HEADER:version:reserved:reserved:nodeName:nodeNumber:state:quorum:nodesUp:totalNodes:"
        "remarks:cnfsState:daemonShortName:daemonNodeName:\n"
        "mmgetstate::0:1:::ec01:1:active:2:1:2:quorum%20node:(undefined):ec01:ec01:\n"
        "mmgetstate::0:1:::ec02:2:arbitrating:2:1:2::(undefined):ec02:ec02:\n"
    )
    rows = parse_mmgetstate_y(text)
    assert [(row["name"], row["state"], row["remarks"]) for row in rows] == [
        ("ec01", "active", "quorum node"),
        ("ec02", "arbitrating", ""),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no HEADER"),
        (fixture("mmgetstate/redp5610_dgx01_Y.txt").splitlines()[0] + "\n", "no node record"),
        (fixture("mmgetstate/redp5610_dgx01_Y.txt").splitlines()[1] + "\n", "before its HEADER"),
        (
            "mmgetstate::HEADER:version:reserved:reserved:nodeName:\nmmgetstate::0:1:::dgx01:\n",
            "without nodeName or state",
        ),
        ("mmgetstate: This node does not belong to a GPFS cluster.\n", "not an mmgetstate record"),
    ],
)
def test_mmgetstate_y_errors(text, message):
    with pytest.raises(ParseError, match=message):
        parse_mmgetstate_y(text)


def test_mmlsnodeclass_redp5610_and_continued_members():
    assert parse_mmlsnodeclass(fixture("mmlsnodeclass/redp5610_dgx.txt")) == {
        "dgx": ["dgx01.ocp4.scale.com", "dgx02.ocp4.scale.com"]
    }
    wrapped = (
        "Node Class Name       Members\n"
        "--------------------- -----------------------------------------------------------\n"
        "dgx                   dgx01.ocp4.scale.com,dgx02.ocp4.scale.com,\n"
        "                      dgx03.ocp4.scale.com\n"
        "siteA                 linuxNodes\n"
    )
    assert parse_mmlsnodeclass(wrapped) == {
        "dgx": ["dgx01.ocp4.scale.com", "dgx02.ocp4.scale.com", "dgx03.ocp4.scale.com"],
        "siteA": ["linuxNodes"],
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no 'Node Class Name  Members' header"),
        ("mmlsnodeclass: Node class dgx does not exist.\n", "line 1 is not its 'Node Class Name  Members' header"),
        ("Node Class Name  Members\n---- ----\n   dgx01\n", "members before a node class"),
        ("Node Class Name  Members\ngpuforge filler: a line\n", "line 2 is not 'class  member,member,...'"),
        ("Node Class Name  Members\ndgx  dgx01,dgx:02\n", "line 2 is not 'class  member,member,...'"),
    ],
)
def test_mmlsnodeclass_errors(text, message):
    with pytest.raises(ParseError, match=message):
        parse_mmlsnodeclass(text)


def test_mmremotecluster_show_redp5610_aligned_and_as_the_seed_prints_it():
    expected = {
        "ess3000.bda.scale.ibm.com": {
            "contact_nodes": ["fscc-fab3-3-a-priv.bda.scale.com", "fscc-fab3-3-b-priv.bda.scale.com"],
            "sha_digest": "9c58d9df69804393571044a9f08b005db12345e4cb87637cad83870a9f74c24d",
            "filesystems": {"ess3000_4M": "ess3000_4M"},
        }
    }
    text = fixture("mmremotecluster/redp5610_show_all.txt")
    assert parse_mmremotecluster_show(text) == expected
    # The seed's extraction: one blank after each colon.
    assert parse_mmremotecluster_show(" ".join(part for part in text.split(" ") if part)) == expected


def test_mmremotecluster_show_two_clusters_and_none_defined():
    text = (
        "Cluster name:    ess3000.lab\nContact nodes:   essio1,essio2\nSHA digest:      00ab\n"
        "File systems:    fs1 (ess3k_fs1) fs2 (fs2)\n\n"
        "Cluster name:    other.lab\nContact nodes:   o1\nSHA digest:      01cd\nFile systems:    (none defined)\n"
        "Cipher list:     AUTHONLY\n"
    )
    clusters = parse_mmremotecluster_show(text)
    assert clusters["ess3000.lab"]["filesystems"] == {"fs1": "ess3k_fs1", "fs2": "fs2"}
    assert clusters["other.lab"]["filesystems"] == {}
    assert clusters["other.lab"]["cipher_list"] == "AUTHONLY"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no 'Cluster name:' line"),
        ("Contact nodes:   essio1\n", "before a 'Cluster name:' line"),
        ("Cluster name:\n", "empty cluster name"),
        ("Cluster name:    a.lab\ngarbage\n", "line 2 is not a 'Key: value' line"),
        ("Cluster name:    a.lab\ngpuforge filler: a line\n", "line 2 is not a 'Label: value' line"),
    ],
)
def test_mmremotecluster_show_errors(text, message):
    with pytest.raises(ParseError, match=message):
        parse_mmremotecluster_show(text)


def test_mmremotefs_show_redp5610():
    assert parse_mmremotefs_show(fixture("mmremotefs/redp5610_show_all.txt")) == {
        "ess3000_4M": {
            "remote": "ess3000_4M",
            "cluster": "ess3000.bda.scale.ibm.com",
            "mount_point": "/gpfs/ess3000_4M",
            "mount_options": "rw",
            "automount": "yes",
            "drive": "-",
            "priority": "0",
        }
    }
    header = fixture("mmremotefs/redp5610_show_all.txt").splitlines()[0]
    assert parse_mmremotefs_show(header + "\n") == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no 'Local Name  Remote Name' header"),
        ("mmremotefs: Cluster x is not defined.\n", "line 1 is not its 'Local Name  Remote Name' header"),
        ("Local Name  Remote Name  Cluster name  Mount Point\nfs1 fs1 c\n", "line 2 has 3 columns"),
        ("Local Name  Remote Name\ngpuforge filler: a line\n", "line 2: mount point 'line' is not a path"),
    ],
)
def test_mmremotefs_show_errors(text, message):
    with pytest.raises(ParseError, match=message):
        parse_mmremotefs_show(text)


def test_mmlsmount_redp5610():
    assert parse_mmlsmount(fixture("mmlsmount/redp5610_L.txt")) == {
        "ess3000_4M": {
            "cluster": "ess3000.bda.scale.ibm.com",
            "remote": "ess3000_4M",
            "count": 2,
            "nodes": [
                {"ip": "192.168.1.19", "name": "dgx01.ocp4", "cluster": "SpectrumScale.ocp4.scale.ibm.com"},
                {"ip": "192.168.1.20", "name": "dgx02.ocp4", "cluster": "SpectrumScale.ocp4.scale.ibm.com"},
            ],
        }
    }


def test_mmlsmount_local_unmounted_and_without_l():
    text = (
        "File system gpfs0 is mounted on 1 nodes:\n  10.0.0.1        node1                     c1.lab\n"
        "File system fs2 (ess.lab:fs2) is not mounted.\n"
        "File system fs3 is mounted on 3 nodes.\n"
    )
    mounts = parse_mmlsmount(text)
    assert mounts["gpfs0"] == {"cluster": "", "remote": "", "count": 1, "nodes": [
        {"ip": "10.0.0.1", "name": "node1", "cluster": "c1.lab"}]}  # fmt: skip
    assert mounts["fs2"] == {"cluster": "ess.lab", "remote": "fs2", "count": 0, "nodes": []}
    assert mounts["fs3"]["count"] == 3 and mounts["fs3"]["nodes"] == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no 'File system ... mounted' line"),
        ("  192.168.1.19    dgx01.ocp4    c\n", "line 1 is neither"),
        ("mmlsmount: File system fs9 is not known to the GPFS cluster.\n", "line 1 is neither"),
        ("File system fs1 is mounted on 1 nodes:\nnot indented here\n", "line 2 is neither"),
    ],
)
def test_mmlsmount_errors(text, message):
    with pytest.raises(ParseError, match=message):
        parse_mmlsmount(text)


def test_a_long_garbage_line_is_shortened_in_the_message():
    with pytest.raises(ParseError) as info:
        parse_mmlsmount("x" * 5000 + "\n")
    assert len(str(info.value)) < 300


@pytest.mark.parametrize(
    ("listed", "node", "same"),
    [
        ("dgx01.ocp4.scale.com", "dgx01", True),  # mmlscluster's daemon name, the inventory's short name
        ("dgx01.ocp4", "dgx01.ocp4.scale.com", True),  # mmlsmount -L shortens the domain
        ("DGX01", "dgx01", True),
        ("dgx01", "dgx01", True),
        ("dgx010", "dgx01", False),
        ("dgx01-ib.ocp4", "dgx01", False),
        ("dgx02.ocp4", "dgx01.ocp4.scale.com", False),
        ("", "dgx01", False),
    ],
)
def test_same_node(listed, node, same):
    assert same_node(listed, node) is same
    assert same_node(node, listed) is same


def test_default_is_met_when_the_scope_has_no_value_of_its_own():
    # DEFAULT removes the scope's own value (mmchconfig man page); the value that then applies comes from
    # [common], so comparing it with "DEFAULT" would reset the attribute again on every run.
    config = parse_mmlsconfig_y(Y_TEXT)
    assert "pagepool" in config["common"]
    assert config_changes(config, "dgx01", {"pagepool": "DEFAULT"}) == {}
    assert config_changes(config, "common", {"noSuchAttribute": "default"}) == {}
    own = apply_changes(config, "dgx", config_changes(config, "dgx", {"pagepool": "64G"}))
    reset = config_changes(own, "dgx", {"pagepool": " DEFAULT "})
    assert reset == {"pagepool": {"before": "64G", "after": " DEFAULT "}}
    after = apply_changes(own, "dgx", reset)
    assert config_changes(after, "dgx", {"pagepool": "DEFAULT"}) == {}
    # [common] itself: DEFAULT removes the cluster-wide value, and is met once it is gone.
    common = config_changes(config, "common", {"pagepool": "DEFAULT"})
    assert common == {"pagepool": {"before": config["common"]["pagepool"], "after": "DEFAULT"}}
    assert config_changes(apply_changes(config, "common", common), "common", {"pagepool": "DEFAULT"}) == {}
