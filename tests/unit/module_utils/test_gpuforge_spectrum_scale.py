"""mmlsconfig parsers (plain and -Y) and the per-scope diff the spectrum_scale_config module applies."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_spectrum_scale import (
    ParseError,
    config_changes,
    effective_value,
    filesystem_uid,
    parse_mmlscluster_y,
    parse_mmlsconfig,
    parse_mmlsconfig_y,
    parse_mmlsfs,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "mmlsconfig"
SEED = (FIXTURES / "seed001_dgx_common.txt").read_text(encoding="utf-8")
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


# Seed 001's cluster in the -Y layout (tests/fixtures/mmlscluster/SOURCE.md).
MMLSCLUSTER_Y = (Path(__file__).resolve().parents[2] / "fixtures" / "mmlscluster" / "seed001_Y.txt").read_text(
    encoding="utf-8"
)


def test_mmlscluster_y_seed001():
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
