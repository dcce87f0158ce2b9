"""The data-only plan encoding (frame/engine/plan_format.py) holds every plan the fixture models make:
each one comes back equal, field by field, with shared objects still shared and kernels bound from
the registry and the fused-kernel table, so a new record type or fused kernel that the format does
not know fails here instead of silently never being kept."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest

from frame.engine import plan_format
from frame.engine.dynamic_shapes import dynamic_structure
from frame.engine.model import plan_structure, read_structure
from frame.engine.passes.sliced_attention import AttentionConfig

PIPELINES = Path(__file__).resolve().parents[1] / "fixtures" / "pipelines"
COMPONENTS = sorted(str(p.relative_to(PIPELINES)) for p in PIPELINES.glob("*/model/*/model.onnx"))


def _same(a, b, where: str, seen: dict) -> None:
    if id(a) in seen:
        assert seen[id(a)] is b, f"{where}: a shared object came back as two"
        return
    assert type(a) is type(b), f"{where}: {type(a)} became {type(b)}"
    if isinstance(a, (list, tuple, dict, np.ndarray, functools.partial)) or hasattr(a, "__dict__"):
        seen[id(a)] = b
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes() and b.flags.writeable, where
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]", seen)
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for key in a:
            _same(a[key], b[key], f"{where}[{key!r}]", seen)
    elif isinstance(a, functools.partial):
        _same(a.func, b.func, where + ".func", seen)
        _same(a.args, b.args, where + ".args", seen)
        _same(a.keywords, b.keywords, where + ".keywords", seen)
    elif isinstance(a, AttentionConfig):
        assert a is b, f"{where}: the attention settings are the loader's own object"
    elif hasattr(a, "__dict__") and not callable(a):
        assert vars(a).keys() == vars(b).keys(), where
        for key in vars(a):
            _same(getattr(a, key), getattr(b, key), f"{where}.{key}", seen)
    elif isinstance(a, float) and a != a:
        assert b != b, where
    else:
        assert a is b or a == b, f"{where}: {a!r} became {b!r}"


@pytest.mark.parametrize("component", COMPONENTS)
def test_every_fixture_plan_comes_back_equal(component):
    attention = AttentionConfig(None, 16 << 20)
    planned = plan_structure(read_structure(str(PIPELINES / component)), attention)
    tree, arrays = plan_format.encode(planned, attention)
    assert b"pickle" not in tree and tree.startswith(b'["R","Planned"')
    _same(planned, plan_format.decode(tree, memoryview(arrays), attention), "plan", {})


def test_a_dynamic_shapes_vae_plan_comes_back_equal():
    attention = AttentionConfig(2, 16 << 20)
    source = str(PIPELINES / "sdxl" / "model" / "vae_decoder" / "model.onnx")
    planned = plan_structure(read_structure(source, functools.partial(dynamic_structure, http=None)), attention)
    tree, arrays = plan_format.encode(planned, attention)
    _same(planned, plan_format.decode(tree, memoryview(arrays), attention), "plan", {})


def test_a_value_the_format_cannot_hold_is_not_kept():
    with pytest.raises(TypeError, match="cannot hold"):
        plan_format.encode(["L", print], None)
    with pytest.raises(TypeError, match="dtype"):
        plan_format.encode(np.array(["text"], dtype=object), None)


@pytest.mark.parametrize("external", [False, True])
def test_a_model_with_branches_is_kept_and_runs_the_same(tmp_path, monkeypatch, external):
    from frame.engine import model as engine_model
    from frame.engine.model import load_model
    from tests.engine import builders
    from tests.engine.test_subgraphs import _if_model

    path = builders.save(_if_model(), tmp_path / "if.onnx", external=external)
    plans = tmp_path / "model-plans"
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    with load_model(path, plans=plans) as m:
        want = [m.run({"x": x, "c": np.array(flag)})["y"] for flag in (True, False)]
    assert len(list(plans.glob("*.plan"))) == 1
    monkeypatch.setattr(engine_model, "read_structure", lambda *a, **k: pytest.fail("planned again"))
    with load_model(path, plans=plans) as m:
        got = [m.run({"x": x, "c": np.array(flag)})["y"] for flag in (True, False)]
    assert all(a.tobytes() == b.tobytes() for a, b in zip(want, got))
