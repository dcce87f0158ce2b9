"""decode_attributes, bind_node and the registry as a whole (coverage of real exports, ONNX schemas)."""

import numpy as np
import onnx
import onnx.defs
import pytest
from onnx import helper, numpy_helper

import frame.engine.ops  # noqa: F401  (fills the registry)
from frame.engine.ops import UnsupportedOp, bind_node, decode_attributes, resolve
from frame.engine.ops.lookup import load_all_optional
from frame.engine.ops.registry import _TABLE

load_all_optional()  # the schema check covers the optional kernels too

# Every op type torch.onnx.export emitted (TorchScript and dynamo exporters, opsets 14/17/18, static
# and dynamic axes, fp32 and fp16-converted) for tiny SD 1.5 / SDXL UNets, the AutoencoderKL decoder
# and CLIPTextModel(WithProjection), plus the 41 ops OnnxStream implements.
EXPORTED_OPS = [
    "Add", "ArgMax", "Cast", "Concat", "Constant", "ConstantOfShape", "Conv", "Cos", "Div", "Equal", "Erf",
    "Expand", "Flatten", "Gather", "GatherND", "Gemm", "Identity", "InstanceNormalization", "IsNaN",
    "LayerNormalization", "MatMul", "Mul", "Pow", "Range", "ReduceMean", "Reshape", "Resize", "Shape",
    "Sigmoid", "Sin", "Slice", "Softmax", "Split", "Sqrt", "Squeeze", "Sub", "Transpose", "Trilu",
    "Unsqueeze", "Where",
]
ONNXSTREAM_OPS = [
    "Unsqueeze", "Mul", "Cos", "Sin", "Sqrt", "Erf", "Concat", "Gemm", "Sigmoid", "Conv", "Reshape",
    "InstanceNormalization", "Add", "Transpose", "ReduceMean", "Sub", "Pow", "Div", "MatMul", "Softmax", "Split",
    "Resize", "Gather", "Slice", "ArgMax", "Shape", "Where", "Expand", "Cast", "Squeeze", "Neg", "ConstantOfShape",
    "Range", "Less", "Greater", "Equal", "And", "Trilu", "ScatterND", "MaxPool", "Flatten",
]


@pytest.mark.parametrize("opset", [14, 15, 16, 17, 18])
def test_every_exported_and_onnxstream_op_resolves(opset):
    for op in sorted(set(EXPORTED_OPS + ONNXSTREAM_OPS)):
        if op == "LayerNormalization" and opset < 17:
            continue  # exporters decompose it below opset 17, where ONNX has no such op
        assert resolve(op, opset).op_type == op


def test_default_dynamo_export_ops_resolve_at_opset_20():
    """torch 2.13's dynamo exporter defaults to opset 20 and then emits Gelu for GELU."""
    for op in sorted(set(EXPORTED_OPS) | {"Gelu"}):
        assert resolve(op, 20).op_type == op


def test_kernels_know_every_attribute_of_their_onnx_schema():
    """For each opset a kernel serves, the ONNX schema's attributes are all kernel keyword parameters."""
    problems = []
    for (domain, op), specs in _TABLE.items():
        for index, spec in enumerate(specs):
            last = specs[index + 1].since - 1 if index + 1 < len(specs) else 21
            for opset in range(max(spec.since, 7), last + 1):
                try:
                    schema = onnx.defs.get_schema(op, opset, domain)
                except onnx.defs.SchemaError:
                    continue
                missing = set(schema.attributes) - spec.attribute_names
                if missing:
                    problems.append(f"{op} opset {opset}: {sorted(missing)}")
    assert not problems


def test_decode_attributes_every_supported_type():
    tensor = np.arange(6, dtype=np.float32).reshape(2, 3)
    node = helper.make_node("X", ["a"], ["b"], f=1.5, i=3, s="half_pixel", t=numpy_helper.from_array(tensor),
                            fs=[1.0, 2.5], is_=[1, -2], ss=["a", "b"],
                            ts=[numpy_helper.from_array(np.ones(2, np.int64))])
    attrs = decode_attributes(node)
    assert attrs["f"] == 1.5 and isinstance(attrs["f"], float)
    assert attrs["i"] == 3 and isinstance(attrs["i"], int)
    assert attrs["s"] == "half_pixel"
    np.testing.assert_array_equal(attrs["t"], tensor)
    assert attrs["fs"] == [1.0, 2.5] and attrs["is_"] == [1, -2] and attrs["ss"] == ["a", "b"]
    assert attrs["ts"][0].dtype == np.int64


def test_decode_attributes_keeps_graph_attributes_for_the_loader():
    body = helper.make_graph([], "body", [], [])
    node = helper.make_node("If", ["c"], ["y"], then_branch=body, else_branch=body)
    attrs = decode_attributes(node)
    assert attrs["then_branch"] == body and attrs["else_branch"] == body
    node = helper.make_node("Custom", ["c"], ["y"], bodies=[body, body])
    assert decode_attributes(node)["bodies"] == [body, body]


def test_decode_attributes_rejects_sparse_tensor_attributes():
    values, indices = helper.make_tensor("v", 1, [1], [1.0]), helper.make_tensor("i", 7, [1], [0])
    sparse = helper.make_sparse_tensor(values, indices, [3])
    node = helper.make_node("Constant", [], ["y"], sparse_value=sparse)
    with pytest.raises(UnsupportedOp, match="sparse_value' has type SPARSE_TENSOR"):
        decode_attributes(node)


def test_bind_node_rejects_unknown_op_old_opset_and_unknown_attribute():
    with pytest.raises(UnsupportedOp, match="NoSuchOp"):
        bind_node(helper.make_node("NoSuchOp", ["x"], ["y"]), 17)
    with pytest.raises(UnsupportedOp, match="from opset 14, model uses 5"):
        bind_node(helper.make_node("Trilu", ["x"], ["y"]), 5)
    with pytest.raises(UnsupportedOp, match="colour"):
        bind_node(helper.make_node("Relu", ["x"], ["y"], colour=1), 17)
    with pytest.raises(UnsupportedOp, match="domain"):
        bind_node(helper.make_node("Relu", ["x"], ["y"], domain="com.microsoft"), 17)


def test_bind_node_picks_opset_variant():
    node = helper.make_node("Squeeze", ["x"], ["y"], axes=[0])
    spec, attrs = bind_node(node, 11)
    assert spec.since == 11 or spec.since == 1
    assert attrs == {"axes": [0]}
    with pytest.raises(UnsupportedOp, match="axes"):
        bind_node(node, 13)  # axes became an input in opset 13


def test_runtime_hints_and_optional_inputs_are_not_attributes():
    assert "_reuse" not in resolve("Add", 17).attribute_names
    assert resolve("Add", 17).inplace
    assert resolve("Clip", 13).attribute_names == frozenset()
    assert resolve("Resize", 18).attribute_names >= {"mode", "axes", "antialias"}


def test_constant_rejects_string_values():
    with pytest.raises(UnsupportedOp, match="value_string"):
        bind_node(helper.make_node("Constant", [], ["y"], value_string="hi"), 13)


def test_bind_node_passes_the_output_count_to_kernels_that_ask():
    _, attrs = bind_node(helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1), 13)
    assert attrs == {"axis": 1, "_num_outputs": 3}
    _, attrs = bind_node(helper.make_node("LayerNormalization", ["x", "s"], ["y", "", ""]), 17)
    assert attrs["_num_outputs"] == 1
    _, attrs = bind_node(helper.make_node("Add", ["x", "y"], ["z"]), 17)
    assert attrs == {}


@pytest.mark.parametrize("op, opset, inputs, attrs", [
    ("MatMul", 17, [(2, 5, 8), (8, 3)], {}),
    ("Gemm", 17, [(4, 8), (8, 3)], {}),
    ("Conv", 17, [(1, 4, 6, 6), (5, 4, 3, 3)], {"pads": [1, 1, 1, 1]}),
    ("Softmax", 17, [(2, 3, 7)], {}),
    ("Softmax", 17, [(2, 3, 7)], {"axis": 1}),
    ("LayerNormalization", 17, [(2, 3, 8), (8,)], {}),
    ("InstanceNormalization", 17, [(2, 4, 5, 5), (4,), (4,)], {}),
    ("GroupNormalization", 21, [(2, 4, 5, 5), (4,), (4,)], {"num_groups": 2}),
    ("Erf", 17, [(3, 50)], {}),
    ("Sigmoid", 17, [(3, 50)], {}),
    ("Add", 17, [(3, 50), (50,)], {}),
])
def test_compute_kernels_return_arrays_that_own_their_buffer(op, opset, inputs, attrs):
    """The runtime only reuses a dying input in place when it owns its data, so a compute kernel
    returning a reshaped view would cost the next op an allocation."""
    arrays = [np.random.default_rng(i).standard_normal(shape).astype(np.float32) for i, shape in enumerate(inputs)]
    out = resolve(op, opset).fn(*arrays, **attrs)
    assert out.flags.owndata and out.flags.c_contiguous
