"""How many bytes of a component's weights are read ahead: one rule, for the render and the estimate.

The ``prefetch`` provider (weights on disk) reads the next weights while the current op computes,
within a budget of bytes read but not yet used: 16 MB by default (``Prefetch``), because whatever is
read ahead sits on top of every step's memory peak. On a Pi Zero 2 W that default leaves the
SDXL-Turbo UNet waiting 40 s per step for weights (SD 1.5's: 6 % of each step); a 32 MB budget took
28 s off the SDXL UNet's projected evaluation (64 and 128 MB took no more: docs/estimate.md). So the
budget is larger only where the memory plan counted room for it: ``choose`` gives a component
``GROWN_BYTES`` when its counted render peak **with that budget** (``peak_mb(GROWN_BYTES)``:
``frame.estimate.memory``'s count of the component, read-ahead included, plus what the render worker
holds beside it) plus ``WORKER_EXTRA_MB`` stays within ``1 - MARGIN`` of the worker's memory limit —
the test ``frame.diffusion.vae.tiles`` fits its tiles with — else the provider's default (None).
The same limit decides the guidance passes and the VAE tiles first (they save more); the read-ahead
only takes what is left. Only the disk provider grows: over HTTP it is 32 MB already, and ``nocache``
and ``ram`` read nothing ahead. Without a count or a limit: the default.

The night's estimate (``frame.estimate.plan``) applies the rule to each component it counts and
times each evaluation with the budget it chose (``frame.estimate.timing``); the step-choice child
saves the budgets (``frame.worker.step_choice``) and the render worker hands them to the pipeline
(its plan's ``readahead``, ``Pipeline.use_plan``), whose loader sets them on each component's provider as it loads
(``loader``). So the render reads ahead exactly what the projection counted. The taste picker's
text embedding runs before the step choice: it keeps the default, in the render and the estimate.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from frame.diffusion.guidance_plan import WORKER_EXTRA_MB
from frame.diffusion.vae.tiles import MARGIN

if TYPE_CHECKING:
    from frame.engine.runnable import Runnable

MB = 1 << 20
GROWN_BYTES = 32 << 20  # the larger budget: the measured gain stops here (64 and 128 MB saved no more)
GROWS = "prefetch"      # the one provider whose budget grows (weights read from disk)

Loader = Callable[..., "Runnable"]


def choose(provider: str, peak_mb: Callable[[int], float | None], limit_mb: float | None) -> int | None:
    """``GROWN_BYTES`` when ``peak_mb(GROWN_BYTES)`` (the component's counted render peak in MB with
    that read-ahead) plus ``WORKER_EXTRA_MB`` fits ``limit_mb`` less ``MARGIN``; else None: the
    provider's default. ``provider``: the engine provider the component loads with."""
    if provider != GROWS or limit_mb is None:
        return None
    peak = peak_mb(GROWN_BYTES)
    if peak is None or peak + WORKER_EXTRA_MB > limit_mb * (1 - MARGIN):
        return None
    return GROWN_BYTES


def describe(budgets: Mapping[str, int]) -> str:
    """One line for the estimate's notes: which components read more ahead."""
    grown = sorted(name for name, size in budgets.items() if size)
    return (f"weights read {GROWN_BYTES // MB} MB ahead (within the worker's memory limit) for "
            f"{', '.join(grown)}" if grown else "")


def loader(load: Loader, budgets: Mapping[str, int], components: Sequence[tuple[Any, str]]) -> Loader:
    """``load`` that sets each component's read-ahead after loading it: ``budgets`` by component name
    (the estimate's), ``components`` the (source, name) pairs it may load. ``load`` itself when there
    are no budgets (no estimate tonight: every component keeps the provider's default)."""
    if not budgets:
        return load

    def load_with_budget(source: Any, *args: Any, **kwargs: Any) -> Runnable:
        model = load(source, *args, **kwargs)
        name = next((n for s, n in components if s is source or s == source), None)
        budget = budgets.get(name) if name else None
        if budget:
            model.set_readahead(budget)  # False, and nothing read ahead, on onnxruntime (serve-render)
        return model

    return load_with_budget
