"""Shared setup of the two client tests (``test_client.py`` for AUTOMATIC1111, ``test_comfy_client.py``
for ComfyUI): the same job, the same fast settings and the same way of expecting a failure, so a fault
both clients must report alike is asked for alike."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from frame.config.schema import RemoteRenderConfig
from frame.remote import RemoteJob, RemoteUnavailable

JOB = RemoteJob(prompt="a lighthouse in a storm, oil painting", negative_prompt="blurry", steps=25, guidance=7.0,
                sampler="dpm++2m_karras", seed=42, width=128, height=80)
Render = Callable[..., object]  # render_remote or render_comfyui


def settings(url: str, **changes) -> RemoteRenderConfig:
    """``render.remote`` for ``url`` with timeouts short enough for a test (``changes`` on top)."""
    base = dict(url=url, connect_timeout_seconds=1.0, job_timeout_minutes=0.5, poll_seconds=0.1,
                lost_after_seconds=1.0)
    return dataclasses.replace(RemoteRenderConfig(), **{**base, **changes})


def failure(render: Render, url: str, deadline: float | None = None, job: RemoteJob = JOB,
            **changes) -> RemoteUnavailable:
    """The RemoteUnavailable ``render`` raises for ``job`` on ``url`` (the test fails if it paints)."""
    with pytest.raises(RemoteUnavailable) as info:
        render(settings(url, **changes), job, deadline_seconds=deadline)
    return info.value
