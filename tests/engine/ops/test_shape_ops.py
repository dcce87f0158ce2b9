"""Layout kernels against onnxruntime, including the opset 1/10/13/18 attribute-vs-input variants."""

import numpy as np
import pytest

from frame.engine.ops import UnsupportedOp, bind_node
from tests.engine.ops.node_check import make_node, rand, run_node

I64 = np.int64


def ints(*values):
    return np.array(values, dtype=I64)


def test_reshape_zero_minus_one_and_allowzero():
    x = rand(2, 3, 4)
    run_node("Reshape", [x, ints(0, -1)])
    run_node("Reshape", [x, ints(4, 0, 2)], opset=14)
    run_node("Reshape", [np.zeros((0, 3), np.float32), ints(3, 0)], opset=14, allowzero=1)


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_flatten(axis):
    run_node("Flatten", [rand(2, 3, 4)], axis=axis)


def test_transpose_default_and_perm():
    x = rand(2, 3, 4)
    run_node("Transpose", [x])
    run_node("Transpose", [x], perm=[1, 0, 2])
    run_node("Transpose", [x.astype(np.float16)], perm=[2, 0, 1])


@pytest.mark.parametrize("axis", [0, -1])
def test_concat(axis):
    run_node("Concat", [rand(2, 3), rand(2, 3, seed=1), rand(2, 3, seed=2)], axis=axis)
    run_node("Concat", [ints(1, 2), ints(3)], axis=0)


def test_split_variants():
    x = rand(4, 6)
    run_node("Split", [x], opset=11, n_outputs=3, axis=1)
    run_node("Split", [x], opset=11, n_outputs=2, axis=-1, split=[2, 4])
    run_node("Split", [x, ints(1, 3)], opset=13, n_outputs=2)
    run_node("Split", [x], opset=13, n_outputs=2)
    run_node("Split", [rand(2, 7)], opset=18, n_outputs=3, axis=1, num_outputs=3)
    run_node("Split", [x, ints(5, 1)], opset=18, n_outputs=2, axis=1)


def test_split_rejects_sizes_that_do_not_add_up():
    from frame.engine.ops import resolve
    with pytest.raises(ValueError, match="add up"):
        resolve("Split", 13).fn(rand(4), ints(1, 2))


def test_slice_opset1_attributes():
    run_node("Slice", [rand(5, 6)], opset=9, starts=[1, -3], ends=[100, -1], axes=[0, 1])


@pytest.mark.parametrize("starts, ends, axes, steps", [
    ((1, 0), (3, 10), None, None),
    ((-1,), (-1000,), (1,), (-1,)),
    ((0, 5), (9223372036854775807, -9223372036854775807), (-2, -1), (2, -2)),
    ((2,), (1,), (0,), None),
])
def test_slice_inputs(starts, ends, axes, steps):
    x = rand(4, 7)
    inputs = [x, ints(*starts), ints(*ends), None if axes is None else ints(*axes),
              None if steps is None else ints(*steps)]
    while inputs[-1] is None:
        inputs.pop()
    run_node("Slice", inputs, opset=13)


def test_slice_with_steps_but_no_axes():
    run_node("Slice", [rand(4, 7), ints(0, 6), ints(4, 0), None, ints(1, -2)], opset=13)


def test_squeeze_unsqueeze_both_forms():
    x = rand(1, 3, 1, 2)
    run_node("Squeeze", [x], opset=11, axes=[0, -2])
    run_node("Squeeze", [x], opset=11)
    run_node("Squeeze", [x, ints(-2)], opset=13)
    run_node("Squeeze", [x], opset=13)
    y = rand(3, 2)
    run_node("Unsqueeze", [y], opset=11, axes=[0, -1])
    run_node("Unsqueeze", [y, ints(1, -1)], opset=13)
    run_node("Unsqueeze", [np.array(3, I64), ints(0)], opset=13)


def test_squeeze_rejects_out_of_range_axis():
    from frame.engine.ops import resolve
    with pytest.raises(ValueError, match="out of range"):
        resolve("Squeeze", 13).fn(rand(1, 3), ints(3))


def test_expand_tile_shape_size():
    run_node("Expand", [rand(3, 1), ints(2, 1, 4)])
    run_node("Expand", [rand(1, 4), ints(3, 1)])
    run_node("Tile", [rand(2, 3), ints(2, 1)])
    x = rand(2, 3, 4, 5)
    run_node("Shape", [x])
    run_node("Shape", [x], opset=15, start=1, end=-1)
    run_node("Shape", [x], opset=15, start=-2)
    run_node("Size", [x])


@pytest.mark.parametrize("upper", [0, 1])
def test_trilu(upper):
    x = rand(2, 4, 5)
    run_node("Trilu", [x], opset=14, upper=upper)
    run_node("Trilu", [x, np.array(-1, I64)], opset=14, upper=upper)
    run_node("Trilu", [x, np.array(2, I64)], opset=14, upper=upper)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_inputs(mode):
    x = rand(1, 2, 4, 5)
    run_node("Pad", [x, ints(0, 0, 1, 2, 0, 0, 2, 1)], opset=13, mode=mode)
    if mode == "constant":
        run_node("Pad", [x, ints(0, 0, 1, -1, 0, 0, -2, 1), np.array(1.5, np.float32)], opset=13)
        run_node("Pad", [x, ints(1, 2, 2, 0), None, ints(2, -1)], opset=18)


def test_pad_attributes_and_wrap():
    x = rand(3, 4)
    run_node("Pad", [x], opset=10, pads=[1, 0, 0, 2], value=-1.0)
    run_node("Pad", [x, ints(1, 2, 1, 1)], opset=19, mode="wrap")


def test_pad_rejects_unknown_mode():
    with pytest.raises(UnsupportedOp, match="mode"):
        bind_node(make_node("Pad", [True, True], 1, mode="mirror"), 13)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_and_back(mode):
    run_node("DepthToSpace", [rand(2, 8, 3, 4)], opset=13, blocksize=2, mode=mode)
    run_node("SpaceToDepth", [rand(2, 3, 4, 6)], opset=13, blocksize=2)
