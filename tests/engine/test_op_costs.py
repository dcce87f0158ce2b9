"""Every kernel declares its cost where it is registered, so the plan's count never misses a heavy op.

The estimate's work and memory come only from these declarations (``frame.engine.costs``): an op
registered without one is refused at import, a fused op a pass builds without one fails here, and
the heavy ops (multiply-adds, several passes over memory, scratch beyond their output) must declare
more than ``OUTPUT_ONLY``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import frame.engine.ops  # noqa: F401  (fills the registry)
from frame.engine.costs import node_work, step_scratch
from frame.engine.graph import Node, Step
from frame.engine.model import plan_structure, read_structure
from frame.engine.ops.cost import OUTPUT_ONLY, Cost
from frame.engine.ops.lookup import load_all_optional
from frame.engine.ops.registry import _TABLE, register, registered_specs
from frame.engine.passes.sliced_attention import AttentionConfig

load_all_optional()  # the optional kernels (ConvInteger, MatMulInteger, ...) declare their costs too

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "tests" / "fixtures" / "engine"
# ops doing multiply-adds: their declared ``work`` counts them
COMPUTE_OPS = ("Conv", "ConvTranspose", "ConvInteger", "MatMul", "Gemm", "Einsum", "MatMulInteger")
# memory-bound ops making more than one pass over their values
MULTI_PASS_OPS = ("InstanceNormalization", "LayerNormalization", "GroupNormalization", "BatchNormalization",
                  "Softmax", "LogSoftmax", "Erf", "Gelu", "Resize")
# kernels allocating beyond their output (im2col band, Winograd tiles, decoded block, score block)
SCRATCH_OPS = ("Conv", "ConvAffine", "UpsampleConv", "NormConv", "DecodedWeight", "SlicedAttention")
PLANNED = ("unet_sd15_ts14_dynamic", "unet_sd15_ts14_fp16w_dynamic", "vae_decoder_ts17_static_fp16w",
           "clip_text_ts17_fp16w_hidden")


def test_every_registered_kernel_declares_a_cost():
    missing = sorted({s.op_type for s in registered_specs() if not isinstance(s.cost, Cost)})
    assert not missing, f"kernels without a declared cost: {missing}"


@pytest.mark.parametrize("op_type", COMPUTE_OPS)
def test_compute_ops_declare_their_multiply_adds(op_type):
    assert all(spec.cost.work is not None for spec in _TABLE[("", op_type)]), op_type


@pytest.mark.parametrize("op_type", MULTI_PASS_OPS)
def test_multi_pass_ops_declare_their_passes(op_type):
    assert all(spec.cost.passes > 1 for spec in _TABLE[("", op_type)]), op_type


def test_registering_a_kernel_without_a_cost_is_refused():
    with pytest.raises(TypeError, match="declares no cost"):
        register("Uncounted", 1)(lambda x: x)
    assert ("", "Uncounted") not in _TABLE


def _opspec_calls(path: Path) -> list[ast.Call]:
    tree = ast.parse(path.read_text())
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "OpSpec"]


def test_every_fused_op_a_pass_builds_declares_a_cost():
    """Read off the source: each ``OpSpec(...)`` in frame/engine/passes passes ``cost=``."""
    bare = [f"{path.name}:{call.lineno}" for path in sorted((ROOT / "frame/engine/passes").glob("*.py"))
            for call in _opspec_calls(path) if not any(k.arg == "cost" for k in call.keywords)]
    assert not bare, f"fused ops without a declared cost: {bare}"


@pytest.mark.parametrize("name", PLANNED)
def test_every_planned_step_has_a_cost_and_heavy_ones_their_scratch(name):
    structure = read_structure(str(ENGINE / name / "model.onnx"))
    steps = plan_structure(structure, AttentionConfig()).steps
    assert all(isinstance(s.node.spec.cost, Cost) for s in steps if s.node.spec is not None)
    heavy = [s for s in steps if s.node.op_type in SCRATCH_OPS]
    assert heavy and all(s.node.spec.cost.scratch is not None for s in heavy)
    assert all(s.node.spec.cost is not OUTPUT_ONLY for s in heavy)


def _node(op_type: str, inputs: list[str], outputs: list[str], attrs: dict | None = None) -> Node:
    return Node(op_type.lower(), op_type, "", inputs, outputs, attrs or {})


def test_node_work_counts_what_the_kernel_declares():
    shapes = {"x": (1, 8, 16, 16), "w": (4, 8, 3, 3), "y": (1, 4, 16, 16), "a": (2, 5, 7), "b": (7, 3),
              "c": (2, 5, 3), "n": (1, 8, 16, 16)}
    weights = {"w": None, "b": None}
    conv = node_work(_node("Conv", ["x", "w"], ["y"]), shapes, {}, weights, {})
    assert (conv.kind, conv.macs) == ("conv", 16 * 16 * 4 * 8 * 9)
    matmul = node_work(_node("MatMul", ["a", "b"], ["c"]), shapes, {}, weights, {})
    assert (matmul.kind, matmul.macs) == ("matmul", 2 * 5 * 3 * 7)
    norm = node_work(_node("InstanceNormalization", ["x", "s", "t"], ["n"]), shapes, {}, weights, {})
    assert (norm.kind, norm.element_bytes) == (None, round(2 * 8 * 256 * 4 * 3.5))
    view = node_work(_node("Reshape", ["x", "s"], ["n"]), shapes, {}, weights, {})
    assert view.element_bytes == 0


def test_step_scratch_asks_the_steps_kernel():
    """A 3×3 conv runs an im2col band or a Winograd layout: its declared scratch is not 0; an Add's is."""
    shapes = {"x": (1, 8, 32, 32), "w": (8, 8, 3, 3), "y": (1, 8, 32, 32)}
    conv_spec = _TABLE[("", "Conv")][0]
    add_spec = _TABLE[("", "Add")][0]
    conv = Step(Node("c", "Conv", "", ["x", "w"], ["y"], {"pads": [1, 1, 1, 1]}, conv_spec))
    add = Step(Node("a", "Add", "", ["x", "y"], ["z"], {}, add_spec))
    assert step_scratch(conv, shapes, {}, {}) > 0
    assert step_scratch(add, shapes, {}, {}) == 0


def test_fused_kernels_declare_their_share_of_the_onnx_work_and_what_they_decode():
    """The fused upsampling conv does 4/9 of the ONNX conv's multiply-adds on an image big enough to
    fuse (all of them on a small one); DecodedWeight and GegluFF declare the weight values they decode."""
    from frame.engine.ops.conv import FUSED_MIN_INPUT_PIXELS
    from frame.engine.ops.cost import CostQuery
    from frame.engine.passes import geglu, upsample_conv, weight_decoding

    side = int(FUSED_MIN_INPUT_PIXELS ** 0.5) + 1
    big = CostQuery({}, ["x", "w"], ["y"], {"x": (1, 4, side, side)})
    small = CostQuery({}, ["x", "w"], ["y"], {"x": (1, 4, 1, 1)})
    assert upsample_conv.COST.share(big) == 4 / 9 and upsample_conv.COST.share(small) == 1.0
    assert weight_decoding.COST.share is not None
    assert geglu.COST.decoded is not None and weight_decoding.COST.decoded is not None
