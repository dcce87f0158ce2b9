"""If, Loop and Scan as one-node models against onnxruntime (run through the whole engine): outer-scope
names, nested bodies, body initializers, zero-trip loops, scan axes and directions."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.engine.ops.node_check import rand, run_node

F, B, I64 = TensorProto.FLOAT, TensorProto.BOOL, TensorProto.INT64


def _v(name, elem=F, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def _graph(nodes, name, inputs, outputs, initializers=()):
    return helper.make_graph(nodes, name, inputs, outputs, list(initializers))


def _branch(op, name, weight, shape=(2, 3)):
    """``op(in1, w)`` with ``in1`` read from the enclosing graph and ``w`` the branch's own initializer."""
    return _graph([helper.make_node(op, ["in1", "w"], [f"{name}_out"])], name, [],
                  [_v(f"{name}_out", F, list(shape))], [numpy_helper.from_array(weight, "w")])


@pytest.mark.parametrize("cond", [True, False])
def test_if_outer_scope_and_branch_weights(cond):
    then_branch = _branch("Add", "then", np.arange(6, dtype=np.float32).reshape(2, 3))
    else_branch = _branch("Mul", "else", np.full((2, 3), -2, np.float32))  # same initializer name "w"
    run_node("If", [np.array([cond]), rand(2, 3)], opset=17, outer=1, then_branch=then_branch, else_branch=else_branch)


@pytest.mark.parametrize("outer, inner", [(True, True), (True, False), (False, True)])
def test_nested_if_reads_names_two_levels_up(outer, inner):
    inner_then = _branch("Sub", "inner_then", np.ones((2, 3), np.float32))
    inner_else = _graph([helper.make_node("Neg", ["in1"], ["ie"])], "inner_else", [], [_v("ie", F, [2, 3])])
    then_branch = _graph([helper.make_node("If", ["in2"], ["t0"], then_branch=inner_then, else_branch=inner_else),
                          helper.make_node("Mul", ["t0", "in1"], ["t1"])], "then", [], [_v("t1", F, [2, 3])])
    else_branch = _graph([], "else", [], [_v("k", F, [2, 3])],
                         [numpy_helper.from_array(np.full((2, 3), 7, np.float32), "k")])  # output is a constant
    run_node("If", [np.array(outer), rand(2, 3), np.array(inner)], opset=17, outer=2, then_branch=then_branch,
             else_branch=else_branch)


def _loop_body(scan_weight=2.0):
    """acc += in2 (an outer value) each iteration; stops when acc's sum exceeds in3; scans acc*w and i."""
    nodes = [helper.make_node("Add", ["acc_in", "in2"], ["acc_out"]),
             helper.make_node("ReduceSum", ["acc_out"], ["total"], keepdims=0),
             helper.make_node("Less", ["total", "in3"], ["cond_out"]),
             helper.make_node("Mul", ["acc_out", "w"], ["scaled"]),
             helper.make_node("Identity", ["i"], ["i_out"])]
    return _graph(nodes, "body", [_v("i", I64, []), _v("cond_in", B, []), _v("acc_in", F, [2, 3])],
                  [_v("cond_out", B, []), _v("acc_out", F, [2, 3]), _v("scaled", F, [2, 3]), _v("i_out", I64, [])],
                  [numpy_helper.from_array(np.array(scan_weight, np.float32), "w")])


@pytest.mark.parametrize("trips, limit", [(4, 1e9), (10, 6.0), (0, 1e9)])
def test_loop_trip_count_condition_and_scan_outputs(trips, limit):
    inputs = [np.array(trips, np.int64), np.array(True), np.ones((2, 3), np.float32), np.ones((2, 3), np.float32),
              np.array(limit, np.float32)]
    run_node("Loop", inputs, opset=16, n_outputs=3, outer=2, body=_loop_body())


def test_loop_without_trip_count_runs_until_condition():
    inputs = [None, np.array(True), rand(2, 3, low=0, high=1), np.ones((2, 3), np.float32),
              np.array(20.0, np.float32)]
    run_node("Loop", inputs, opset=13, n_outputs=3, outer=2, body=_loop_body())


def test_loop_condition_false_runs_zero_times():
    inputs = [np.array(5, np.int64), np.array(False), rand(2, 3), np.ones((2, 3), np.float32),
              np.array(1e9, np.float32)]
    run_node("Loop", inputs, opset=16, n_outputs=3, outer=2, body=_loop_body())


def _scan_body():
    """state = state + x_t; outputs the new state and x_t * state (elementwise)."""
    nodes = [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]), helper.make_node("Mul", ["x_t", "s_out"], ["y_t"])]
    return _graph(nodes, "body", [_v("s_in", F, [3]), _v("x_t", F, [3])], [_v("s_out", F, [3]), _v("y_t", F, [3])])


@pytest.mark.parametrize("attrs", [{}, {"scan_input_directions": [1]}, {"scan_output_directions": [1]},
                                   {"scan_input_axes": [1], "scan_output_axes": [1]},
                                   {"scan_input_axes": [-1], "scan_output_axes": [-1], "scan_input_directions": [1]}])
def test_scan_axes_and_directions(attrs):
    x = rand(4, 3) if attrs.get("scan_input_axes", [0])[0] == 0 else rand(3, 4)
    run_node("Scan", [rand(3, seed=1), x], opset=16, n_outputs=2, body=_scan_body(), num_scan_inputs=1, **attrs)


def test_scan_two_inputs_and_outer_value():
    nodes = [helper.make_node("Mul", ["a_t", "b_t"], ["ab"]), helper.make_node("Add", ["s_in", "ab"], ["s0"]),
             helper.make_node("Add", ["s0", "in3"], ["s_out"])]
    body = _graph(nodes, "body", [_v("s_in", F, [2]), _v("a_t", F, [2]), _v("b_t", F, [2])],
                  [_v("s_out", F, [2]), _v("ab", F, [2])])
    run_node("Scan", [rand(2), rand(5, 2, seed=1), rand(5, 2, seed=2), rand(2, seed=3)], opset=11, n_outputs=2,
             outer=1, body=body, num_scan_inputs=2)
