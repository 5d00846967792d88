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
    images |= {f"{image['repository']}:{image['tag']}" for image in mpi.values()}
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


def test_every_digest_the_k8s_roles_would_append_is_rendered():
    """rendered: false is only for the NicClusterPolicy, whose CRD names images by repository/image/version."""
    operators = yaml.safe_load((ROOT / "roles/openshift_gpu_operators/defaults/main.yml").read_text())
    pin = operators["openshift_gpu_operators_rdma_plugin"]
    nic_cluster_policy = {f"{pin['repository']}/{pin['image']}:{pin['version']}"}
    assert {ref for ref, entry in DIGESTS.items() if entry.get("rendered") is False} <= nic_cluster_policy


def test_images_without_a_recorded_digest_render_by_tag(dgx1_k8s):
    deployment = dgx1_k8s.get("Deployment", "mpi-operator", "mpi-operator")
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image in EXCEPTIONS and "@" not in image
