"""One evaluation of one model, counted for the night: the engine's plan costs with what a probe times.

The count itself (work, weight bytes and memory per plan step) is the engine's
(``frame.engine.plan_costs``: it knows its kernels and its plan). The estimate adds, per compute
step, the signature a throughput probe must run to time it (``frame.estimate.signature``), and the
streamed weights' precision the guidance plan reads (``frame.diffusion.guidance_plan.precision_of``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from frame.diffusion.guidance_plan import precision_of
from frame.engine.costs import ATTENTION, CONV, MATMUL
from frame.engine.io.http_settings import HttpSettings
from frame.engine.plan_costs import PlanCosts, StepCost, plan_costs
from frame.estimate.signature import step_signature


def count_graph(source, input_shapes: Mapping[str, Sequence[int]],  # noqa: ANN001 - path, URL or OnnxStream source
                attention_budget: int = 16 << 20, structure=None,  # noqa: ANN001
                http: HttpSettings | None = None) -> PlanCosts:
    """Count one evaluation of ``source`` with its inputs at ``input_shapes`` (``plan_costs``), each
    compute step with its probe signature.

    ``structure``: ``read_structure(source)`` if the caller has it already (it is consumed); ``http``:
    how a URL is read, as the render reads it (token, retries, weight cache; None: the defaults)."""
    return plan_costs(source, input_shapes, attention_budget, structure, http,
                      describe=step_signature, precision=precision_of)


__all__ = ["ATTENTION", "CONV", "MATMUL", "PlanCosts", "StepCost", "count_graph"]
