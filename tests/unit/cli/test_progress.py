"""Runner events -> ProgressModel: per-host counts (PLAY RECAP semantics) and the plain output lines."""

from __future__ import annotations

import io

from gpuforge.progress import PlainView, ProgressModel, make_view


def _event(kind: str, **data) -> dict:
    return {"event": kind, "event_data": data}


EVENTS = [
    _event("playbook_on_play_start", play="Validate GPU nodes"),
    _event("playbook_on_task_start", task="Gather nvidia-smi facts"),
    _event("runner_on_ok", host="gpu01", task="Gather nvidia-smi facts", res={"changed": False}),
    _event("runner_on_ok", host="gpu02", task="Gather nvidia-smi facts", res={"changed": True}),
    _event("runner_on_unreachable", host="gpu04", task="Gather nvidia-smi facts", res={"msg": "ssh: timed out"}),
    _event("playbook_on_task_start", task="Check ECC"),
    _event("runner_on_failed", host="gpu03", task="Check ECC", res={"msg": "GPU 3: 2 volatile DBE"}),
    _event("runner_on_failed", host="gpu01", task="Check ECC", ignore_errors=True, res={"msg": "ignored"}),
    _event("runner_on_skipped", host="gpu02", task="Check ECC"),
    _event("verbose", stdout="noise"),
]


def test_counts_and_failures_from_events():
    model = ProgressModel()
    for event in EVENTS:
        model.handle(event)
    assert model.play == "Validate GPU nodes"
    assert model.task == "Check ECC"
    assert model.hosts["gpu01"] == {"ok": 1, "changed": 0, "failed": 0, "unreachable": 0, "skipped": 0}
    assert model.hosts["gpu02"] == {"ok": 1, "changed": 1, "failed": 0, "unreachable": 0, "skipped": 1}
    assert model.hosts["gpu03"]["failed"] == 1
    assert model.hosts["gpu04"]["unreachable"] == 1
    assert [(t["host"], t["task"], t["status"]) for t in model.failed_tasks] == [
        ("gpu04", "Gather nvidia-smi facts", "unreachable"),
        ("gpu03", "Check ECC", "failed"),
    ]
    assert model.failed_tasks[1]["msg"] == "GPU 3: 2 volatile DBE"


def test_plain_view_lines():
    stream = io.StringIO()
    view = PlainView(stream)
    model = ProgressModel()
    for event in EVENTS:
        view.update(model, model.handle(event))
    assert stream.getvalue().splitlines() == [
        "PLAY [Validate GPU nodes]",
        "TASK [Gather nvidia-smi facts]",
        "ok: [gpu01]",
        "changed: [gpu02]",
        "unreachable: [gpu04] ssh: timed out",
        "TASK [Check ECC]",
        "failed: [gpu03] Check ECC: GPU 3: 2 volatile DBE",
        "failed (ignored): [gpu01] ignored",
        "skipping: [gpu02]",
    ]


def test_stats_event_is_authoritative_and_prints_recap():
    model = ProgressModel()
    model.handle(_event("runner_on_ok", host="gpu01", res={}))
    line = model.handle(
        _event(
            "playbook_on_stats",
            ok={"gpu01": 7, "gpu02": 7},
            changed={"gpu01": 2},
            failures={"gpu02": 1},
            dark={},
            skipped={"gpu01": 3},
        )
    )
    assert model.finished
    assert model.hosts["gpu01"] == {"ok": 7, "changed": 2, "failed": 0, "unreachable": 0, "skipped": 3}
    assert model.hosts["gpu02"]["failed"] == 1
    assert line.splitlines()[1] == "gpu01                ok=7 changed=2 failed=0 unreachable=0 skipped=3"


def test_view_choice():
    assert type(make_view("t", json_output=True)).__name__ == "NullView"
    assert isinstance(make_view("t", json_output=False, stream=io.StringIO()), PlainView)
