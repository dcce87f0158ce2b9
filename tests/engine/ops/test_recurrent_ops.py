"""LSTM, GRU and RNN against onnxruntime: directions, sequence lengths, initial states, peepholes,
layouts, activations with parameters, clip."""

import numpy as np
import pytest

from frame.engine.ops import UnsupportedOp, bind_node
from tests.engine.ops.node_check import make_node, rand, run_node

SEQ, BATCH, INPUT, HIDDEN = 5, 3, 4, 6
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def _inputs(op: str, directions: int, *, bias=True, lens=None, initial=False, peepholes=False, layout=0,
            seed=0):
    g = GATES[op]
    x = rand(BATCH, SEQ, INPUT, seed=seed) if layout else rand(SEQ, BATCH, INPUT, seed=seed)
    w = rand(directions, g * HIDDEN, INPUT, seed=seed + 1, low=-0.5, high=0.5)
    r = rand(directions, g * HIDDEN, HIDDEN, seed=seed + 2, low=-0.5, high=0.5)
    b = rand(directions, 2 * g * HIDDEN, seed=seed + 3, low=-0.5, high=0.5) if bias else None
    seq_lens = None if lens is None else np.array(lens, np.int32)
    state_shape = (BATCH, directions, HIDDEN) if layout else (directions, BATCH, HIDDEN)
    inputs = [x, w, r, b, seq_lens]
    inputs.append(rand(*state_shape, seed=seed + 4) if initial else None)
    if op == "LSTM":
        inputs.append(rand(*state_shape, seed=seed + 5) if initial else None)
        inputs.append(rand(directions, 3 * HIDDEN, seed=seed + 6, low=-0.5, high=0.5) if peepholes else None)
    while inputs[-1] is None:
        inputs.pop()
    return inputs


def _outputs(op: str) -> int:
    return 3 if op == "LSTM" else 2


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("lens", [None, [5, 2, 0]])
def test_directions_and_sequence_lengths(op, direction, lens):
    directions = 2 if direction == "bidirectional" else 1
    run_node(op, _inputs(op, directions, lens=lens, initial=True), opset=14, n_outputs=_outputs(op),
             rtol=1e-4, atol=1e-5, hidden_size=HIDDEN, direction=direction)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_layout_1_batch_first(op):
    """onnxruntime refuses layout 1, so: layout 0 checked against it, layout 1 against layout 0."""
    inputs = _inputs(op, 2, layout=1, initial=True, lens=[3, 5, 1])
    time_major = [x if x is None or i in (1, 2, 3, 4, 7) else x.swapaxes(0, 1) for i, x in enumerate(inputs)]
    want = run_node(op, time_major, opset=14, n_outputs=_outputs(op), rtol=1e-4, atol=1e-5, hidden_size=HIDDEN,
                    direction="bidirectional")
    node = make_node(op, [x is not None for x in inputs], _outputs(op), hidden_size=HIDDEN,
                     direction="bidirectional", layout=1)
    spec, attrs = bind_node(node, 14)
    got = spec.fn(*inputs, **attrs)
    np.testing.assert_allclose(got[0], want[0].transpose(2, 0, 1, 3), rtol=1e-6)  # Y: [batch, seq, dirs, hidden]
    for state_got, state_want in zip(got[1:], want[1:]):
        np.testing.assert_allclose(state_got, state_want.swapaxes(0, 1), rtol=1e-6)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_no_bias_no_initial_state_only_y(op):
    run_node(op, _inputs(op, 1, bias=False), opset=14, n_outputs=1, rtol=1e-4, atol=1e-5, hidden_size=HIDDEN)


def test_lstm_peepholes_clip_input_forget():
    run_node("LSTM", _inputs("LSTM", 2, peepholes=True, initial=True, lens=[4, 5, 2]), opset=14, n_outputs=3,
             rtol=1e-4, atol=1e-5, hidden_size=HIDDEN, direction="bidirectional", clip=0.7)
    run_node("LSTM", _inputs("LSTM", 1, peepholes=True), opset=14, n_outputs=3, rtol=1e-4, atol=1e-5,
             hidden_size=HIDDEN, input_forget=1)


@pytest.mark.parametrize("linear_before_reset", [0, 1])
def test_gru_linear_before_reset(linear_before_reset):
    run_node("GRU", _inputs("GRU", 2, initial=True), opset=14, n_outputs=2, rtol=1e-4, atol=1e-5,
             hidden_size=HIDDEN, direction="bidirectional", linear_before_reset=linear_before_reset)


@pytest.mark.parametrize("op, activations, alpha, beta", [
    ("LSTM", ["HardSigmoid", "LeakyRelu", "Softsign"], [0.3, 0.05], [0.4]),
    ("LSTM", ["Sigmoid", "ScaledTanh", "Elu"], [0.9, 0.7], [1.2]),
    ("GRU", ["HardSigmoid", "Softplus"], None, None),
    ("GRU", ["Sigmoid", "Relu", "Sigmoid", "Tanh"], None, None),
    ("RNN", ["Relu"], None, None),
    ("RNN", ["ThresholdedRelu", "Affine"], [0.2, 0.5], [0.1]),
])
def test_activations_with_parameters(op, activations, alpha, beta):
    per = {"LSTM": 3, "GRU": 2, "RNN": 1}[op]
    directions = len(activations) // per
    attrs = {"activations": activations}
    if alpha is not None:
        attrs["activation_alpha"] = alpha
    if beta is not None:
        attrs["activation_beta"] = beta
    run_node(op, _inputs(op, directions, initial=True), opset=14, n_outputs=_outputs(op), rtol=1e-4, atol=1e-5,
             hidden_size=HIDDEN, direction="bidirectional" if directions == 2 else "forward", **attrs)


def test_lstm_opset_7_node():
    run_node("LSTM", _inputs("LSTM", 1, initial=True), opset=7, n_outputs=3, rtol=1e-4, atol=1e-5,
             hidden_size=HIDDEN)


def test_bad_attributes_refused_at_load():
    with pytest.raises(UnsupportedOp, match="direction"):
        bind_node(make_node("LSTM", [True] * 3, 1, hidden_size=2, direction="sideways"), 14)
    with pytest.raises(UnsupportedOp, match="Swish"):
        bind_node(make_node("GRU", [True] * 3, 1, hidden_size=2, activations=["Swish", "Tanh"]), 14)
    with pytest.raises(UnsupportedOp, match="entries"):
        bind_node(make_node("RNN", [True] * 3, 1, hidden_size=2, activations=["Tanh", "Tanh"]), 14)
