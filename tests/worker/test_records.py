"""The worker's records and ``StepFailed``: what the daemon and the worker processes agree on."""

from __future__ import annotations

import typing

import pytest

from frame.errors import FrameError
from frame.worker.errors import StepFailed, StepUnavailable
from frame.worker.events import ErrorEvent, ProgressEvent, StageEvent, event_json, parse_event
from frame.worker.records import PanelStatus
from frame.worker.render import _timed


def test_panel_statuses_are_display_cares_answers():
    from frame.display import care

    assert set(typing.get_args(PanelStatus)) == {care.SHOWN, care.UNCHANGED, care.TOO_SOON}


def test_events_round_trip_and_stray_lines_are_not_protocol():
    for event in (StageEvent("choosing"), StageEvent("generating", steps=8, step_choice="all 8 steps fit"),
                  ProgressEvent("generating (unet)", 3, 8, 0.4, eta_seconds=12.5, preview=True),
                  ErrorEvent("generate", "MemoryError: out of memory")):
        import json

        assert parse_event(json.dumps(event_json(event))) == event
    assert event_json(ProgressEvent("generating", 1, 8, 0.1)) == {
        "event": "progress", "stage": "generating", "step": 1, "steps": 8, "fraction": 0.1}
    for stray in (b"hello", b"[1, 2]", b'{"event": "progress"}', b'{"event": "other"}', b"\xff"):
        assert parse_event(stray) is None


def _fail(exc):
    def step():
        raise exc
    return step


def test_a_failed_step_chains_its_cause_and_is_permanent_only_for_a_frame_error():
    timings = {}
    with pytest.raises(StepFailed) as failed:
        _timed(timings, "generate", _fail(MemoryError("out of memory")))
    assert failed.value.step == "generate" and isinstance(failed.value.__cause__, MemoryError)
    assert not failed.value.permanent and failed.value.message() == "MemoryError: out of memory"
    with pytest.raises(StepFailed) as failed:
        _timed(timings, "prepare", _fail(FrameError("no such panel")))
    assert failed.value.permanent and failed.value.message() == "no such panel"
    assert not hasattr(failed.value.__cause__, "step")  # other code's exception is never tagged
    assert timings == {}


def test_a_named_failure_keeps_its_step():
    with pytest.raises(StepFailed) as failed:  # the model failed to load while choosing
        _timed({}, "choose", _fail(StepFailed("load model")))
    assert failed.value.step == "load model"
    with pytest.raises(StepFailed) as failed:  # a missing text encoder while choosing is generate's part
        _timed({}, "choose", _fail(StepUnavailable("generate", "no diffusion pipeline")))
    assert failed.value.step == "generate" and failed.value.permanent


def test_a_preview_job_round_trips_and_a_show_job_keeps_its_keys(tmp_path):
    from frame.worker.events import PreviewOutput, output_from_json
    from frame.worker.records import ShowJob, job_from_json

    show = ShowJob(state_dir=tmp_path, image=tmp_path / "a.jpg")
    assert set(show.to_json()) == {"kind", "state_dir", "image", "panel"}  # what 0.1 wrote
    preview = ShowJob(state_dir=tmp_path, image=tmp_path / "a.jpg", preview=tmp_path / "p.png",
                      prepared=tmp_path / "q.png")
    assert job_from_json(preview.to_json()) == preview
    result = PreviewOutput(preview=tmp_path / "p.png", prepared=None)
    assert output_from_json(result.to_json()) == result
