"""Recurrent layers: LSTM, GRU and RNN (one layer, forward/reverse/bidirectional), as in the ONNX spec.

Every direction runs the same loop: the input projection of all time steps is one GEMM up front
(``X·Wᵀ + Wb (+ Rb)``, seq × batch rows), then each step adds ``H·Rᵀ`` and applies the gates. That
keeps the per-step work to one small GEMM and a few vector ops, which is what these models need
(voice-activity detectors run one step per call, OCR heads a few dozen).

Supported: ``sequence_lens`` (steps past a sequence's length leave its state unchanged and write
zeros to ``Y``; the reverse direction starts at each sequence's own last step; a sequence of length
0 ends in zero states, as in onnxruntime), initial states,
LSTM peepholes and ``input_forget``, ``clip``, ``layout`` 0 and 1 (opset 14), GRU
``linear_before_reset``, and every activation the spec lists with ``activation_alpha``/``beta``
consumed in order by the activations that take parameters (as onnxruntime does). Compute is float32
(fp16 weights or inputs are widened), outputs take the input's dtype.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from frame.engine.ops.registry import OUTPUT_ONLY, UnsupportedOp, register

_DIRECTIONS = ("forward", "reverse", "bidirectional")


def _sigmoid(x: np.ndarray) -> np.ndarray:
    out = np.negative(x)
    np.exp(out, out=out)
    out += 1
    return np.reciprocal(out, out=out)


# name: (function of x, alpha, beta; how many of alpha/beta it consumes; default alpha, beta)
_ACTIVATIONS: dict[str, tuple[Callable, int, float, float]] = {
    "relu": (lambda x, a, b: np.maximum(x, 0), 0, 0.0, 0.0),
    "tanh": (lambda x, a, b: np.tanh(x), 0, 0.0, 0.0),
    "sigmoid": (lambda x, a, b: _sigmoid(x), 0, 0.0, 0.0),
    "affine": (lambda x, a, b: a * x + b, 2, 1.0, 0.0),
    "leakyrelu": (lambda x, a, b: np.where(x >= 0, x, a * x), 1, 0.01, 0.0),
    "thresholdedrelu": (lambda x, a, b: np.where(x >= a, x, 0), 1, 1.0, 0.0),
    "scaledtanh": (lambda x, a, b: a * np.tanh(b * x), 2, 1.0, 1.0),
    "hardsigmoid": (lambda x, a, b: np.clip(a * x + b, 0, 1), 2, 0.2, 0.5),
    "elu": (lambda x, a, b: np.where(x >= 0, x, a * np.expm1(np.minimum(x, 0))), 1, 1.0, 0.0),
    "softsign": (lambda x, a, b: x / (1 + np.abs(x)), 0, 0.0, 0.0),
    "softplus": (lambda x, a, b: np.logaddexp(x, 0), 0, 0.0, 0.0),
}

Activation = Callable[[np.ndarray], np.ndarray]


def _activations(names: list[str], alphas: list[float] | None, betas: list[float] | None) -> list[Activation]:
    alphas, betas = list(alphas or []), list(betas or [])
    functions = []
    for name in names:
        fn, consumed, alpha, beta = _ACTIVATIONS[name.lower()]
        if consumed >= 1 and alphas:
            alpha = alphas.pop(0)
        if consumed == 2 and betas:
            beta = betas.pop(0)
        functions.append(_bound(fn, np.float32(alpha), np.float32(beta)))
    return functions


def _bound(fn: Callable, alpha: np.float32, beta: np.float32) -> Activation:
    return lambda x: fn(x, alpha, beta).astype(np.float32, copy=False)


def _validator(per_direction: int):
    def validate(attrs: dict) -> None:
        direction = attrs.get("direction", "forward")
        if direction not in _DIRECTIONS:
            raise UnsupportedOp(f"attribute 'direction' = {direction!r} (expected one of {_DIRECTIONS})")
        names = attrs.get("activations")
        if names is not None:
            unknown = [n for n in names if n.lower() not in _ACTIVATIONS]
            if unknown:
                raise UnsupportedOp(f"activation(s) {unknown} are not supported")
            needed = per_direction * (2 if direction == "bidirectional" else 1)
            if len(names) != needed:
                raise UnsupportedOp(f"attribute 'activations' has {len(names)} entries, expected {needed}")
        if attrs.get("layout", 0) not in (0, 1):
            raise UnsupportedOp(f"attribute 'layout' = {attrs['layout']} (expected 0 or 1)")
    return validate


class _Sequence:
    """Time-major input, per-batch lengths, and the index maps of a reverse pass."""

    def __init__(self, x: np.ndarray, sequence_lens: np.ndarray | None) -> None:
        self.x = x  # (seq, batch, input), float32
        seq, batch = x.shape[:2]
        if sequence_lens is None:
            self.lengths = np.full(batch, seq, np.int64)
        else:
            self.lengths = np.asarray(sequence_lens, np.int64).reshape(-1)
            if self.lengths.shape != (batch,) or (self.lengths < 0).any() or (self.lengths > seq).any():
                raise ValueError(f"sequence_lens {self.lengths.tolist()} do not fit {seq} steps x {batch} batch")
        self.full = bool((self.lengths == seq).all())
        self.active = np.arange(seq)[:, None] < self.lengths[None, :]  # (seq, batch)

    def time_index(self, reverse: bool) -> np.ndarray | None:
        """(seq, batch) source step of each pass step, None for the identity (forward) order."""
        if not reverse:
            return None
        steps = np.arange(self.x.shape[0])[:, None]
        return np.where(self.active, self.lengths[None, :] - 1 - steps, steps)


def _run_direction(seq: _Sequence, projected: np.ndarray, reverse: bool, step) -> tuple[np.ndarray, tuple]:
    """Run ``step(t, gates_in, state) -> (h, state)`` over time; returns Y (seq, batch, hidden) and the
    final state. ``projected`` is the input projection (seq, batch, G*hidden)."""
    order = seq.time_index(reverse)
    if order is not None:
        projected = np.take_along_axis(projected, order[:, :, None], axis=0)
    hs = []
    state = step.initial
    for t in range(projected.shape[0]):
        h, new_state = step(projected[t], state)
        if not seq.full:
            keep = ~seq.active[t][:, None]
            new_state = tuple(np.where(keep, old, new) for old, new in zip(state, new_state))
            h = np.where(keep, 0, h)
        state = new_state
        hs.append(h)
    y = np.stack(hs) if hs else np.zeros((0,) + state[0].shape, np.float32)
    if not seq.full:  # an empty sequence ends in zero states, not the initial ones (as onnxruntime)
        empty = (seq.lengths == 0)[:, None]
        state = tuple(np.where(empty, 0, s).astype(np.float32) for s in state)
    if order is not None:
        restored = np.zeros_like(y)
        np.put_along_axis(restored, order[:, :, None], y, axis=0)
        y = np.where(seq.active[:, :, None], restored, 0)
    return y, state


def _prepare(x, w, r, b, sequence_lens, initial, layout, hidden_size, gates):
    """Float32 time-major views, per-direction weights, and initial states (zeros when omitted)."""
    x32 = np.asarray(x, np.float32)
    if layout == 1:
        x32 = x32.transpose(1, 0, 2)
    seq = _Sequence(x32, sequence_lens)
    directions = w.shape[0]
    hidden = hidden_size or r.shape[-1]
    batch = x32.shape[1]
    states = []
    for value in initial:
        if value is None:
            states.append(np.zeros((directions, batch, hidden), np.float32))
        else:
            value = np.asarray(value, np.float32)
            states.append(value.transpose(1, 0, 2) if layout == 1 else value)
    bias = np.zeros((directions, 2 * gates * hidden), np.float32) if b is None else np.asarray(b, np.float32)
    return seq, np.asarray(w, np.float32), np.asarray(r, np.float32), bias, states, hidden


def _outputs(ys: list[np.ndarray], finals: list[list[np.ndarray]], layout: int, dtype):
    y = np.stack(ys, axis=1)  # (seq, directions, batch, hidden)
    states = [np.stack(f) for f in finals]  # (directions, batch, hidden) each
    if layout == 1:
        y = y.transpose(2, 0, 1, 3)
        states = [s.transpose(1, 0, 2) for s in states]
    results = [np.ascontiguousarray(y).astype(dtype, copy=False)]
    results += [np.ascontiguousarray(s).astype(dtype, copy=False) for s in states]
    return tuple(results)


def _direction_flags(direction: str) -> list[bool]:
    return {"forward": [False], "reverse": [True], "bidirectional": [False, True]}[direction]


def _per_direction(functions: list[Activation], per: int, count: int) -> list[list[Activation]]:
    return [functions[i * per:(i + 1) * per] for i in range(count)]


def _clipper(clip: float | None):
    if clip is None:
        return lambda x: x
    limit = np.float32(clip)
    return lambda x: np.clip(x, -limit, limit, out=x)


class _LstmStep:
    def __init__(self, r, p, h0, c0, acts, clip, input_forget):
        self.rt = np.ascontiguousarray(r.T)
        self.p = p
        self.initial = (h0, c0)
        self.f, self.g, self.h = acts
        self.clip = _clipper(clip)
        self.input_forget = input_forget

    def __call__(self, projected: np.ndarray, state: tuple) -> tuple[np.ndarray, tuple]:
        h, c = state
        gates = projected + h @ self.rt
        gi, go, gf, gc = np.split(gates, 4, axis=1)
        if self.p is not None:
            pi, po, pf = self.p
            gi = gi + pi * c
            gf = gf + pf * c
        i = self.f(self.clip(gi))
        f = 1 - i if self.input_forget else self.f(self.clip(gf))
        c_new = f * c + i * self.g(self.clip(gc))
        if self.p is not None:
            go = go + po * c_new
        o = self.f(self.clip(go))
        h_new = o * self.h(c_new)
        return h_new, (h_new, c_new)


@register("LSTM", 7, validate=_validator(3), cost=OUTPUT_ONLY)
def lstm(x: np.ndarray, w: np.ndarray, r: np.ndarray, b: np.ndarray | None = None,
         sequence_lens: np.ndarray | None = None, initial_h: np.ndarray | None = None,
         initial_c: np.ndarray | None = None, p: np.ndarray | None = None, /, *,
         activation_alpha: list[float] | None = None, activation_beta: list[float] | None = None,
         activations: list[str] | None = None, clip: float | None = None, direction: str = "forward",
         hidden_size: int = 0, input_forget: int = 0, layout: int = 0):
    seq, w32, r32, bias, (h0, c0), hidden = _prepare(x, w, r, b, sequence_lens, (initial_h, initial_c), layout,
                                                     hidden_size, 4)
    flags = _direction_flags(direction)
    functions = _per_direction(_activations(activations or ["Sigmoid", "Tanh", "Tanh"] * len(flags),
                                            activation_alpha, activation_beta), 3, len(flags))
    ys, finals = [], [[], []]
    for d, reverse in enumerate(flags):
        projected = seq.x @ w32[d].T + (bias[d, :4 * hidden] + bias[d, 4 * hidden:])
        peep = None if p is None else np.split(np.asarray(p, np.float32)[d], 3)
        step = _LstmStep(r32[d], peep, h0[d], c0[d], functions[d], clip, input_forget)
        y, (h_last, c_last) = _run_direction(seq, projected, reverse, step)
        ys.append(y)
        finals[0].append(h_last)
        finals[1].append(c_last)
    return _outputs(ys, finals, layout, x.dtype)


class _GruStep:
    def __init__(self, r, rb, h0, acts, clip, linear_before_reset):
        hidden = r.shape[1]
        self.r_zr = np.ascontiguousarray(r[:2 * hidden].T)
        self.r_h = np.ascontiguousarray(r[2 * hidden:].T)
        self.rb_h = rb[2 * hidden:]
        self.initial = (h0,)
        self.f, self.g = acts
        self.clip = _clipper(clip)
        self.linear_before_reset = linear_before_reset

    def __call__(self, projected: np.ndarray, state: tuple) -> tuple[np.ndarray, tuple]:
        (h,) = state
        hidden = h.shape[1]
        zr = projected[:, :2 * hidden] + h @ self.r_zr
        z = self.f(self.clip(zr[:, :hidden]))
        rr = self.f(self.clip(zr[:, hidden:]))
        if self.linear_before_reset:
            candidate = projected[:, 2 * hidden:] + rr * (h @ self.r_h + self.rb_h)
        else:
            candidate = projected[:, 2 * hidden:] + (rr * h) @ self.r_h + self.rb_h
        hh = self.g(self.clip(candidate))
        h_new = (1 - z) * hh + z * h
        return h_new, (h_new,)


@register("GRU", 7, validate=_validator(2), cost=OUTPUT_ONLY)
def gru(x: np.ndarray, w: np.ndarray, r: np.ndarray, b: np.ndarray | None = None,
        sequence_lens: np.ndarray | None = None, initial_h: np.ndarray | None = None, /, *,
        activation_alpha: list[float] | None = None, activation_beta: list[float] | None = None,
        activations: list[str] | None = None, clip: float | None = None, direction: str = "forward",
        hidden_size: int = 0, layout: int = 0, linear_before_reset: int = 0):
    seq, w32, r32, bias, (h0,), hidden = _prepare(x, w, r, b, sequence_lens, (initial_h,), layout, hidden_size, 3)
    flags = _direction_flags(direction)
    functions = _per_direction(_activations(activations or ["Sigmoid", "Tanh"] * len(flags),
                                            activation_alpha, activation_beta), 2, len(flags))
    ys, finals = [], [[]]
    for d, reverse in enumerate(flags):
        wb, rb = bias[d, :3 * hidden], bias[d, 3 * hidden:]
        # z and r take both biases up front; the candidate's Rb sits inside the reset product
        # (linear_before_reset) or after the recurrent GEMM, so only Wb joins its projection.
        projected = seq.x @ w32[d].T + np.concatenate([wb[:2 * hidden] + rb[:2 * hidden], wb[2 * hidden:]])
        step = _GruStep(r32[d], rb, h0[d], functions[d], clip, linear_before_reset)
        y, (h_last,) = _run_direction(seq, projected, reverse, step)
        ys.append(y)
        finals[0].append(h_last)
    return _outputs(ys, finals, layout, x.dtype)


class _RnnStep:
    def __init__(self, r, h0, acts, clip):
        self.rt = np.ascontiguousarray(r.T)
        self.initial = (h0,)
        (self.f,) = acts
        self.clip = _clipper(clip)

    def __call__(self, projected: np.ndarray, state: tuple) -> tuple[np.ndarray, tuple]:
        h_new = self.f(self.clip(projected + state[0] @ self.rt))
        return h_new, (h_new,)


@register("RNN", 7, validate=_validator(1), cost=OUTPUT_ONLY)
def rnn(x: np.ndarray, w: np.ndarray, r: np.ndarray, b: np.ndarray | None = None,
        sequence_lens: np.ndarray | None = None, initial_h: np.ndarray | None = None, /, *,
        activation_alpha: list[float] | None = None, activation_beta: list[float] | None = None,
        activations: list[str] | None = None, clip: float | None = None, direction: str = "forward",
        hidden_size: int = 0, layout: int = 0):
    seq, w32, r32, bias, (h0,), hidden = _prepare(x, w, r, b, sequence_lens, (initial_h,), layout, hidden_size, 1)
    flags = _direction_flags(direction)
    functions = _per_direction(_activations(activations or ["Tanh"] * len(flags), activation_alpha,
                                            activation_beta), 1, len(flags))
    ys, finals = [], [[]]
    for d, reverse in enumerate(flags):
        projected = seq.x @ w32[d].T + (bias[d, :hidden] + bias[d, hidden:])
        y, (h_last,) = _run_direction(seq, projected, reverse, _RnnStep(r32[d], h0[d], functions[d], clip))
        ys.append(y)
        finals[0].append(h_last)
    return _outputs(ys, finals, layout, x.dtype)
