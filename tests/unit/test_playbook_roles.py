"""How the playbooks apply roles.

- A play that applies a role whose defaults read ansible_facts must gather facts: with gather_facts: false the
  role's variables resolve only where the fact cache already knows the host. The lab's converges fill that cache,
  so the lab never showed it; validate.yml failed this way on a real GPU machine before judging anything
  (benchmarks/real_node/README.md).
- Every role a provisioning playbook applies carries tags there, so `--tags <component>` selects it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _reads_facts(path: Path) -> bool:
    lines = path.read_text(encoding="utf-8").splitlines()
    return any("ansible_facts" in line for line in lines if not line.lstrip().startswith("#"))


def _roles_reading_facts() -> set[str]:
    return {role.name for role in (ROOT / "roles").iterdir() if any(map(_reads_facts, role.glob("defaults/**/*.yml")))}


def _plays():
    for playbook in sorted((ROOT / "playbooks").glob("*.yml")):
        for play in yaml.safe_load(playbook.read_text(encoding="utf-8")) or []:
            if isinstance(play, dict) and "hosts" in play:
                yield playbook.name, play


def _roles(play: dict) -> list[tuple[str, list]]:
    """(name, tags) of each role the play lists."""
    return [(r["role"], list(r.get("tags") or [])) if isinstance(r, dict) else (r, []) for r in play.get("roles") or []]


def _role_names(play: dict) -> list[str]:
    return [name for name, _ in _roles(play)]


def test_the_check_sees_the_roles_it_is_about():
    assert "gpuforge" in _roles_reading_facts()
    assert any("gpuforge" in _role_names(play) for _, play in _plays())


@pytest.mark.parametrize(("playbook", "play"), list(_plays()), ids=lambda v: v if isinstance(v, str) else v["name"])
def test_plays_gather_facts_for_roles_that_read_them(playbook, play):
    readers = sorted(set(_role_names(play)) & _roles_reading_facts())
    if readers:
        assert play.get("gather_facts", True) is True, (
            f"{playbook}: play '{play.get('name')}' applies {readers} (defaults read ansible_facts) "
            "with gather_facts: false"
        )


# k8s_addons runs on the controller; benchmark and validate select by their own task tags.
NOT_PROVISIONING = ("k8s_addons.yml", "benchmark.yml", "validate.yml")


@pytest.mark.parametrize(
    ("playbook", "play"),
    [(name, play) for name, play in _plays() if name not in NOT_PROVISIONING],
    ids=lambda v: v if isinstance(v, str) else v["name"],
)
def test_provisioning_plays_tag_the_roles_they_apply(playbook, play):
    """`--tags ofed`, `--tags slurm`: the role's dynamically included tasks inherit the tags of its entry."""
    for name, tags in _roles(play):
        assert tags, f"{playbook}: play '{play.get('name')}' applies role {name} without tags"
