"""One road from ``config.yaml`` to the pipeline (issue 30, item 1): ``frame.diffusion.configured``
decides the weights provider ("auto" resolved there, once), the HTTP settings (token, timeouts, weight
cache) and the memory limit, and every caller comes through it. ``frame serve-render`` and the
configuration checks used to build their own loader, without the token or timeouts: a serve-render
pointed at a NAS that asks for ``model.token`` could not open the model."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import numpy as np
import pytest

import frame
from frame.cli.serve_render import start_server
from frame.config.schema import WeightCacheConfig
from frame.diffusion import load_pipeline
from frame.diffusion.configured import load_configured_pipeline, pipeline_setup
from frame.diffusion.pipeline import engine_loader
from frame.engine.io.http_settings import origin
from frame.errors import UsageError
from frame.models import demo_model_path
from tests.daemon.conftest import make_config
from tests.modelserver.conftest import TOKEN, Served
from tests.painting import paint

ARGS = dict(steps=1, guidance=0, seed=3, width=32, height=32)
PIPELINE_BUILDERS = {"load_pipeline", "engine_loader", "open_model_files", "Pipeline"}


def _config(tmp_path: Path, **model):
    return make_config(tmp_path / "state", model={"source": "demo", **model}, worker={"memory_limit_mb": 300})


def test_the_setup_decides_weights_http_cache_and_memory_limit(tmp_path):
    config = _config(tmp_path, token=TOKEN, http_timeout_seconds=7.0, http_give_up_seconds=90.0,
                     cache=WeightCacheConfig(enabled=True, max_mb=64))
    setup = pipeline_setup(config, "https://nas.local/models/sd15/")
    assert setup.weights == "prefetch"  # the configuration's "auto"
    assert (setup.http.token, setup.http.token_origin) == (TOKEN, origin("https://nas.local/"))
    assert (setup.http.timeout, setup.http.give_up_seconds) == (7.0, 90.0)
    assert setup.http.cache_dir == str(tmp_path / "state" / "weight-cache") and setup.http.cache_max_bytes == 64 << 20
    assert setup.memory_limit_mb == 300  # the render worker's cap decides how the guidance passes run
    assert pipeline_setup(config, capped=False).memory_limit_mb is None  # serve-render: not under that cap
    assert pipeline_setup(dataclasses.replace(config, model=dataclasses.replace(config.model, weights="ram"))
                          ).weights == "ram"


def test_auto_is_the_configurations_word_and_never_reaches_the_engine():
    with pytest.raises(UsageError, match="'auto'"):
        engine_loader("auto")(str(demo_model_path() / "unet" / "model.onnx"))


@pytest.fixture(scope="module")
def nas():
    served = Served(demo_model_path(), TOKEN)
    yield served
    served.close()


def test_serve_render_opens_a_token_protected_model_with_the_configured_settings(nas, tmp_path):
    config = _config(tmp_path, source=nas.url(), token=TOKEN, http_timeout_seconds=7.0)
    server = start_server(nas.url(), "frame", config, "serve-token-1234567890", "127.0.0.1:0")
    try:
        assert server.pipe.http == pipeline_setup(config, nas.url()).http  # token, timeouts, cache
        assert server.pipe.plan.memory_limit_mb is None
        image = np.asarray(paint(server.pipe, "a cat", **ARGS))
    finally:
        server.close()
    assert np.array_equal(image, np.asarray(paint(load_pipeline(demo_model_path()), "a cat", **ARGS)))
    worker = load_configured_pipeline(config)
    assert worker.http == server.pipe.http and worker.plan.memory_limit_mb == 300


def test_every_caller_outside_the_diffusion_package_comes_through_configured():
    """Only ``frame.diffusion`` builds pipelines and loaders; the worker, serve-render, the checks, the
    estimate and the CLI take them from ``frame.diffusion.configured``. ``Pipeline`` imported for type
    hints only (under ``TYPE_CHECKING``) builds nothing."""
    root = Path(frame.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.parent == root / "diffusion":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = {id(inner) for node in ast.walk(tree)
                       if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
                       for inner in ast.walk(node)}
        for node in ast.walk(tree):
            if id(node) in typing_only and all(alias.name == "Pipeline" for alias in getattr(node, "names", ())):
                continue
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("frame.diffusion"):
                found += [f"{path.relative_to(root)}: {alias.name}" for alias in node.names
                          if alias.name in PIPELINE_BUILDERS and node.module != "frame.diffusion.configured"]
    assert found == []
