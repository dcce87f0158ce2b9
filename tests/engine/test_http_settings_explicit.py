"""HTTP settings (token, timeouts, weight cache) travel one way: as an explicit ``http`` argument.

They used to travel twice: explicitly to ``ModelFiles`` and the loader, and through a context variable
(``http_settings.using``/``current``) that the loader, the VAE shape probe, the encoder identity and the
estimate set around the engine, whose ``SourcePool``s read it when made. A read outside such a block
silently went without the token. These tests keep the context variable gone and check that each of
those paths reads a token-protected ``frame serve-model`` with the settings it is handed, and is
refused without them (so the argument, not something ambient, carries the token).
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import frame
from frame.diffusion import load_pipeline
from frame.diffusion.encoder_identity import DigestBook, encoder_identity
from frame.diffusion.vae.shapes import check_vae
from frame.engine.errors import WeightFetchError
from frame.engine.io import http_settings
from frame.engine.io.http_settings import HttpSettings, origin
from frame.estimate.configured import weight_location
from frame.estimate.counting import count_graph
from frame.estimate.machine import read_rate
from frame.estimate.plan import build_plan
from frame.models import demo_model_path
from tests.modelserver.conftest import TOKEN, Served
from tests.painting import paint

FRAME = Path(frame.__file__).parent
ARGS = dict(steps=1, guidance=0, seed=3, width=32, height=32)


def test_no_context_variable_carries_http_settings():
    """No ``using``/``current`` in ``http_settings``, no ContextVar under ``frame/engine/io``, and no
    module of frame reaching for either."""
    assert not hasattr(http_settings, "using") and not hasattr(http_settings, "current")
    found = []
    for path in sorted(FRAME.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        in_io = path.parent == FRAME / "engine" / "io"
        for node in ast.walk(tree):
            if in_io and isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                found += [f"{path.relative_to(FRAME)}: imports {n}" for n in names if "contextvars" in n]
            if in_io and isinstance(node, (ast.Name, ast.Attribute)) and "ContextVar" in (
                    getattr(node, "id", None) or getattr(node, "attr", "")):
                found.append(f"{path.relative_to(FRAME)}: ContextVar")
            if (isinstance(node, ast.Attribute) and node.attr in ("using", "current")
                    and isinstance(node.value, ast.Name) and node.value.id == "http_settings"):
                found.append(f"{path.relative_to(FRAME)}: http_settings.{node.attr}")
            if isinstance(node, ast.ImportFrom) and node.module == "frame.engine.io.http_settings":
                found += [f"{path.relative_to(FRAME)}: imports {a.name}" for a in node.names
                          if a.name in ("using", "current")]
    assert found == []


@pytest.fixture(scope="module")
def nas():
    served = Served(demo_model_path(), TOKEN)
    yield served
    served.close()


@pytest.fixture(scope="module")
def settings(nas):
    return HttpSettings(token=TOKEN, token_origin=origin(nas.url()), give_up_seconds=5.0)


@pytest.fixture(scope="module")
def pipe(nas, settings, tmp_path_factory):
    """Loading reads model_index.json, the tokenizer, every component's structure and the VAE shape
    probe (``Pipeline.vae_shapes`` at load), all with ``settings``."""
    return load_pipeline(nas.url(), cache_dir=tmp_path_factory.mktemp("cache"), http=settings)


def test_pipeline_load_and_a_render_read_with_the_token(pipe, settings):
    """Every component the render loads goes through the loader with ``settings``: the picture equals
    the one from the local folder."""
    assert pipe.http == settings
    image = np.asarray(paint(pipe, "a cat", **ARGS))
    assert np.array_equal(image, np.asarray(paint(load_pipeline(demo_model_path()), "a cat", **ARGS)))


def test_vae_shape_probe_uses_the_settings_it_is_given(pipe, settings):
    assert check_vae(pipe.vae_source, 32, settings).tileable
    with pytest.raises(WeightFetchError, match="HTTP 401"):
        check_vae(pipe.vae_source, 32)


def test_encoder_identity_asks_the_server_with_the_token(pipe, settings, tmp_path):
    encoder = pipe.encoders[-1]
    assert encoder_identity(encoder, False, DigestBook(tmp_path), True, settings) is not None
    assert encoder_identity(encoder, False, DigestBook(tmp_path), True) is None  # refused: no identity


def test_estimate_counts_and_probes_with_the_token(pipe, settings):
    shapes = {"sample": (1, 4, 4, 4), "timestep": (1,), "encoder_hidden_states": (1, 77, 32)}
    assert count_graph(pipe.unet_source, shapes, http=settings).steps
    with pytest.raises(WeightFetchError, match="HTTP 401"):
        count_graph(pipe.unet_source, shapes)
    plan = build_plan(pipe, 32, 32, 1, 0.0, None, http=settings)
    with pytest.raises(WeightFetchError, match="HTTP 401"):
        build_plan(pipe, 32, 32, 1, 0.0, None)
    assert {r.phase for r in plan.runs} >= {"unet", "text", "vae"}
    location = weight_location(pipe.unet_source, settings)
    assert location and location.startswith("http://")
    assert read_rate(location, http=settings) is not None
    assert read_rate(location) is None  # refused without the token
