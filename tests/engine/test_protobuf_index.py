"""The wire-format scanner: structure without embedded weights, byte ranges that hold them."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from frame.engine.errors import ModelFormatError
from frame.engine.io.protobuf_index import encode_varint, scan_model
from frame.engine.io.sources import LocalSource
from tests.engine import builders


def test_embedded_weights_are_indexed_not_loaded(tmp_path):
    proto, _ = builders.mlp(hidden=300)
    path = builders.save(proto, tmp_path / "m.onnx")
    source = LocalSource(path)
    scanned = scan_model(source, chunk=64)  # a tiny window exercises the refills
    reference = onnx.load(path)
    assert set(scanned.embedded) == {t.name for t in reference.graph.initializer}
    assert len(scanned.structure) < 2000 < len(reference.SerializeToString())
    structure = onnx.ModelProto.FromString(scanned.structure)
    assert [n.op_type for n in structure.graph.node] == [n.op_type for n in reference.graph.node]
    for tensor in reference.graph.initializer:
        where = scanned.embedded[tensor.name]
        data = source.read_at(where.offset, where.length).tobytes()
        assert data == tensor.raw_data
    for tensor in structure.graph.initializer:
        assert tensor.raw_data == b"" and list(tensor.dims)
    source.close()


def test_external_data_is_not_indexed_as_embedded(tmp_path):
    proto, _ = builders.mlp()
    path = builders.save(proto, tmp_path / "m.onnx", external=True)
    scanned = scan_model(LocalSource(path))
    structure = onnx.ModelProto.FromString(scanned.structure)
    external = {t.name for t in structure.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL}
    assert external == {"w1", "b1", "w2", "b2"}  # the small int64 constants stay embedded
    assert set(scanned.embedded) == {t.name for t in structure.graph.initializer} - external


def test_truncated_file_is_a_format_error(tmp_path):
    proto, _ = builders.mlp(hidden=300)
    path = builders.save(proto, tmp_path / "m.onnx")
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2])
    with pytest.raises(ModelFormatError, match="truncated"):
        scan_model(LocalSource(path))


def test_varint_round_trip():
    for value in (0, 1, 127, 128, 300, 2**31, 2**62):
        encoded = encode_varint(value)
        decoded = sum((b & 0x7F) << (7 * i) for i, b in enumerate(encoded))
        assert decoded == value and encoded[-1] < 0x80


def test_not_a_model_is_rejected(tmp_path):
    path = tmp_path / "junk.onnx"
    path.write_bytes(np.arange(100, dtype=np.uint8).tobytes())
    from frame.engine import load_model

    with pytest.raises(ModelFormatError):
        load_model(str(path))
