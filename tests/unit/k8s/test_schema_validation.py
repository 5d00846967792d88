"""Every rendered core object passes the strict Kubernetes schema of two versions; CRs pass structural checks."""

import kubernetes_validate
import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_k8s_structural import (
    check_object,
    embedded_pod_templates,
    has_check,
)

VERSIONS = ("1.30", "1.37")  # oldest gpuforge supports and newest kubernetes-validate 1.37.0 ships


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("scenario", ["dgx1_k8s", "dgx1_openshift", "t4_roce"])
def test_core_objects_pass_the_schema(request, scenario, version):
    rendered = request.getfixturevalue(scenario)
    core = [obj for obj in rendered.objects.values() if not has_check(obj)]
    assert len(core) >= 10
    for obj in core:
        kubernetes_validate.validate(obj, version, strict=True)
    for obj in rendered.objects.values():
        for template in embedded_pod_templates(obj):
            kubernetes_validate.validate(template, version, strict=True)


def test_custom_resources_pass_structural_checks(dgx1_k8s, dgx1_openshift):
    custom = [o for r in (dgx1_k8s, dgx1_openshift) for o in r.objects.values() if has_check(o)]
    assert sorted({o["kind"] for o in custom}) == ["CSIScaleOperator", "MPIJob", "SecurityContextConstraints"]
    for obj in custom:
        assert check_object(obj) == []
