"""The run loop: fetch weights at first use, run one node, free every value at its last use.

Peak memory is the live activations plus the weights of the current node (plus the provider's
read-ahead budget). Three details keep it that way:

* a kernel may overwrite input 0 (``_reuse=True``) only if the plan says it dies here *and* nothing
  else references its buffer: it owns its data and its refcount shows no view or alias of it;
* an output that is a small view of a large buffer (a Slice of a big tensor) is copied, otherwise
  the view would keep the whole base alive after the base's own last use;
* fp16 weights are upcast when fetched, so compute is float32 (see ``graph.compute_in_float32``).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import numpy as np

from frame.engine import blas_threads, buffers
from frame.engine.errors import EngineError, FrameError, NodeError
from frame.engine.graph import Step
from frame.engine.io.weights import WeightRef
from frame.engine.passes.weight_decoding import STORED_INPUTS_END, decoded_weight_items, decoded_weight_op
from frame.engine.passes.weight_rows import WeightRows
from frame.engine.providers.base import WeightsProvider

if TYPE_CHECKING:
    from frame.engine.subgraphs import Body

log = logging.getLogger(__name__)

Progress = Callable[[float], None]


def _base_nbytes(array: np.ndarray) -> int:
    base = array.base
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    nbytes = getattr(base, "nbytes", None)
    return int(nbytes) if nbytes is not None else len(memoryview(base).cast("B"))


def detach_small_view(array: np.ndarray) -> np.ndarray:
    """A copy of ``array`` if it is a view of a buffer at least 4× its size, else ``array``."""
    if array.base is not None and array.nbytes * 4 <= _base_nbytes(array):
        return array.copy()
    return array


def _may_overwrite(array: np.ndarray) -> bool:
    """True if only the run loop's environment references ``array`` and no one else sees its buffer.

    Expected references: the environment dict, the caller's local, getrefcount's argument, this
    function's parameter (CPython). A live view holds one more through its ``.base``.
    A view qualifies when it spans its whole base and the base is otherwise unreferenced: the
    output of a Reshape (exported GroupNorm is Reshape → InstanceNormalization → Reshape → Mul →
    Add), which would otherwise make the Mul allocate a second activation-sized array.
    """
    if not array.flags.writeable or sys.getrefcount(array) > 4:
        return False
    if array.flags.owndata:
        return True
    base = array.base
    # references to base: array.base, the local ``base``, getrefcount's argument
    # (and the pool's own reference when base is a ``buffers`` pool buffer)
    expected = 4 if buffers.shared().owns(base) else 3
    return (isinstance(base, np.ndarray) and base.flags.owndata and array.flags.c_contiguous
            and base.nbytes == array.nbytes and sys.getrefcount(base) <= expected)


class Executor:
    """Runs a plan (``graph.make_plan``) against a weights provider."""

    def __init__(self, steps: list[Step], provider: WeightsProvider, outputs: list[str]) -> None:
        self.steps = steps
        self.provider = provider
        self.outputs = outputs
        self.after_step: Callable[[int, dict], None] | None = None  # test/diagnostic hook
        self.rng: object | None = None  # the generator random ops draw from during the current run
        # tensor name -> function of its value, applied as the tensor is produced during the current run
        # (``Model.run(overrides=...)``: a text encoder's token-embedding rows for textual inversion)
        self.overrides: Mapping[str, Callable[[np.ndarray], np.ndarray]] = {}

    def fetch(self, ref: WeightRef) -> np.ndarray:
        array = ref.value if ref.value is not None else self.provider.get(ref)
        if array.dtype == np.float16 and not ref.keep_float16:
            array = array.astype(np.float32)
        return array

    def run(self, feeds: dict[str, np.ndarray], progress: Progress | None = None,
            rng: object | None = None,
            overrides: Mapping[str, Callable[[np.ndarray], np.ndarray]] | None = None) -> dict[str, np.ndarray]:
        env: dict[str, np.ndarray] = dict(feeds)
        self.rng = rng
        self.overrides = overrides or {}
        try:
            with np.errstate(all="ignore"):  # once per run, not per kernel (see ``_run_step``)
                self.execute(self.steps, env, progress, top=True)
        except BaseException:
            env.clear()  # a failed run must not keep its activations alive through the traceback
            raise
        finally:
            self.rng = None
            self.overrides = {}
            blas_threads.shared().restore()
            buffers.shared().forget()
        return {name: env[name] for name in self.outputs}

    def run_shared(self, feeds: list[dict[str, np.ndarray]], progress: Progress | None = None
                   ) -> list[dict[str, np.ndarray]]:
        """Run the plan for several inputs at once, node by node: each node's weights are fetched once
        and every item runs that node while they are held (classifier-free guidance's two passes read
        the UNet's weights once per step, without a batch-of-two's larger kernel temporaries)."""
        envs = [dict(f) for f in feeds]
        try:
            with np.errstate(all="ignore"):
                self._execute_shared(envs, progress)
        except BaseException:
            for env in envs:
                env.clear()
            raise
        finally:
            blas_threads.shared().restore()
            buffers.shared().forget()
        return [{name: env[name] for name in self.outputs} for env in envs]

    def _execute_shared(self, envs: list[dict[str, np.ndarray]], progress: Progress | None) -> None:
        total = len(self.steps)
        for i, step in enumerate(self.steps):
            weights = {ref.name: self.fetch(ref) for ref in step.fetch}
            for env in envs:
                env.update(weights)
            weights.clear()  # the envs hold them now; sharing is safe: no step may overwrite a weight (Step.reuse)
            if step.weight_rows is not None:  # read block by block by the op, each block once for all items
                self._run_rows_shared(step, envs)
            elif not self._run_decoded_shared(step, envs):  # an 8-bit/fp16 weight decoded once for all items
                for env in envs:
                    self._run_step(step, env)
            for env in envs:
                for name in step.free:
                    env.pop(name, None)
            buffers.shared().trim()
            for ref in step.release:
                if ref.value is None:
                    self.provider.release(ref)
            if progress is not None:
                progress((i + 1) / total)

    def _run_rows_shared(self, step: Step, envs: list[dict[str, np.ndarray]]) -> None:
        """A row-streamed DecodedWeight step for every item of a shared run: one WeightRows for all, and
        when the items differ only in the data input, one pass over the blocks that runs each item
        while its block is decoded (``decoded_weight_items``), so the weight is read once per step."""
        rows = WeightRows(step.weight_rows, self.provider)
        for env in envs:
            env[rows.ref.name] = rows
        if not self._run_decoded_shared(step, envs):
            for env in envs:
                self._run_step(step, env)
        for env in envs:
            env.pop(rows.ref.name, None)

    def _run_decoded_shared(self, step: Step, envs: list[dict[str, np.ndarray]]) -> bool:
        """A DecodedWeight step for every item at once when the items share the stored weight (its
        values, scale and zero point): each block of the weight is decoded once for all of them
        (``decoded_weight_items``), not once per item. The kernel still runs each item on its own with
        the same decoded block and the item's own other operands (a NormConv's GroupNorm table differs
        per item), so every item gets the bytes a separate run gives (DecodedWeight splits its own
        products: BLAS on one thread whatever the items' shapes). False when it does not apply (the
        caller runs each item)."""
        node, first = step.node, envs[0]
        fn = node.spec.fn
        if len(envs) == 1 or getattr(fn, "func", None) is not decoded_weight_op:
            return False
        stored, others = node.inputs[1:STORED_INPUTS_END], node.inputs[STORED_INPUTS_END:]
        if not all(name == "" or env.get(name) is first.get(name) for env in envs[1:] for name in stored):
            return False
        try:
            xs = [env[node.inputs[0]] for env in envs]
            operands = [first[name] if name else None for name in stored]
            rests = [tuple(env[name] if name else None for name in others) for env in envs]
        except KeyError as exc:
            raise EngineError(f"{node.label}: input {exc.args[0]!r} is not available") from None
        blas_threads.shared().fit_step(node.op_type, [xs[0], *operands, *rests[0]])
        try:
            results = decoded_weight_items(xs, *operands, item_rests=rests, **fn.keywords)
        except FrameError:
            raise
        except Exception as exc:
            raise NodeError(f"{node.label} failed on {len(xs)} shared items: {type(exc).__name__}: {exc}") from exc
        for env, value in zip(envs, results):
            env[node.outputs[0]] = detach_small_view(value)
        return True

    def execute(self, steps: list[Step], env: dict[str, np.ndarray], progress: Progress | None = None,
                held: dict[WeightRef, np.ndarray] | None = None, top: bool = False) -> None:
        """Run ``steps`` in ``env``: the main plan, or a body's (``Scope``). With ``held``
        (a loop body), weights are fetched once into it and released by ``release_all`` at the end."""
        total = len(steps)
        for i, step in enumerate(steps):
            if step.weight_rows is not None:  # read block by block by the op itself
                env[step.weight_rows.name] = WeightRows(step.weight_rows, self.provider)
            for ref in step.fetch:
                if held is None:
                    env[ref.name] = self.fetch(ref)
                else:
                    if ref not in held:
                        held[ref] = self.fetch(ref)
                    env[ref.name] = held[ref]
            self._run_step(step, env, held)
            if step.weight_rows is not None:
                env.pop(step.weight_rows.name, None)
            for name in step.free:
                env.pop(name, None)
            buffers.shared().trim()
            if held is None:
                for ref in step.release:
                    if ref.value is None:
                        self.provider.release(ref)
            if top and self.after_step is not None:
                self.after_step(i, env)
            if progress is not None:
                progress((i + 1) / total)

    def release_all(self, held: dict[WeightRef, np.ndarray]) -> None:
        for ref in held:
            if ref.value is None:
                self.provider.release(ref)
        held.clear()

    def gather_rows(self, step: Step, env: dict[str, np.ndarray]) -> np.ndarray:
        """Gather(axis 0) from a streamed weight reading only the rows the indices name.

        Providers may offer ``get_rows(ref, rows)`` (sorted unique rows); otherwise the whole
        weight is fetched and indexed, which is still correct.
        """
        ref, node = step.gather_rows, step.node
        indices = np.asarray(env[node.inputs[1]])
        if indices.dtype.kind not in "iu":
            raise NodeError(f"{node.label}: indices have dtype {indices.dtype}, expected an integer type")
        count = ref.shape[0]
        flat = indices.astype(np.int64).reshape(-1)
        flat = np.where(flat < 0, flat + count, flat)
        if flat.size and (flat.min() < 0 or flat.max() >= count):
            raise NodeError(f"{node.label}: index out of range for {count} rows of weight {ref.name!r}")
        rows, inverse = np.unique(flat, return_inverse=True)
        get_rows = getattr(self.provider, "get_rows", None)
        table = get_rows(ref, rows) if get_rows is not None else self.provider.get(ref)[rows]
        if get_rows is None:
            self.provider.release(ref)
        result = table[inverse].reshape(indices.shape + tuple(ref.shape[1:]))
        return result.astype(np.float32) if result.dtype == np.float16 else result

    def _run_step(self, step: Step, env: dict[str, np.ndarray], held: dict | None = None) -> None:
        node = step.node
        if step.gather_rows is not None:
            env[node.outputs[0]] = self.gather_rows(step, env)
            self._override(node.outputs[:1], env)
            return
        try:
            args = [env[name] if name else None for name in node.inputs]
        except KeyError as exc:  # a bug in the plan, not in the user's data
            raise EngineError(f"{node.label}: input {exc.args[0]!r} is not available") from None
        kwargs = node.attrs
        if step.reuse and _may_overwrite(args[0]):
            kwargs = {**node.attrs, "_reuse": True}
        if "_scope" in node.spec.hints:  # control flow: the kernel runs bodies in this environment
            kwargs = {**kwargs, "_scope": Scope(self, env, held)}
        if "_rng" in node.spec.hints:  # random ops draw from the run's generator (None: their own)
            kwargs = {**kwargs, "_rng": self.rng}
        # The registry wraps kernels in np.errstate(all="ignore"); ``run`` already set that for the
        # whole run, so the unwrapped kernel saves an errstate switch per step (~3 us, which is a
        # fifth of a small model's per-step cost).
        fn = getattr(node.spec.fn, "__wrapped__", node.spec.fn)
        blas_threads.shared().fit_step(node.op_type, args)  # BLAS on one thread where kernels split
        try:
            result = fn(*args, **kwargs)
        except FrameError:
            raise
        except Exception as exc:
            shapes = ", ".join("None" if a is None else f"{a.dtype}{list(a.shape)}" for a in args)
            raise NodeError(f"{node.label} failed on inputs ({shapes}): {type(exc).__name__}: {exc}") from exc
        del args
        results = result if isinstance(result, tuple) else (result,)
        if len(results) < len([o for o in node.outputs if o]):
            raise NodeError(f"{node.label}: kernel returned {len(results)} outputs for {len(node.outputs)}")
        for name, value in zip(node.outputs, results):
            if name:
                env[name] = detach_small_view(value) if isinstance(value, np.ndarray) else np.asarray(value)
        if self.overrides:
            self._override(node.outputs, env)

    def _override(self, names: list[str], env: dict[str, np.ndarray]) -> None:
        for name in names:
            change = self.overrides.get(name)
            if change is not None:
                env[name] = change(env[name])


class Scope:
    """What a control-flow kernel gets as ``_scope``: runs bodies against the enclosing values."""

    def __init__(self, executor: Executor, env: dict[str, np.ndarray], held: dict | None) -> None:
        self.executor = executor
        self.env = env
        self.held = held

    def run(self, body: Body, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """The body's outputs for these formal inputs (fewer inputs than declared: the rest omitted)."""
        env = {name: self.env[name] for name in body.outer}
        env.update(zip(body.inputs, inputs))
        try:
            self.executor.execute(body.steps, env, held=self.held)
        except NodeError as exc:
            raise NodeError(f"{body.where}: {exc}") from exc
        outputs = []
        for name in body.outputs:
            if name in env:
                outputs.append(env[name])
            elif name in body.weights:  # a branch that only returns a constant
                outputs.append(self.executor.fetch(body.weights[name]))
            else:
                raise EngineError(f"{body.where}: output {name!r} was not produced")
        return outputs

    def holding(self) -> Scope:
        """A scope that keeps every weight it fetches until ``release_held`` (for loop bodies)."""
        return self if self.held is not None else Scope(self.executor, self.env, {})

    def release_held(self) -> None:
        if self.held:
            self.executor.release_all(self.held)
