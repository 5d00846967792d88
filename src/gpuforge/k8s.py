"""The CLI side of `gpuforge k8s render` (and the demo's k8s stage): gpuforge.k8s_render.render_addons()."""

from __future__ import annotations

from pathlib import Path

PLATFORMS = ("kubernetes", "openshift")
# Same default as roles/gpuforge/defaults/main/k8s_addons.yml (gpuforge_k8s_version).
DEFAULT_K8S_VERSION = "1.33"


def render(inventory: Path, out_dir: Path, platform: str = "kubernetes", k8s_version: str = DEFAULT_K8S_VERSION):
    """Render the add-on manifests; returns the files written (raises k8s_render.RenderError on failure)."""
    from gpuforge.k8s_render import render_addons

    return render_addons(inventory, out_dir, platform, k8s_version)
