"""`gpuforge parse` knows every kind the modules parse: `--list` shows them, and each kind reads a real output
through the CLI (tests/fixtures/<tool>/SOURCES.md, or the SOURCES.md of the real-output test inputs, REAL_OUTPUTS in
tests/conftest.py, says where each came from).

Each case names one fact of the real output that the parser must return; a parser that reads nothing, or a kind
registered to the wrong parser, fails it."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from gpuforge import cli, parsers
from gpuforge.paths import MODULE_UTILS_DIR, collection_import

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
registry = collection_import("plugins.module_utils.gpuforge_registry")


# kind -> (fixture under tests/fixtures, or "real:<name>" under REAL_OUTPUTS of tests/conftest.py, check of the JSON
# document)
CASES = {
    "nvidia-smi-xml": (
        "nvidia-smi/gpuforge-device_1xh200_drv580.159.04_q_x.xml",
        lambda d: d["gpus"][0]["product_name"].startswith("NVIDIA H200"),
    ),
    "nvidia-smi-text": (
        "nvidia-smi/gpuforge-device_1xh200_drv580.159.04_q.txt",
        lambda d: d["gpu_count"] == 1,
    ),
    "nvidia-smi-csv": (
        "real:nvidia-smi-query-gpu-csv__netdata-go.d.plugin__tesla-p100.csv",
        lambda d: d["rows"][0]["name"] == "Tesla P100-PCIE-16GB" and d["rows"][0]["power.draw"] == 28.16,
    ),
    "nvidia-smi-vgpu-license": (
        "nvidia-smi-vgpu/gpu-operator-628_vcs_unlicensed-restricted_q_EXCERPT.txt",
        lambda d: d["gpus"][0]["license"]["licensed"] is False and d["gpus"][0]["license"]["restricted"] is True,
    ),
    # a GPU passed through without vGPU software prints no licence section
    "nvidia-smi-vgpu-license-xml": (
        "nvidia-smi/gpuforge-device_1xh200_drv580.159.04_q_x.xml",
        lambda d: d["driver_version"] == "580.159.04" and d["gpus"][0]["license"] is None,
    ),
    "nvidia-smi-list": (
        "nvidia-smi/gpuforge-device_1xh200_drv580.159.04_list.txt",
        lambda d: d["gpus"][0]["uuid"].startswith("GPU-"),
    ),
    "nvidia-smi-topo": (
        "nvidia-smi/redp5610_dgx1_topo_m_drv440.txt",
        lambda d: len(d["gpus"]) == 8,
    ),
    "nvlink-status": (
        "real:nvidia-smi-nvlink-status__leptonai-gpud__a100.txt",
        lambda d: d["gpus"] and d["gpus"][0]["links"],
    ),
    "nvlink-errors": (
        "nvidia-smi/stas00_h100_nvlink_e_EXCERPT.txt",
        lambda d: (
            d["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"
            and {"replay_errors", "recovery_errors", "crc_errors"} <= set(d["gpus"][0]["links"][0])
        ),
    ),
    "nvidia-smi-clock-events": (
        "nvidia-smi/gpuforge-device_1xh200_drv580.159.04_clock_events_load.csv",
        lambda d: "clocks_event_reasons.hw_slowdown" in d["field_names"] and d["gpus"],
    ),
    "ibstat": (
        "real:ibstat__leptonai-gpud__a100_mt4126_mixed_eth_ib.txt",
        lambda d: len(d["cas"]) >= 2,
    ),
    "ibstatus": (
        "ibstatus/dgx1_edr_4port_redp5610.txt",
        lambda d: d["cas"][0]["ports"][0]["rate_gbit_per_s"] == 100,
    ),
    "ibv-devinfo": (
        "real:ibv_devinfo__deepseek-ai-DeepEP__issue55__mt4126_ib_EXCERPT_one_hca.txt",
        lambda d: d["cas"][0]["ports"],
    ),
    "ibdev2netdev": (
        "ibdev2netdev/ib-sriov-cni-readme_cx4_4vf_v.txt",
        lambda d: len(d["mappings"]) == 6 and d["mappings"][2]["port_state"] == "DOWN" and not d["errors"],
    ),
    "perfquery": (
        "perfquery/infiniband-diags_issue16_rhel75_perfquery_x.txt",
        lambda d: d[0]["extended"] is True and d[0]["lid"] == 10 and "PortXmitData" in d[0]["counters"],
    ),
    "sminfo": (
        "sminfo/oracle-bda_sun-dcs36-switch_master_prio14.txt",
        lambda d: d["state_name"] == "SMINFO_MASTER" and d["priority"] == 14 and d["sm_lid"] == 15,
    ),
    "mlnx-qos": (
        "mlnx_qos/att-netarbiter_eth4_trust-dscp_pfc3.txt",
        lambda d: d["trust"] == "dscp" and d["pfc_priorities"] == [3] and d["dscp2prio"]["26"] == 3,
    ),
    "lsmod": (
        "lsmod/gpuforge-device_1xh200_drv580.159.04_firecracker.txt",
        lambda d: "nvidia" in d["modules"],
    ),
    "dmesg-xid": (
        "kernel/xid_gpu-operator-issue1146_syslog_dbe_EXCERPT.txt",
        lambda d: [(e["code"], e["host"]) for e in d] == [(48, "worker4"), (64, "worker4")],
    ),
    "tainted": ("kernel/tainted_uac-issue262_proprietary-oot-unsigned.txt", lambda d: d == 12289),
    "mountinfo": (
        "mountinfo/podman-lab-node_kernel6.18_space-and-utf8.txt",
        lambda d: "/scratch local" in d and "/scratch/données" in d,
    ),
    "dmesg-sxid": (
        "kernel/sxid_fm-user-guide_example.txt",
        lambda d: d[0]["code"] == 28006 and d[0]["fatal"] is False and d[0]["link"] == 46,
    ),
    "lspci": (
        "lspci/gpuforge-device_1xh200_firecracker_vvv_D.txt",
        lambda d: (
            d["0000:00:06.0"]["link_sta"]["speed_gts"] == 32.0
            and d["0000:00:06.0"]["ce_sta"]
            == dict.fromkeys(["RxErr", "BadTLP", "BadDLLP", "Rollover", "Timeout", "AdvNonFatalErr"], False)
            and d["0000:00:06.0"]["ue_sta"]["CmpltTO"] is False
            and d["0000:00:06.0"]["dev_sta"]["CorrErr"] is False
        ),
    ),
    "pcie-aer-sysfs": (
        "lspci/aer_dev_correctable_kernel-abi-sample.txt",
        lambda d: d["Receiver Error"] == 2 and d["TOTAL_ERR_COR"] == 2,
    ),
    "pcie-link-limited": (
        "lspci/kernel-limited-by_EXCERPT.txt",
        lambda d: d[0]["limited_at"] == "0003:00:00.0" and d[0]["width"] == 1,
    ),
    "dcgmi-diag": (
        "dcgmi/dcgm-4.2.3-r1-gb10.json",
        lambda d: d["format"] == "dcgm4" and d["version"] == "4.2.3" and d["tests"],
    ),
    "dcgmi-diag-table": (
        "dcgmi/dcgm-3.3.8-r3-8xh100-cuinit-fail.txt",
        lambda d: d["format"] == "dcgm3-text" and d["gpus"]["0"]["GPU Memory"] == "fail",
    ),
    "nvbandwidth": (
        "nvbandwidth/v0.10-azure-nhc-2gpu.txt",
        lambda d: (
            d["testcases"]["device_to_device_memcpy_read_ce"]["sum"] == 552.26
            and d["testcases"]["device_to_device_memcpy_read_ce"]["matrix"]["0"]["1"] == 276.07
        ),
    ),
    "nccl-tests": (
        "nccl-tests/redp5610_ex4-2_2x8xv100_ib_legacy.txt",
        lambda d: d["avg_busbw"] == 12.3088,
    ),
    # nccl-tests 2.19.6 -J on one H200: JSON_FILE_VERSION 3, NCCL 2.28.9 as its code 22809
    "nccl-tests-json": (
        "nccl-tests/gpuforge-device_1xh200_nccl2.28.9_all_reduce_perf.json",
        lambda d: (
            d["json_version"] == 3
            and d["nccl_version"] == "2.28.9"
            and d["rows"][-1]["size"] == 1073741824
            and d["rows"][-1]["in_place"]["algbw"] == 4054916.253776
            and d["complete"] is True
        ),
    ),
    "ib-write-bw": (
        "ib_write_bw/dgx1_edr_mlx5_1_client_redp5610.txt",
        lambda d: d["bw_average_mib_per_s"] > 11000,
    ),
    "p2p": (
        "p2p/distserve_issue3_8xa100_sxm4_80gb.txt",
        lambda d: len(d["devices"]) == 8 and d["access"][0] == {"can": True, "from": 0, "to": 1},
    ),
    "fio": (
        "fio/fio-3.33_ext4_seq_rand_4jobs.json",
        lambda d: d["fio_version"] == "fio-3.33" and len(d["jobs"]) == 4,
    ),
    "resnet50": (
        "resnet50/gpuforge_1xh200_amp-b128.txt",
        lambda d: d["device_name"] == "NVIDIA H200" and d["total_imgs_per_sec"] == 4390.93,
    ),
    "semodule-list": (
        "semodule/debian12_selinux-policy-default_l.txt",
        lambda d: "base" in d["names"] and "apache" in d["names"],
    ),
    "systemctl-show": (
        "systemctl/show-slurm-gpu-node.txt",
        lambda d: (
            d[0] == {"ActiveState": "active", "Id": "munge.service", "LoadState": "loaded", "UnitFileState": "enabled"}
        ),
    ),
    "scontrol-show-node": (
        "slurm/scontrol_show_node_o.txt",
        lambda d: d[0]["cpus"] == 80,
    ),
    "mmlsconfig": (
        "mmlsconfig/redp5610_dgx_common.txt",
        lambda d: d["common"]["clusterName"] == "SpectrumScale.ocp4.scale.ibm.com",
    ),
    "mmlscluster-y": (
        "mmlscluster/redp5610_Y.txt",
        lambda d: d["id"] == "16217308676014575381" and d["nodes"][0]["number"] == 1,
    ),
    "mmgetstate-y": (
        "mmgetstate/redp5610_dgx01_Y.txt",
        lambda d: d[0]["state"] == "active" and d[0]["nodes_up"] == 3,
    ),
    "mmlsmount": (
        "mmlsmount/redp5610_L.txt",
        lambda d: d["ess3000_4M"]["count"] == 2,
    ),
    "apt-simulate": (
        "package_closure/apt-simulate-install-pinned.txt",
        lambda d: len(d) >= 1,
    ),
    "dnf-transaction": (
        "package_closure/dnf-assumeno-install-pinned.txt",
        lambda d: len(d) >= 1,
    ),
}

# Node-side parse_* functions that have no kind, each with the reason (called with more than the text, or reading
# what gpuforge itself wrote).
NOT_KINDS = {
    "gpuforge_container_smoke.parse_gpu_list": "the container's nvidia-smi -L, read as nvidia-smi-list",
    "gpuforge_container_smoke.parse_ldd": "ldd of a binary the smoke test copies into its bundle",
    "gpuforge_infiniband.parse_ofed_info_release": "one line of ofed_info -s",
    "gpuforge_packages.parse_dpkg_query": "takes stdout and stderr",
    "gpuforge_packages.parse_rpm_query": "takes the names asked",
    "gpuforge_pcie.parse_acsctl_lines": "lspci's ACSCtl lines, read inside lspci",
    "gpuforge_pcie.parse_pkey": "one sysfs pkey file",
    "gpuforge_perfquery.parse_link_flaps": "no real kernel-log capture of mlx5 link flaps yet",
    "gpuforge_selinux.parse_restorecon_verbose": "restorecon -v of gpuforge's own relabel",
    "gpuforge_selinux.parse_container_cli_list": "nvidia-container-cli -k list, a list of paths",
    "gpuforge_slurm.parse_state": "one State= value",
    "gpuforge_slurm.parse_gres": "one Gres= value",
    "gpuforge_slurm.parse_node_line": "one line of scontrol-show-node",
    "gpuforge_slurm.parse_sinfo_states": "sinfo's state column",
    "gpuforge_spectrum_scale.parse_mmlsconfig_y": "mmlsconfig -Y, no real capture yet",
    "gpuforge_spectrum_scale.parse_mmlsfs": "no real capture yet",
    "gpuforge_spectrum_scale.parse_mmlsnodeclass": "read inside spectrum_scale_facts",
    "gpuforge_spectrum_scale.parse_mmremotecluster_show": "read inside spectrum_scale_facts",
    "gpuforge_spectrum_scale.parse_mmremotefs_show": "read inside spectrum_scale_facts",
}
CONTROLLER_ONLY = ("gpuforge_k8s", "gpuforge_health")


def test_list_shows_every_kind_what_it_reads_and_its_parser(capsys):
    assert cli.main(["parse", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == sorted(parsers.PARSERS)
    for line, (kind, function, what) in zip(lines, parsers.listing(), strict=True):
        assert what and what in line and f"[{function}]" in line, kind
    assert set(parsers.DESCRIPTIONS) == set(parsers.PARSERS)


def test_parse_without_a_kind_says_how_to_list():
    assert cli.main(["parse"]) == 2


# The check registry's sources (module_utils/gpuforge_registry.py): each parser is run on real and broken input by its
# check's own test (tests/unit/library/test_gpu_node_check_<check>.py), through gpu_node_check on a lab node.
CASES.update({kind: None for kind, source in registry.SOURCES.items() if source.parse and kind not in CASES})


def test_every_kind_has_a_real_output_case_or_says_why_not():
    assert set(CASES) == set(parsers.PARSERS)


def test_every_node_side_parser_has_a_kind_or_a_reason():
    registered = {f"{module}.{function}" for module, function in parsers.PARSERS.values()}
    found = set()
    for path in sorted(MODULE_UTILS_DIR.glob("gpuforge_*.py")):
        if path.stem.startswith(CONTROLLER_ONLY):
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("parse_"):
                found.add(f"{path.stem}.{node.name}")
    assert found - registered - set(NOT_KINDS) == set(), "register these in src/gpuforge/parsers.py"
    assert set(NOT_KINDS) <= found, "NOT_KINDS names a parser that is gone"


@pytest.mark.parametrize("kind", sorted(CASES))
def test_each_kind_reads_its_real_output(kind, capsys, real_output, tmp_path):
    case = CASES[kind]
    if case is None:
        pytest.skip(f"{kind}: no real output captured yet")
    source, check = case
    if source.startswith("real:"):
        path = tmp_path / "output.txt"
        path.write_text(real_output(source.removeprefix("real:")), encoding="utf-8")
    else:
        path = FIXTURES / source
    assert cli.main(["parse", kind, str(path)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert check(document), f"{kind} on {source}"


def test_json_keys_of_any_type_are_printed():
    assert parsers.jsonable({None: {1: [{2.5: "x"}]}, "a": (1,)}) == {"null": {"1": [{"2.5": "x"}]}, "a": [1]}
