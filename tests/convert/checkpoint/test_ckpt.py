"""A ``.ckpt`` (torch.save's zip, the old A1111 format) imports like its .safetensors: the same keys
under ``state_dict``, read by frame's torch reader (nothing the pickle names is called), the same
diffusers weights. The zip is written without torch (tools/hostile_pickles.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

from frame.convert.checkpoint.plan import Options, detect
from frame.convert.checkpoint.reader import open_checkpoint
from tests.convert.checkpoint.helpers import FIXTURES, digest, expected, read_raw

TOOLS = Path(__file__).parents[3] / "tools"
KINDS = {np.dtype(np.float16): "HalfStorage", np.dtype(np.float32): "FloatStorage", np.dtype(np.int64): "LongStorage"}


def _hostile_pickles():
    if "hostile_pickles" not in sys.modules:
        spec = importlib.util.spec_from_file_location("hostile_pickles", TOOLS / "hostile_pickles.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["hostile_pickles"] = module
        spec.loader.exec_module(module)
    return sys.modules["hostile_pickles"]


def write_ckpt(path: Path, tensors: dict[str, np.ndarray]) -> Path:
    hp = _hostile_pickles()
    state, storages = {}, {}
    for i, (name, array) in enumerate(tensors.items()):
        array = np.ascontiguousarray(array)
        strides = tuple(s // array.itemsize for s in array.strides)
        state[name] = hp.Tensor(str(i), array.size, tuple(array.shape), strides, kind=KINDS[array.dtype])
        storages[str(i)] = array.tobytes()
    path.write_bytes(hp.torch_zip({"state_dict": state, "global_step": 470000, "epoch": 3}, storages))
    return path


def test_ckpt_through_the_writer(tmp_path):
    from frame.convert.importer.graphs import frame_builders
    from frame.convert.importer.writer import ImportOptions, import_model

    path = write_ckpt(tmp_path / "sd15.ckpt", read_raw(FIXTURES / "sd15.safetensors"))
    dst = tmp_path / "model"
    result = import_model(str(path), dst, ImportOptions(config_dir=str(FIXTURES / "sd15")), frame_builders("sd1"))
    assert result.detected.family == "sd1" and (dst / "unet" / "model.onnx").is_file()


def test_ckpt_imports_like_its_safetensors(tmp_path):
    path = write_ckpt(tmp_path / "sd15.ckpt", read_raw(FIXTURES / "sd15.safetensors"))
    checkpoint = open_checkpoint(str(path))
    try:
        found = detect(checkpoint, Options(config_dir=str(FIXTURES / "sd15")))
        assert found.family == "sd1"
        assert {c.name: {k: digest(v) for k, v in c.weights()} for c in found.components} == expected("sd15")
    finally:
        checkpoint.close()


def test_ckpt_at_a_url_imports_like_on_disk(tmp_path):
    """A .ckpt at an http(s) URL is read with Range requests (its zip directory at the end, then each
    tensor's bytes) from a real server on 127.0.0.1 that cuts answers and drops connections: the same
    diffusers weights as the file on disk, and the file is never copied."""
    from frame.convert.checkpoint.reader import Opener
    from frame.engine.io.http_settings import HttpSettings
    from tests.engine.http_server import RangeServer

    write_ckpt(tmp_path / "sd15.ckpt", read_raw(FIXTURES / "sd15.safetensors"))
    server = RangeServer(str(tmp_path)).start()
    try:
        server.faults = [None] * 4 + ["truncate", "drop", "500"] + [None] * 10 + ["truncate"]
        settings = HttpSettings(timeout=5.0, give_up_seconds=20.0, backoff=0.01, max_backoff=0.05)
        checkpoint = open_checkpoint(server.url("sd15.ckpt"), Opener(settings))
        try:
            found = detect(checkpoint, Options(config_dir=str(FIXTURES / "sd15")))
            got = {c.name: {k: digest(v) for k, v in c.weights()} for c in found.components}
        finally:
            checkpoint.close()
        assert got == expected("sd15")
        assert not server.faults  # every fault was met, and retried
        assert all(r for _, r in server.requests)  # only Range requests: nothing fetched whole
    finally:
        server.stop()


def test_ckpt_url_import_through_the_writer(tmp_path):
    from frame.convert.importer.graphs import frame_builders
    from frame.convert.importer.writer import ImportOptions, import_model
    from tests.engine.http_server import RangeServer

    write_ckpt(tmp_path / "sd15.ckpt", read_raw(FIXTURES / "sd15.safetensors"))
    server = RangeServer(str(tmp_path)).start()
    try:
        dst = tmp_path / "model"
        result = import_model(server.url("sd15.ckpt"), dst, ImportOptions(config_dir=str(FIXTURES / "sd15")),
                              frame_builders("sd1"))
    finally:
        server.stop()
    assert result.detected.family == "sd1" and (dst / "unet" / "model.onnx").is_file()
