"""Every file frame reads back from its state folder is hostile input (issue 40, item 1's audit,
docs/security.md): an oversized, deeply nested or forged file is refused with a line naming it, read
no further than its cap, and never raises out of the reader. One test per reader that was fixed."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import struct
import zipfile

import numpy as np
import pytest

from frame import statefile
from frame.diffusion import embedding_cache, resume
from frame.engine.io.weight_cache import VALIDATOR_FILE, VALIDATOR_MAX_BYTES, WeightCache, _key
from frame.estimate import rates_file
from frame.estimate.machine import Throughput
from frame.estimate.signature import Signature


def _state_file(data) -> bytes:
    payload = json.dumps(data, sort_keys=True, ensure_ascii=False)
    return json.dumps({"sha256": hashlib.sha256(payload.encode()).hexdigest(), "data": data}).encode()


def test_a_state_file_nested_past_the_parser_is_set_aside(tmp_path, caplog):
    path = tmp_path / "job.json"
    path.write_bytes(b'{"sha256": "x", "data": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    with caplog.at_level(logging.ERROR):
        assert statefile.read_json(path, default="fresh") == "fresh"  # raised RecursionError before
    assert "nested deeper" in caplog.text and not path.exists()


def test_an_oversized_state_file_is_set_aside_unread(tmp_path, caplog, monkeypatch):
    path = tmp_path / "job.json"
    path.write_bytes(_state_file({"seed": 7, "pad": "x" * 5000}))
    monkeypatch.setattr(statefile, "MAX_BYTES", 4096)
    monkeypatch.setattr(statefile, "_check", lambda raw: pytest.fail("an oversized file was parsed"))
    with caplog.at_level(logging.ERROR):
        assert statefile.read_json(path, default="fresh") == "fresh"
    assert "more than a state file's 4096" in caplog.text and str(path) in caplog.text
    assert statefile.read_json(tmp_path / "missing.json", default=1) == 1


def _emb_body(body: bytes) -> bytes:
    return embedding_cache.MAGIC + hashlib.sha256(body).digest() + body


def _emb_file(header, vector_bytes: bytes) -> bytes:
    raw = json.dumps(header).encode() if not isinstance(header, bytes) else header
    return _emb_body(struct.pack("<I", len(raw)) + raw + vector_bytes)


@pytest.mark.parametrize("case", ["list header", "shape of null", "nested header", "NaN vector", "header past the end",
                                  "oversized"])
def test_a_forged_text_embedding_is_recomputed_not_raised(tmp_path, caplog, case):
    cache = embedding_cache.EmbeddingCache(tmp_path, "enc")
    text = "a cat" + " " * embedding_cache.MAX_ENTRY_BYTES * (case == "oversized")  # a sound entry, but 1 MB
    good = {"identity": "enc", "text": text, "dtype": "<f4", "shape": [2]}
    raw = {"list header": _emb_file([1, 2], b"\0" * 8),
           "shape of null": _emb_file({**good, "shape": [None]}, b"\0" * 8),
           "nested header": _emb_file(b"[" * 50_000 + b"]" * 50_000, b""),
           "NaN vector": _emb_file(good, np.array([np.nan, 1], "<f4").tobytes()),
           "header past the end": _emb_body(struct.pack("<I", 10_000) + b"{}"),
           "oversized": _emb_file(good, b"\0" * 8)}[case]
    cache.path(text).write_bytes(raw)
    with caplog.at_level(logging.WARNING):
        assert cache.read(text) is None  # AttributeError/TypeError/RecursionError before, or NaN or 1 MB used
    assert cache.path(text).name in caplog.text and not cache.path(text).exists()


SIG = Signature("conv", ((1, 4, 8, 8), (4, 4, 3, 3)), (("group", 1),), "fp16")
RATES = Throughput(2e9, 4e9, 1e-5, {"conv": 1e9}, {SIG: 9e8}, 5e8, 0.9, 2.5, "this machine", {"conv": 9e8},
                   {"fp16": 1e-9})


@pytest.mark.parametrize("change", [{"gemm_macs": "fast"}, {"gemm_macs": 0}, {"stream_bytes": float("nan")},
                                    {"kind_macs": {"conv": "x"}}, {"label": ["x"]}, {"surprise": 1},
                                    {"signature_macs": [[["conv", [[1]], [], "fp16"], 0]]}])
def test_a_forged_machine_file_means_measure_again(tmp_path, caplog, change):
    rates_file.save_rates(tmp_path, RATES, now=1000.0)
    data = statefile.read_json(tmp_path / rates_file.FILE)
    data["rates"].update(change)
    statefile.write_json(tmp_path / rates_file.FILE, data)
    with caplog.at_level(logging.WARNING):
        assert rates_file.load_rates(tmp_path, set(), now=1000.0) is None  # was a Throughput of strings or 0
    assert rates_file.FILE in caplog.text and "measuring again" in caplog.text


def _state_blob(meta: dict, arrays: dict, compress: bool = False) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED) as archive:
        for name, array in {"meta": np.frombuffer(json.dumps(meta).encode(), np.uint8), **arrays}.items():
            member = io.BytesIO()
            np.save(member, array)
            archive.writestr(name + ".npy", member.getvalue())
    payload = buffer.getvalue()
    return resume.MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload


@pytest.mark.parametrize("case", ["zip bomb", "step as text", "meta a list", "string latents", "oversized"])
def test_a_forged_render_state_starts_fresh(tmp_path, caplog, monkeypatch, case):
    latents = np.zeros((1, 4, 8, 8), np.float32)
    meta = {"params": "p", "step": 3, "rng": None}
    blob = {"zip bomb": _state_blob(meta, {"latents": np.zeros((4, 1024, 1024), np.float32)}, compress=True),
            "step as text": _state_blob({**meta, "step": "three"}, {"latents": latents}),
            "meta a list": _state_blob([1], {"latents": latents}),  # type: ignore[arg-type]
            "string latents": _state_blob(meta, {"latents": np.array(["x"])}),
            "oversized": _state_blob(meta, {"latents": latents})}[case]
    if case == "oversized":
        monkeypatch.setattr(resume, "MAX_BYTES", len(blob) - 1)
    store = resume.ResumeStore(tmp_path, "p")
    store.path.write_bytes(blob)
    with caplog.at_level(logging.WARNING):
        assert store.load() is None  # a 16 MB unpack from a small file, or ValueError/AttributeError, before
    assert str(store.path) in caplog.text and "starting fresh" in caplog.text


def test_a_huge_validator_file_is_not_read(tmp_path):
    cache = WeightCache(tmp_path, 1 << 20)
    url = "http://nas.local/unet.onnx"
    folder = tmp_path / _key(url)
    folder.mkdir(parents=True)
    (folder / VALIDATOR_FILE).write_bytes(b'"etag"' + b" " * VALIDATOR_MAX_BYTES)
    assert cache.remembered_validator(url) is None
    (folder / VALIDATOR_FILE).write_bytes(b'"etag"')
    assert cache.remembered_validator(url) == '"etag"'


def test_a_huge_token_file_is_not_read_whole(tmp_path):
    from frame.daemon.http import token

    path = token.token_path(tmp_path)
    path.write_bytes(b"a" * 40 + b"\n" * token.MAX_FILE_BYTES)
    path.chmod(0o600)
    assert token.read_token(tmp_path) is None  # the 40-letter token was accepted before
    path.write_bytes(b"a" * 40 + b"\n")
    assert token.read_token(tmp_path) == "a" * 40


def test_a_huge_session_key_file_is_replaced(tmp_path, caplog):
    from frame.web import auth

    (tmp_path / auth.SECRET_FILE).write_bytes(b"k" * (auth.SECRET_MAX_BYTES + 1))
    with caplog.at_level(logging.WARNING):
        key = auth.load_or_create_secret(tmp_path)
    assert len(key) == 32 and "too long" in caplog.text
    assert auth.load_or_create_secret(tmp_path) == key
