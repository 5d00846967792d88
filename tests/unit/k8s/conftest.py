"""Render the add-ons once per scenario (one playbook run each) and share the objects between tests."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from gpuforge.k8s_render import RenderError, render_addons

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "k8s"
WRAPPER = FIXTURES / "render_with_facts.yml"


@dataclass
class Rendered:
    """Manifests of one scenario: files by '<component>/<file>' and objects by (kind, namespace, name)."""

    root: Path
    files: dict
    objects: dict

    def docs(self, relative: str) -> list[dict]:
        return self.files[relative]

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict:
        return self.objects[(kind, namespace, name)]

    def kinds(self, kind: str) -> list[dict]:
        return [obj for (k, _, _), obj in sorted(self.objects.items(), key=lambda i: str(i[0])) if k == kind]


def run_scenario(tmp: Path, inventory: str, platform: str, version: str, extravars=None) -> list[Path]:
    return render_addons(
        FIXTURES / inventory / "hosts.yml",
        tmp / "out",
        platform,
        version,
        playbook=WRAPPER,
        # The fixture hosts do not exist: their Storage Scale facts come from fixture_facts.
        extravars={"gpuforge_k8s_gather_scale_facts": False, **(extravars or {})},
        envvars={"ANSIBLE_CACHE_PLUGIN_CONNECTION": str(tmp / "facts")},
    )


def load(paths: list[Path], cluster_dir: Path) -> Rendered:
    files, objects = {}, {}
    for path in paths:
        docs = [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]
        files[str(path.relative_to(cluster_dir))] = docs
        for doc in docs:
            meta = doc["metadata"]
            objects[(doc["kind"], meta.get("namespace"), meta["name"])] = doc
    return Rendered(cluster_dir, files, objects)


@pytest.fixture(scope="session")
def dgx1_k8s(tmp_path_factory) -> Rendered:
    """IBM Redpaper REDP-5610 DGX-1 cluster on plain Kubernetes 1.30."""
    tmp = tmp_path_factory.mktemp("dgx1-k8s")
    return load(run_scenario(tmp, "dgx1_edr", "kubernetes", "1.30"), tmp / "out" / "dgx1-edr")


@pytest.fixture(scope="session")
def dgx1_openshift(tmp_path_factory) -> Rendered:
    """IBM Redpaper REDP-5610 DGX-1 cluster on OpenShift (Kubernetes 1.33); the platform-dependent roles only."""
    tmp = tmp_path_factory.mktemp("dgx1-ocp")
    addons = ["k8s_node_labels", "nvidia_device_plugin", "rdma_workload_access"]
    paths = run_scenario(tmp, "dgx1_edr", "openshift", "1.33", {"gpuforge_k8s_enabled_addons": addons})
    return load(paths, tmp / "out" / "dgx1-edr")


@pytest.fixture(scope="session")
def t4_roce(tmp_path_factory) -> Rendered:
    """The VMware vGPU/PVRDMA paper's vSphere T4 vGPU + ConnectX-5 RoCE cluster on Kubernetes 1.37."""
    tmp = tmp_path_factory.mktemp("t4-roce")
    return load(run_scenario(tmp, "t4_roce", "kubernetes", "1.37"), tmp / "out" / "vsphere-t4")


@pytest.fixture
def render_error(tmp_path):
    """Run a scenario that must fail; return the error message."""

    def run(inventory: str, platform: str = "kubernetes", version: str = "1.33", **extravars) -> str:
        with pytest.raises(RenderError) as info:
            run_scenario(tmp_path, inventory, platform, version, extravars)
        return str(info.value)

    return run


@pytest.fixture
def render_scenario(tmp_path):
    """Render a scenario with extra variables; return its objects."""

    def run(inventory: str, cluster: str, platform: str = "kubernetes", version: str = "1.33", **extravars) -> Rendered:
        return load(run_scenario(tmp_path, inventory, platform, version, extravars), tmp_path / "out" / cluster)

    return run
