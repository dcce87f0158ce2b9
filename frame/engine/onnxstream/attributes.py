"""Typed ONNX attributes from model.txt's untyped ``key:value`` text.

OnnxStream's converter writes ints and floats with ``str()``, int lists joined by ``,``, strings as
they are, and a one-element tensor attribute (ConstantOfShape's ``value``) as its single number. The
type of each attribute comes back from the op's ONNX schema; a float is told from an int by its
spelling (Python's ``str(float)`` always has a ``.``, an ``e``, ``inf`` or ``nan``).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

_KIND = onnx.defs.OpSchema.AttrType


def _is_float_text(text: str) -> bool:
    return any(mark in text.lower() for mark in (".", "e", "inf", "nan"))


def _number(text: str) -> int | float:
    return float(text) if _is_float_text(text) else int(text)


def _schema_types(op_type: str, opset: int) -> dict[str, object]:
    try:
        schema = onnx.defs.get_schema(op_type, opset, "")
    except onnx.defs.SchemaError:
        return {}
    return {name: attr.type for name, attr in schema.attributes.items()}


def typed_attribute(key: str, text: str, kind: object) -> onnx.AttributeProto:
    """One attribute proto; ``kind`` is the schema's AttrType or None when the schema does not know it."""
    if kind == _KIND.INT:
        return helper.make_attribute(key, int(text))
    if kind == _KIND.FLOAT:
        return helper.make_attribute(key, float(text))
    if kind == _KIND.STRING:
        return helper.make_attribute(key, text)
    if kind == _KIND.INTS:
        return helper.make_attribute(key, [int(v) for v in text.split(",")] if text else [],
                                     attr_type=onnx.AttributeProto.INTS)
    if kind == _KIND.FLOATS:
        return helper.make_attribute(key, [float(v) for v in text.split(",")] if text else [],
                                     attr_type=onnx.AttributeProto.FLOATS)
    if kind == _KIND.STRINGS:
        return helper.make_attribute(key, text.split(",") if text else [],
                                     attr_type=onnx.AttributeProto.STRINGS)
    if kind == _KIND.TENSOR:
        value = _number(text)
        array = np.array([value], dtype=np.float32 if isinstance(value, float) else np.int64)
        return helper.make_attribute(key, numpy_helper.from_array(array, key))
    return _guessed(key, text)


def _guessed(key: str, text: str) -> onnx.AttributeProto:
    """An attribute the schema does not name (the kernel check then reports it): best guess by spelling."""
    try:
        if "," in text:
            values = [_number(v) for v in text.split(",")]
            return helper.make_attribute(key, values)
        return helper.make_attribute(key, _number(text))
    except ValueError:
        return helper.make_attribute(key, text)


def node_attributes(op_type: str, opset: int, attrs: tuple[tuple[str, str], ...]) -> list[onnx.AttributeProto]:
    """Attribute protos for one op; ValueError (with the key) when a value does not fit its type."""
    types = _schema_types(op_type, opset)
    protos = []
    for key, text in attrs:
        try:
            protos.append(typed_attribute(key, text, types.get(key)))
        except ValueError:
            raise ValueError(f"attribute {key}:{text} does not fit its ONNX type") from None
    return protos
