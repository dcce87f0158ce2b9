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
