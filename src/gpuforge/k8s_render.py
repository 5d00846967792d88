"""`gpuforge k8s render`: render the Kubernetes/OpenShift add-on manifests for an inventory.

There is one implementation of the manifests: the roles' Jinja2 templates. This module runs
playbooks/k8s_addons.yml through ansible-runner with the inventory, the target platform and the
Kubernetes version, never with a kubeconfig, so the playbook only writes validated manifests.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = PROJECT_ROOT / "playbooks" / "k8s_addons.yml"
PLATFORMS = ("kubernetes", "openshift")


class RenderError(RuntimeError):
    """The playbook failed; the message is the failing task's message."""


def _failure_message(runner) -> str:
    messages = []
    # A failed loop says "One or more items failed"; its failed items carry the messages, each in an event of its own
    # (runner_item_on_failed, ansible-core's v2_runner_item_on_failed), before the task's. They are read there, not
    # from the `results` of the task's event: ansible-core 2.21 leaves the `failed` key out of the loop results it
    # hands callbacks (CallbackTaskResult.result; registered results keep it), so there a failed item and a passed
    # one look alike. 2.19 sends the same item events.
    item_messages: dict[tuple, list[str]] = {}
    for event in runner.events:
        data = event.get("event_data", {})
        key = (data.get("task_uuid"), data.get("host"))
        if event.get("event") == "runner_item_on_failed" and data.get("res", {}).get("msg"):
            item_messages.setdefault(key, []).append(str(data["res"]["msg"]))
        elif event.get("event") in ("runner_on_failed", "runner_on_unreachable"):
            result = data.get("res", {})
            items = item_messages.get(key)
            messages.append(f"{data.get('task', '?')}: {'; '.join(items) if items else result.get('msg', result)}")
    if not messages:
        return f"ansible-playbook {runner.status} (rc={runner.rc}): {runner.stdout.read()[:2000]}"
    return "; ".join(messages)


def render_addons(
    inventory_path: str | Path,
    output_dir: str | Path,
    platform: str,
    k8s_version: str,
    *,
    playbook: str | Path = PLAYBOOK,
    extravars: dict | None = None,
    envvars: dict | None = None,
) -> list[Path]:
    """Render the add-on manifests of `inventory_path` into `output_dir`/<cluster>/<role>/.

    Returns the manifest files written, sorted. Raises ValueError on a bad platform and
    RenderError with the failing task's message when the playbook fails (unknown Kubernetes
    version, empty namespace list, an HCA a node does not have, ...). `playbook`, `extravars` and
    `envvars` exist for tests (a wrapper playbook that loads fixture facts, a private fact cache).
    """
    import ansible_runner

    if platform not in PLATFORMS:
        raise ValueError(f"platform must be one of {', '.join(PLATFORMS)}, not {platform!r}")
    output_dir = Path(output_dir).resolve()
    variables = {
        "gpuforge_k8s_platform": platform,
        "gpuforge_k8s_version": str(k8s_version),
        "gpuforge_k8s_artifacts_dir": str(output_dir),
        "gpuforge_kubeconfig": "",
        **(extravars or {}),
    }
    # ansible-runner looks ansible-playbook up on PATH: use the one beside this Python (the venv's).
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {"ANSIBLE_CONFIG": str(PROJECT_ROOT / "ansible.cfg"), "PATH": path, **(envvars or {})}
    with tempfile.TemporaryDirectory(prefix="gpuforge-k8s-render-") as private:
        runner = ansible_runner.run(
            private_data_dir=private,
            project_dir=str(PROJECT_ROOT),
            playbook=str(Path(playbook).resolve()),
            inventory=str(Path(inventory_path).resolve()),
            extravars=variables,
            envvars=env,
            # ansible.cfg's shared fact cache, where provision/validate left the nodes' facts (not a per-run one).
            fact_cache_type=None,
            quiet=True,
        )
        if runner.status != "successful":
            raise RenderError(_failure_message(runner))
    return sorted(output_dir.rglob("*.yaml"))
