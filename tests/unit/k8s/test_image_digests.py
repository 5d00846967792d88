"""Every image the k8s add-ons pin has a digest recorded with its source, or is a documented exception."""

import re
from pathlib import Path

import pytest
import yaml

from gpuforge import k8s_verify

ROOT = Path(__file__).resolve().parents[3]
COMMON = yaml.safe_load((ROOT / "roles/k8s_addons_common/defaults/main.yml").read_text())
DIGESTS = COMMON["k8s_addons_common_image_digests"]
EXCEPTIONS = COMMON["k8s_addons_common_digest_exceptions"]
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
COMMIT = re.compile(r"@[0-9a-f]{40}\b")


def pinned_images():
    """repository:tag of every image the k8s roles pin (their defaults) and the verification pod."""
    addons = yaml.safe_load((ROOT / "roles/gpuforge/defaults/main/k8s_addons.yml").read_text())["gpuforge_k8s_addons"]
    images = {f"{pin['image']}:{pin['version']}" for pin in addons.values()}
    mpi = yaml.safe_load((ROOT / "roles/mpi_operator/defaults/main.yml").read_text())["mpi_operator_images"]
    # The workload image is the site's own build (test_the_workload_image_is_the_sites_build).
    images |= {f"{image['repository']}:{image['tag']}" for name, image in mpi.items() if name != "workload"}
    operators = yaml.safe_load((ROOT / "roles/openshift_gpu_operators/defaults/main.yml").read_text())
    for key in ("openshift_gpu_operators_ofed", "openshift_gpu_operators_rdma_plugin"):
        pin = operators[key]
        images.add(f"{pin['repository']}/{pin['image']}:{pin['version']}")
    images.add(k8s_verify.DEFAULT_VECTOR_ADD_IMAGE)
    return images


def test_every_pinned_image_has_a_sourced_digest_or_a_documented_exception():
    images = pinned_images()
    assert len(images) == 8
    assert not set(DIGESTS) & set(EXCEPTIONS)
    assert sorted(images - set(DIGESTS) - set(EXCEPTIONS)) == []
    # No entry for an image nothing pins any more (a changed pin must be looked up again).
    assert sorted(set(DIGESTS) | set(EXCEPTIONS)) == sorted(images)
    for reference, entry in DIGESTS.items():
        assert DIGEST.match(entry["digest"]), reference
        # The source names a repository file and the commit it was read at.
        assert COMMIT.search(entry["source"]), reference
        assert set(entry) <= {"digest", "source", "rendered", "note"}, reference
        # A digest recorded but not rendered says why.
        if entry.get("rendered", True) is not True:
            assert entry["rendered"] is False and len(entry["note"]) > 40, reference
    for reference, reason in EXCEPTIONS.items():
        assert isinstance(reason, str) and len(reason) > 40, reference
        # The command a site runs to pin it.
        assert f"`crane digest {reference}`" in " ".join(reason.split()), reference


def test_the_workload_image_is_the_sites_build():
    """Its digest exists only once the site built and pushed it: gpuforge_workload_image_digest, empty by default."""
    mpi = yaml.safe_load((ROOT / "roles/mpi_operator/defaults/main.yml").read_text())["mpi_operator_images"]
    assert mpi["workload"] == {
        "repository": "{{ gpuforge_workload_image_repository }}",
        "tag": "{{ gpuforge_workload_image_tag }}",
        "digest": "{{ gpuforge_workload_image_digest }}",
    }
    k8s = (ROOT / "roles/gpuforge/defaults/main/k8s.yml").read_text()
    assert "crane digest <repository>:<tag>" in k8s
    assert yaml.safe_load(k8s)["gpuforge_workload_image_digest"] == ""


DOCA = yaml.safe_load((ROOT / "roles/k8s_addons_common/defaults/main.yml").read_text())[
    "k8s_addons_common_doca_driver_digests"
]


def test_the_doca_driver_has_a_digest_per_os_suffix_of_its_pinned_version():
    operators = yaml.safe_load((ROOT / "roles/openshift_gpu_operators/defaults/main.yml").read_text())
    ofed = operators["openshift_gpu_operators_ofed"]
    (reference,) = DOCA
    assert reference == f"{ofed['repository']}/{ofed['image']}:{ofed['version']}"
    # The bare tag is never pulled (the operator appends the OS and architecture): an exception, not a digest.
    assert reference in EXCEPTIONS and reference not in DIGESTS
    entry = DOCA[reference]
    assert COMMIT.search(entry["source"])
    for suffix, digest in entry["by_suffix"].items():
        assert re.match(r"^-(rhcos|rhel|ubuntu)[0-9.]+-(amd64|arm64)$", suffix), suffix
        assert DIGEST.match(digest), suffix
    # The OpenShift minor gpuforge renders for, on both architectures.
    minor = yaml.safe_load((ROOT / "roles/gpuforge/defaults/main/k8s.yml").read_text())[
        "gpuforge_openshift_min_version"
    ]
    assert {f"-rhcos{minor}-amd64", f"-rhcos{minor}-arm64"} <= set(entry["by_suffix"])
    # NVIDIA's table gives one image for RHCOS 4.14, 4.16 and 4.17 per architecture.
    rhcos_amd64 = {digest for suffix, digest in entry["by_suffix"].items() if re.match(r"-rhcos.*-amd64", suffix)}
    assert rhcos_amd64 == {"sha256:5b91974c74f08fc5b1ad2edd4ca97d81b2dc6cc897045c3eac777826fe5d40d8"}


@pytest.mark.parametrize(
    ("daemonset", "tag_reference"),
    [
        ("nvidia-device-plugin-daemonset", "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"),
        ("rdma-shared-dp-ds", "ghcr.io/mellanox/k8s-rdma-shared-dev-plugin:v1.5.3"),
    ],
)
def test_images_with_a_recorded_digest_render_with_it(dgx1_k8s, daemonset, tag_reference):
    ds = dgx1_k8s.get("DaemonSet", daemonset, "kube-system")
    image = ds["spec"]["template"]["spec"]["containers"][0]["image"]
    reference, digest = image.split("@")
    assert reference == tag_reference
    assert DIGESTS[reference]["digest"] == digest and DIGESTS[reference].get("rendered", True) is True


def test_only_images_gpuforge_does_not_deploy_have_digests_not_rendered():
    """The CSI operator is installed by the site; every image a gpuforge role deploys renders by its digest."""
    assert {ref for ref, entry in DIGESTS.items() if entry.get("rendered") is False} == {
        "quay.io/ibm-spectrum-scale/ibm-spectrum-scale-csi-operator:v2.12.0"
    }


def test_images_without_a_recorded_digest_render_by_tag(dgx1_k8s):
    deployment = dgx1_k8s.get("Deployment", "mpi-operator", "mpi-operator")
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image in EXCEPTIONS and "@" not in image
