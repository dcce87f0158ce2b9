"""A row-streamed weight's next block is read while the current block computes (``weight_rows``):
on the reader thread, before the kernel of the block before it returns, with the same results; a
failure leaves no read running; the plan counts the blocks and the extra stored block."""

from __future__ import annotations

import threading
import time
from functools import partial

import numpy as np
import pytest

from frame.engine import load_model
from frame.engine.passes import weight_decoding
from frame.engine.passes.weight_decoding import Layout, decoded_weight_items
from frame.engine.passes.weight_rows import WeightRows
from frame.engine.plan_costs import plan_costs
from tests.engine.test_weight_decoding import _every_op_model, _feeds, save


class SlowRows:
    """A provider whose row reads take ``seconds`` and record when and on which thread they ran."""

    def __init__(self, weight: np.ndarray, seconds: float = 0.05, fail_at: int | None = None) -> None:
        self.weight, self.seconds, self.fail_at = weight, seconds, fail_at
        self.reads: list[tuple[int, str, float, float]] = []  # (first row, thread, start, end)

    def get_rows(self, ref, rows: np.ndarray) -> np.ndarray:
        started = time.perf_counter()
        time.sleep(self.seconds)
        if self.fail_at is not None and int(rows[0]) == self.fail_at:
            raise OSError(f"rows {rows[0]}..: the card went away")
        self.reads.append((int(rows[0]), threading.current_thread().name, started, time.perf_counter()))
        return self.weight[rows[0]:rows[-1] + 1].copy()


class _Ref:
    def __init__(self, weight: np.ndarray) -> None:
        self.shape, self.dtype, self.name = weight.shape, weight.dtype, "w"


def _rows(weight: np.ndarray, provider) -> WeightRows:
    return WeightRows(_Ref(weight), provider)  # type: ignore[arg-type]


@pytest.fixture
def four_blocks(monkeypatch):
    """A 16-channel fp16 weight in four blocks of four output channels."""
    monkeypatch.setattr(weight_decoding, "BLOCK_BYTES", 4 * 8 * 4)
    monkeypatch.setattr(weight_decoding, "MIN_BLOCK_CHANNELS", 1)
    rng = np.random.default_rng(3)
    return rng.standard_normal((16, 8)).astype(np.float16), rng.standard_normal((5, 8)).astype(np.float32)


def _gemm(x: np.ndarray, w: np.ndarray, calls: list) -> np.ndarray:
    started = time.perf_counter()
    time.sleep(0.05)
    calls.append((started, time.perf_counter()))
    return x @ w.T


def test_the_next_block_is_read_on_the_reader_thread_while_this_one_computes(four_blocks):
    weight, x = four_blocks
    provider, calls = SlowRows(weight), []
    layout = Layout(0, 1, None)
    got = decoded_weight_items([x], _rows(weight, provider), _kernel=partial(_gemm, calls=calls), _layout=layout)[0]
    # per block BLAS may pick another kernel (summation order) than for the whole product: float32
    # rounding of 8-term dot products of size ~3, so an absolute floor, not a relative bound alone
    np.testing.assert_allclose(got, x @ weight.astype(np.float32).T, rtol=1e-6, atol=1e-5)
    assert [r[0] for r in provider.reads] == [0, 4, 8, 12] and len(calls) == 4
    assert provider.reads[0][1] == threading.current_thread().name  # the first block: nothing to overlap
    assert all(r[1].startswith("frame-rows") for r in provider.reads[1:])
    for (_, _, read_start, _), (_, kernel_end) in zip(provider.reads[1:], calls):
        assert read_start < kernel_end  # block i + 1 was being read before block i's kernel returned


def test_a_failed_read_raises_in_the_op_and_a_failed_kernel_leaves_no_read_running(four_blocks):
    weight, x = four_blocks
    layout = Layout(0, 1, None)
    with pytest.raises(OSError, match="card went away"):
        decoded_weight_items([x], _rows(weight, SlowRows(weight, fail_at=8)), _kernel=lambda a, w: a @ w.T,
                             _layout=layout)

    provider = SlowRows(weight, seconds=0.2)

    def broken(a, w):
        raise ValueError("kernel failed")

    with pytest.raises(ValueError, match="kernel failed"):
        decoded_weight_items([x], _rows(weight, provider), _kernel=broken, _layout=layout)
    assert [r[0] for r in provider.reads] == [0, 4]  # the block read ahead finished before the op returned


def test_a_model_streams_rows_ahead_and_the_plan_counts_blocks_and_the_extra_block(tmp_path, monkeypatch):
    """The fixture's row-streamed Conv, Gemm and upsample Conv: same results as the ONNX reference
    path (``test_weight_decoding``), their block counts in the plan's count, and the scratch holds the
    next block's stored rows beside the current decoded block."""
    monkeypatch.setattr(weight_decoding, "BLOCK_BYTES", 64)
    monkeypatch.setattr(weight_decoding, "MIN_BLOCK_CHANNELS", 1)
    monkeypatch.setattr(weight_decoding, "STREAM_ROWS_MIN_BYTES", 0)
    path = save(_every_op_model(), tmp_path / "m.onnx", external=True)
    threads = set()
    original = WeightRows._read_now

    def spy(self, start, stop):
        threads.add(threading.current_thread().name.split("_")[0])
        return original(self, start, stop)

    monkeypatch.setattr(WeightRows, "_read_now", spy)
    with load_model(path, weights="nocache") as m:
        got = m.run(_feeds())
    with load_model(path, weights="ram") as m:
        want = m.run(_feeds())
    for name in ("g2", "up"):
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)
    assert "frame-rows" in threads
    shapes = {k: v.shape for k, v in _feeds().items()}
    streamed = plan_costs(path, shapes).steps
    monkeypatch.setattr(weight_decoding, "STREAM_ROWS_MIN_BYTES", 1 << 40)
    fetched = plan_costs(path, shapes).steps
    assert len(streamed) == len(fetched)
    rows = [i for i, s in enumerate(streamed) if s.row_bytes]
    assert len(rows) == 3 and all(streamed[i].row_blocks > 1 for i in rows)
    assert not any(s.row_bytes or s.row_blocks for s in fetched)
    for i in rows:  # the next block's stored rows beside the decoded block and the kernel's scratch
        assert streamed[i].scratch_bytes >= fetched[i].scratch_bytes + streamed[i].row_bytes // streamed[i].row_blocks
