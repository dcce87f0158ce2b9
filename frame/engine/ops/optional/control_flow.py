"""Control flow: If, Loop and Scan, whose bodies are graphs (``frame.engine.subgraphs.Body``).

The loader binds and plans each body like the main graph and appends the values a body reads from
enclosing graphs to the node's inputs (after its own ``_num_inputs``), so those stay alive until the
node runs; the kernels ignore them and run bodies through the executor's ``_scope``, which looks
them up by name. Body weights are streamed through the weights provider; a Loop or Scan holds its
body's weights from the first iteration to the last instead of reading them once per iteration.

Semantics follow the ONNX spec as onnxruntime implements it: If takes the first element of ``cond``;
Loop passes the iteration number and the condition as scalars (int64, bool), stops at ``M``
iterations or when the body returns false, and stacks per-iteration scan outputs on a new first axis
(an output of a loop that ran zero times is empty with the body's declared trailing dims); Scan
(opset 9 on) slices its scan inputs along ``scan_input_axes``, optionally in reverse, and stacks
outputs along ``scan_output_axes``; opset 8's Scan (a batch axis first, optional per-batch
``sequence_lens``, outputs past a sequence's length zero-filled) runs it once per batch entry.
Only tensors flow: sequence and optional values are refused at load time.
"""

from __future__ import annotations

import numpy as np

from frame.engine.ops.registry import OUTPUT_ONLY, UnsupportedOp, register


def _graph_io(graph) -> tuple[int, int]:
    """(formal inputs, outputs) of a body, given as onnx.GraphProto at load or Body at run time."""
    if hasattr(graph, "steps"):
        return len(graph.inputs), len(graph.outputs)
    initializers = {t.name for t in graph.initializer}
    return len([v for v in graph.input if v.name not in initializers]), len(graph.output)


def _validate_if(attrs: dict) -> None:
    for name in ("then_branch", "else_branch"):
        if name not in attrs:
            raise UnsupportedOp(f"If needs the attribute {name!r}")
        inputs, outputs = _graph_io(attrs[name])
        if inputs:
            raise UnsupportedOp(f"If {name} declares {inputs} input(s); branches take none")
        if outputs < attrs["_num_outputs"]:
            raise UnsupportedOp(f"If {name} has {outputs} output(s), the node {attrs['_num_outputs']}")


@register("If", 1, validate=_validate_if, cost=OUTPUT_ONLY)
def if_(cond: np.ndarray, *_outer: np.ndarray, then_branch=None, else_branch=None, _scope=None,
        _num_outputs: int = 1) -> tuple[np.ndarray, ...]:
    if np.asarray(cond).size == 0:
        raise ValueError("If: the condition is an empty tensor")
    branch = then_branch if bool(np.asarray(cond).reshape(-1)[0]) else else_branch
    return tuple(_scope.run(branch, []))


def _validate_loop(attrs: dict) -> None:
    if "body" not in attrs:
        raise UnsupportedOp("Loop needs the attribute 'body'")
    carried = attrs["_num_inputs"] - 2
    inputs, outputs = _graph_io(attrs["body"])
    if carried < 0:
        raise UnsupportedOp("Loop needs the inputs M and cond (either may be empty)")
    if inputs != carried + 2:
        raise UnsupportedOp(f"Loop body declares {inputs} input(s), expected 2 + {carried} loop-carried")
    if outputs < carried + 1 or outputs - 1 < attrs["_num_outputs"]:
        raise UnsupportedOp(f"Loop body has {outputs} output(s) for {carried} loop-carried value(s) and "
                            f"{attrs['_num_outputs']} node output(s)")


def _stack(parts: list[np.ndarray], declared, axis: int = 0) -> np.ndarray:
    """Per-iteration values stacked on a new ``axis``; with no iteration, empty of the declared type."""
    if parts:
        return np.stack(parts, axis=axis)
    dtype, dims = declared
    trailing = [d or 0 for d in dims] if dims is not None else []
    trailing.insert(axis, 0)
    return np.zeros(trailing, dtype=dtype)


@register("Loop", 1, validate=_validate_loop, cost=OUTPUT_ONLY)
def loop(m: np.ndarray | None, cond: np.ndarray | None = None, /, *values: np.ndarray, body=None, _scope=None,
         _num_inputs: int = 2, _num_outputs: int = 0) -> tuple[np.ndarray, ...]:
    carried = list(values[:_num_inputs - 2])
    n_scans = len(body.outputs) - 1 - len(carried)
    trips = None if m is None else int(np.asarray(m).reshape(-1)[0])
    keep = True if cond is None else bool(np.asarray(cond).reshape(-1)[0])
    scans: list[list[np.ndarray]] = [[] for _ in range(n_scans)]
    scope = _scope.holding()
    try:
        i = 0
        while keep and (trips is None or i < trips):
            out = scope.run(body, [np.array(i, np.int64), np.array(keep), *carried])
            keep = bool(np.asarray(out[0]).reshape(-1)[0])
            carried = out[1:1 + len(carried)]
            for parts, value in zip(scans, out[1 + len(carried):]):
                parts.append(value)
            i += 1
    finally:
        if scope is not _scope:
            scope.release_held()
    stacked = [_stack(parts, body.output_types[1 + len(carried) + k]) for k, parts in enumerate(scans)]
    return tuple([*carried, *stacked])


def _validate_scan(attrs: dict) -> None:
    if "body" not in attrs:
        raise UnsupportedOp("Scan needs the attribute 'body'")
    scans = attrs.get("num_scan_inputs", 0)
    states = attrs["_num_inputs"] - scans
    inputs, outputs = _graph_io(attrs["body"])
    if scans < 1 or states < 0 or inputs != attrs["_num_inputs"]:
        raise UnsupportedOp(f"Scan body declares {inputs} input(s) for {attrs['_num_inputs']} node input(s) "
                            f"with num_scan_inputs={scans}")
    if outputs < states:
        raise UnsupportedOp(f"Scan body has {outputs} output(s) for {states} state variable(s)")


def _axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise ValueError(f"Scan: axis {axis} is out of range for rank {rank}")
    return axis % rank


@register("Scan", 9, validate=_validate_scan, cost=OUTPUT_ONLY)
def scan(*values: np.ndarray, body=None, num_scan_inputs: int = 0, scan_input_axes: list[int] | None = None,
         scan_input_directions: list[int] | None = None, scan_output_axes: list[int] | None = None,
         scan_output_directions: list[int] | None = None, _scope=None, _num_inputs: int = 0
         ) -> tuple[np.ndarray, ...]:
    values = values[:_num_inputs]
    n_states = _num_inputs - num_scan_inputs
    states, sequences = list(values[:n_states]), values[n_states:]
    in_axes = scan_input_axes or [0] * num_scan_inputs
    in_dirs = scan_input_directions or [0] * num_scan_inputs
    views = []
    for x, axis, reverse in zip(sequences, in_axes, in_dirs):
        view = np.moveaxis(x, _axis(axis, x.ndim), 0)
        views.append(view[::-1] if reverse else view)
    lengths = {v.shape[0] for v in views}
    if len(lengths) != 1:
        raise ValueError(f"Scan: scan inputs have different lengths along their scan axes: {sorted(lengths)}")
    steps = lengths.pop()
    n_scans = len(body.outputs) - n_states
    parts: list[list[np.ndarray]] = [[] for _ in range(n_scans)]
    scope = _scope.holding()
    try:
        for t in range(steps):
            out = scope.run(body, [*states, *(v[t] for v in views)])
            states = out[:n_states]
            for collected, value in zip(parts, out[n_states:]):
                collected.append(value)
    finally:
        if scope is not _scope:
            scope.release_held()
    out_axes = scan_output_axes or [0] * n_scans
    out_dirs = scan_output_directions or [0] * n_scans
    results = []
    for k, (collected, axis, reverse) in enumerate(zip(parts, out_axes, out_dirs)):
        if reverse:
            collected = collected[::-1]
        stacked = _stack(collected, body.output_types[n_states + k])
        results.append(np.moveaxis(stacked, 0, _axis(axis, stacked.ndim)) if axis else stacked)
    return tuple([*states, *results])


def _validate_scan8(attrs: dict) -> None:
    if "body" not in attrs:
        raise UnsupportedOp("Scan needs the attribute 'body'")
    scans = attrs.get("num_scan_inputs", 0)
    states = attrs["_num_inputs"] - 1 - scans
    inputs, outputs = _graph_io(attrs["body"])
    if scans < 1 or states < 0 or inputs != states + scans or outputs < states:
        raise UnsupportedOp(f"Scan body declares {inputs} input(s) and {outputs} output(s) for "
                            f"{attrs['_num_inputs']} node input(s) with num_scan_inputs={scans}")


@register("Scan", 8, validate=_validate_scan8, cost=OUTPUT_ONLY)
def scan8(sequence_lens: np.ndarray | None, /, *values: np.ndarray, body=None, directions: list[int] | None = None,
          num_scan_inputs: int = 0, _scope=None, _num_inputs: int = 0) -> tuple[np.ndarray, ...]:
    values = values[:_num_inputs - 1]
    n_states = len(values) - num_scan_inputs
    batch = values[0].shape[0]
    steps = values[n_states].shape[1]
    lengths = np.full(batch, steps) if sequence_lens is None else np.asarray(sequence_lens).reshape(-1)
    per_batch = []
    for b in range(batch):
        sliced = [v[b] for v in values[:n_states]] + [v[b, :lengths[b]] for v in values[n_states:]]
        per_batch.append(scan(*sliced, body=body, num_scan_inputs=num_scan_inputs,
                              scan_input_directions=directions, _scope=_scope, _num_inputs=len(values)))
    results = []
    for k in range(len(per_batch[0])):
        parts = [out[k] for out in per_batch]
        if k >= n_states:  # scan outputs: zero-fill the steps past each sequence's length
            parts = [np.pad(part, [(0, steps - part.shape[0])] + [(0, 0)] * (part.ndim - 1)) for part in parts]
        results.append(np.stack(parts))
    return tuple(results)
