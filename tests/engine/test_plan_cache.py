"""Planned models kept between loads (frame/engine/plan_cache.py): a later load neither parses nor
rewrites the graph, runs bit-identically, and never trusts a damaged or stale entry."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from frame.convert.files import Options, convert
from frame.engine import model as engine_model
from frame.engine import plan_cache
from frame.engine.model import load_model

SDXL_UNET = Path(__file__).resolve().parents[1] / "fixtures" / "pipelines" / "sdxl" / "model" / "unet" / "model.onnx"


@pytest.fixture(scope="module")
def uint8_unet(tmp_path_factory) -> str:
    """The tiny SDXL UNet in 8-bit: every fused op (decoded weights, GEGLU, norm convs, attention)."""
    dst = tmp_path_factory.mktemp("unet") / "model.onnx"
    convert(SDXL_UNET, dst, Options("uint8"))
    return str(dst)


def _feeds(source: str) -> dict[str, np.ndarray]:
    import onnx

    inputs = {i.name: i for i in onnx.load(source, load_external_data=False).graph.input}
    width = {name: [d.dim_value for d in inputs[name].type.tensor_type.shape.dim] for name in inputs}
    rng = np.random.default_rng(0)
    return {"sample": rng.standard_normal((1, 4, 8, 8)).astype(np.float32), "timestep": np.array([10.0], np.float32),
            "encoder_hidden_states": rng.standard_normal((1, 77, width["encoder_hidden_states"][2])).astype(np.float32),
            "text_embeds": rng.standard_normal((1, width["text_embeds"][1])).astype(np.float32),
            "time_ids": np.array([[64, 64, 0, 0, 64, 64]], np.float32)}


def _run(source: str, plans: Path | None) -> dict[str, np.ndarray]:
    with load_model(source, plans=plans) as m:
        return m.run(_feeds(source))


def _no_planning(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("the graph was parsed or planned again")

    monkeypatch.setattr(engine_model, "read_structure", refuse)
    monkeypatch.setattr(engine_model, "plan_structure", refuse)


def test_a_second_load_neither_parses_nor_plans_and_runs_bit_identically(uint8_unet, tmp_path, monkeypatch):
    plans = tmp_path / "model-plans"
    want = _run(uint8_unet, None)
    first = _run(uint8_unet, plans)  # plans and keeps
    assert len(list(plans.glob("*.plan"))) == 1
    with monkeypatch.context() as patched:
        _no_planning(patched)
        with load_model(uint8_unet, plans=plans) as m:
            assert m.rewrites["weight_decoding"] > 50 and m.rewrites["geglu"] > 0
            kept = m.run(_feeds(uint8_unet))
            again = m.run(_feeds(uint8_unet))
    for name, value in want.items():
        assert first[name].tobytes() == value.tobytes()
        assert kept[name].tobytes() == value.tobytes()
        assert again[name].tobytes() == value.tobytes()


def test_the_kept_plan_follows_the_attention_settings(uint8_unet, tmp_path):
    plans = tmp_path / "model-plans"
    with load_model(uint8_unet, plans=plans, attention_slices=2):
        pass
    with load_model(uint8_unet, plans=plans) as m:  # another key: planned again, its own entry
        m.set_attention(slices=3)
        assert m.run(_feeds(uint8_unet))["out_sample"].shape == (1, 4, 8, 8)
    assert len(list(plans.glob("*.plan"))) == 2
    with load_model(uint8_unet, plans=plans) as m:  # the kept plan's attention is this model's own
        assert any(getattr(step.node.spec.fn, "keywords", {}).get("_config") is m.attention for step in m.steps)


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage"])
def test_a_damaged_entry_is_planned_again_never_used(uint8_unet, tmp_path, monkeypatch, damage, caplog):
    plans = tmp_path / "model-plans"
    want = _run(uint8_unet, plans)
    (entry,) = plans.glob("*.plan")
    raw = bytearray(entry.read_bytes())
    if damage == "flip":
        raw[len(raw) // 2] ^= 0x40
    elif damage == "truncate":
        raw = raw[: len(raw) - 100]
    else:
        raw = bytearray(b"not a plan at all")
    entry.write_bytes(bytes(raw))
    got = _run(uint8_unet, plans)
    assert "unusable" in caplog.text
    assert all(got[k].tobytes() == v.tobytes() for k, v in want.items())
    with monkeypatch.context() as patched:  # the entry was written again, sound
        _no_planning(patched)
        _run(uint8_unet, plans)


def test_a_changed_model_file_is_planned_again(uint8_unet, tmp_path, caplog):
    plans = tmp_path / "model-plans"
    source = tmp_path / "m" / "model.onnx"
    source.parent.mkdir()
    for path in Path(uint8_unet).parent.iterdir():
        (source.parent / path.name).write_bytes(path.read_bytes())
    _run(str(source), plans)
    stat = os.stat(source)
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    _run(str(source), plans)
    assert "changed since it was planned" in caplog.text


def test_the_folder_is_capped_least_recently_used_first(uint8_unet, tmp_path):
    plans = tmp_path / "model-plans"
    for slices in (1, 2, 3):
        with load_model(uint8_unet, plans=plans, attention_slices=slices):
            pass
    sizes = sorted(p.stat().st_size for p in plans.glob("*.plan"))
    assert len(sizes) == 3
    cache = plan_cache.PlanCache(plans, cap_bytes=sizes[-1] * 2)
    assert cache.evict() == 1 and len(list(plans.glob("*.plan"))) == 2
