"""openshift_gpu_operators: pinned Subscriptions, ClusterPolicy, NicClusterPolicy from facts, MachineConfig."""

import base64
import copy
import json
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_k8s_structural import (
    check_object,
    crd_json_schema,
    error_location,
)
from conftest import load, run_scenario

ROOT = Path(__file__).resolve().parents[3]
SCHEMAS = ROOT / "schemas" / "crds"
OPERATORS = {
    "gpuforge_k8s_gpu_stack": "operators",
    "openshift_gpu_operators_nfd": {
        "namespace": "openshift-nfd",
        "package": "nfd",
        "source": "redhat-operators",
        "channel": "stable",
        "starting_csv": "nfd.4.17.0-202501010000",
    },
}


@pytest.fixture(scope="module")
def ocp(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ocp-operators")
    extravars = {**OPERATORS, "gpuforge_k8s_enabled_addons": ["rdma_workload_access"]}
    return load(run_scenario(tmp, "dgx1_edr", "openshift", "1.33", extravars), tmp / "out" / "dgx1-edr")


def validator(name):
    return jsonschema.Draft7Validator(crd_json_schema(json.loads((SCHEMAS / name).read_text())))


def test_operator_path_replaces_the_device_plugin_roles(ocp):
    components = {relative.split("/")[0] for relative in ocp.files}
    assert "openshift_gpu_operators" in components
    assert not components & {"nvidia_device_plugin", "rdma_shared_device_plugin"}


def test_subscriptions_are_pinned_and_manual(ocp):
    subs = ocp.kinds("Subscription")
    assert sorted(s["spec"]["name"] for s in subs) == ["gpu-operator-certified", "nfd", "nvidia-network-operator"]
    for sub in subs:
        assert sub["spec"]["installPlanApproval"] == "Manual"
        assert sub["spec"]["startingCSV"] and sub["spec"]["channel"]
    gpu = ocp.get("Subscription", "gpu-operator-certified", "nvidia-gpu-operator")
    assert gpu["spec"]["startingCSV"] == "gpu-operator-certified.v25.3.0"


def test_cluster_policy_uses_crio_and_gpudirect_rdma_with_operator_mofed(ocp):
    spec = ocp.get("ClusterPolicy", "gpu-cluster-policy")["spec"]
    assert spec["operator"] == {"defaultRuntime": "crio", "use_ocp_driver_toolkit": True}
    assert spec["driver"]["rdma"] == {"enabled": True, "useHostMofed": False}


def test_nic_cluster_policy_rdma_config_comes_from_the_facts(ocp):
    spec = ocp.get("NicClusterPolicy", "nic-cluster-policy")["spec"]
    config = json.loads(spec["rdmaSharedDevicePlugin"]["config"])
    # IBM Redpaper REDP-5610: four EDR HCAs mlx5_0..3 -> ib0..ib3, one resource each, the same on every node.
    assert [(r["resourceName"], r["selectors"]["ifNames"]) for r in config["configList"]] == [
        ("shared_ib0", ["ib0"]),
        ("shared_ib1", ["ib1"]),
        ("shared_ib2", ["ib2"]),
        ("shared_ib3", ["ib3"]),
    ]
    assert spec["ofedDriver"]["image"] == "doca-driver"


def test_nic_cluster_policy_images_are_the_network_operator_v25_1_0_versions(ocp):
    """NVIDIA's image table for Network Operator v25.1.0 lists doca-driver 25.01-0.6.0.0-0 and the RDMA shared
    device plugin v1.5.2. v25.1.0 takes a sha256: version as a digest except for the DOCA driver, whose tag the
    operator completes per OS: the plugin renders by its recorded digest, the driver by its version."""
    spec = ocp.get("NicClusterPolicy", "nic-cluster-policy")["spec"]
    ofed, rdma = spec["ofedDriver"], spec["rdmaSharedDevicePlugin"]
    assert (ofed["repository"], ofed["image"], ofed["version"]) == (
        "nvcr.io/nvidia/mellanox",
        "doca-driver",
        "25.01-0.6.0.0-0",
    )
    common = yaml.safe_load((ROOT / "roles/k8s_addons_common/defaults/main.yml").read_text(encoding="utf-8"))
    entry = common["k8s_addons_common_image_digests"]["ghcr.io/mellanox/k8s-rdma-shared-dev-plugin:v1.5.2"]
    assert (rdma["repository"], rdma["image"], rdma["version"]) == (
        "ghcr.io/mellanox",
        "k8s-rdma-shared-dev-plugin",
        "sha256:9f468fdc4449e65e4772575f83aa85840a00f97165f9a00ba34695c91d610fbd",
    )
    assert entry["digest"] == rdma["version"] and entry.get("rendered", True) is True
    sub = ocp.get("Subscription", "nvidia-network-operator", "nvidia-network-operator")
    assert (sub["spec"]["channel"], sub["spec"]["startingCSV"]) == ("v25.1", "nvidia-network-operator.v25.1.0")


def test_the_inventorys_plugin_digest_wins_and_a_plugin_without_one_renders_by_tag(tmp_path):
    site = "sha256:" + "ab" * 32
    rendered = {}
    for name, plugin in {
        "pinned": {"repository": "ghcr.io/mellanox", "image": "k8s-rdma-shared-dev-plugin", "version": "v1.5.2",
                   "digest": site},
        "unrecorded": {"repository": "ghcr.io/mellanox", "image": "k8s-rdma-shared-dev-plugin", "version": "v1.5.1",
                       "digest": ""},
    }.items():  # fmt: skip
        extravars = {
            **OPERATORS,
            "gpuforge_k8s_enabled_addons": ["rdma_workload_access"],
            "openshift_gpu_operators_rdma_plugin": plugin,
        }
        out = tmp_path / name
        objects = load(run_scenario(out, "dgx1_edr", "openshift", "1.33", extravars), out / "out" / "dgx1-edr")
        rendered[name] = objects.get("NicClusterPolicy", "nic-cluster-policy")["spec"]["rdmaSharedDevicePlugin"]
    assert rendered["pinned"]["version"] == site
    assert rendered["unrecorded"]["version"] == "v1.5.1"


def test_machineconfig_raises_the_crio_memlock_limit(ocp):
    mc = ocp.get("MachineConfig", "99-worker-gpuforge-memlock")
    assert mc["metadata"]["labels"] == {"machineconfiguration.openshift.io/role": "worker"}
    (entry,) = mc["spec"]["config"]["storage"]["files"]
    assert entry["path"] == "/etc/crio/crio.conf.d/99-gpuforge-memlock.conf"
    content = base64.b64decode(entry["contents"]["source"].split("base64,", 1)[1]).decode()
    assert '"memlock=-1:-1"' in content and "[crio.runtime]" in content


@pytest.mark.parametrize(
    ("kind", "name", "schema"),
    [
        ("ClusterPolicy", "gpu-cluster-policy", "nvidia.com_v1_ClusterPolicy.json"),
        ("NicClusterPolicy", "nic-cluster-policy", "mellanox.com_v1alpha1_NicClusterPolicy.json"),
    ],
)
def test_rendered_custom_resources_pass_their_crd_schema_and_a_wrong_field_fails(ocp, kind, name, schema):
    obj = ocp.get(kind, name)
    check = validator(schema)
    assert list(check.iter_errors(obj)) == []
    wrong = copy.deepcopy(obj)
    field = "driver" if kind == "ClusterPolicy" else "ofedDriver"
    wrong["spec"][field]["enabeld"] = True
    assert [(error_location(e), e.message) for e in check.iter_errors(wrong)] == [
        (f"spec.{field}", "Additional properties are not allowed ('enabeld' was unexpected)")
    ]


def test_every_subscription_passes_the_olm_schema(ocp):
    check = validator("operators.coreos.com_v1alpha1_Subscription.json")
    for sub in ocp.kinds("Subscription"):
        assert list(check.iter_errors(sub)) == []
    wrong = copy.deepcopy(sub)
    wrong["spec"]["startingCsv"] = wrong["spec"].pop("startingCSV")
    assert [(error_location(e), e.message) for e in check.iter_errors(wrong)] == [
        ("spec", "Additional properties are not allowed ('startingCsv' was unexpected)")
    ]
    del wrong["spec"]["source"]
    assert ("spec", "'source' is a required property") in [
        (error_location(e), e.message) for e in check.iter_errors(wrong)
    ]


def test_unpinned_subscription_is_refused(render_error):
    gpu = {
        "namespace": "nvidia-gpu-operator",
        "package": "gpu-operator-certified",
        "source": "certified-operators",
        "channel": "v25.3",
        "starting_csv": "",
    }
    message = render_error("dgx1_edr", "openshift", **OPERATORS, openshift_gpu_operators_gpu_operator=gpu)
    assert "openshift_gpu_operators_gpu_operator: channel, package and starting_csv must be set" in message


def test_structural_check_refuses_an_automatic_install_plan(ocp):
    sub = copy.deepcopy(ocp.get("Subscription", "nfd", "openshift-nfd"))
    assert check_object(sub) == []
    sub["spec"]["installPlanApproval"] = "Automatic"
    (error,) = check_object(sub)
    assert error.startswith("spec.installPlanApproval: 'Automatic' is not 'Manual'")


def test_the_in_pod_rdma_test_renders_on_openshift_with_the_scc_grant(ocp):
    """The operator path: the NicClusterPolicy's first resource, the mpi ServiceAccount that may use the SCC, a
    non-root UID from the namespace's range, IPC_LOCK (the SCC's default) and the MachineConfig's memlock limit."""
    for role in ("server", "client"):
        pod = ocp.get("Pod", f"gpuforge-rdma-test-{role}", "ai-team")
        kubernetes_validate.validate(pod, "1.33", strict=True)
        spec = pod["spec"]
        assert spec["serviceAccountName"] == "mpi"
        assert spec["securityContext"] == {"runAsNonRoot": True}
        container = spec["containers"][0]
        assert container["resources"]["limits"] == {"rdma/shared_ib0": 1}
        assert container["securityContext"]["capabilities"] == {"add": ["IPC_LOCK"], "drop": ["ALL"]}
        assert "runAsUser" not in container["securityContext"]  # the SCC assigns it (MustRunAsRange)
    scc = ocp.get("SecurityContextConstraints", "scc-for-mpi")
    assert scc["defaultAddCapabilities"] == ["IPC_LOCK"]
