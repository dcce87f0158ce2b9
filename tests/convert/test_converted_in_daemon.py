"""The daemon takes a converted folder as it is: ``model.source`` pointing at ``frame model convert``'s
output renders a night in the real worker process."""

from __future__ import annotations

import pytest

from frame.convert.files import Options, convert
from frame.daemon.jobs import night
from frame.daemon.store.database import Store
from frame.models import demo_model_path
from tests.daemon.conftest import make_config


@pytest.fixture
def store(tmp_path):
    opened = Store.open(tmp_path)
    yield opened
    opened.close()


@pytest.mark.parametrize("weights", ["uint8", "fp16"])
def test_a_night_renders_from_a_converted_folder(tmp_path, store, weights):
    folder = tmp_path / f"demo-{weights}"
    convert(demo_model_path(), folder, Options(weights))
    config = make_config(tmp_path, model={"source": str(folder), "size": "64x64", "steps": 2},
                         display={"panel": "virtual", "size": "80x48", "min_refresh_seconds": 0})
    ctx = night.RenderContext(config, store, tmp_path)
    render_id = store.start_render("now", None)
    outcome, picture_id = night.render(ctx, render_id, "now")
    assert outcome.status == "done", outcome.error
    assert store.picture(picture_id).prompt
