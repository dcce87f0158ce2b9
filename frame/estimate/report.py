"""The estimate in words: lines for ``frame estimate`` and ``frame config check``, a dict for the
phone's settings page (``<state_dir>/estimate.json``)."""

from __future__ import annotations

import time

from frame.config import estimate_inputs
from frame.config.schema import Config
from frame.estimate.choice import choose_steps, format_duration
from frame.estimate.configured import ConfiguredEstimate
from frame.estimate.night import NightEstimate, Projection
from frame.redact import redact_url


def size_text(value: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= scale:
            return f"{value / scale:.1f} {unit}" if value < 100 * scale else f"{value / scale:.0f} {unit}"
    return f"{value:.0f} B"


def memory_text(value: float) -> str:
    """Memory as the project reports it (VmHWM in kB / 1024, labelled MB)."""
    return f"{value / (1 << 20):.0f} MB"


def rate_text(value: float | None) -> str:
    return "not measured" if not value else f"{size_text(value)}/s"


def macs_text(macs: float) -> str:
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if macs >= scale:
            return f"{macs / scale:.1f} {unit}"
    return f"{macs:.0f}"


def _steps(count: int) -> str:
    return f"{count} step" if count == 1 else f"{count} steps"


MODE_WORDS = {
    "shared": "shared (each op runs both while its weights are held: weights read once per step)",
    "batched": "batched (one batch of two: weights read once per step)",
    "sequential": "one after the other (weights read twice per step)",
}


def _guidance(estimate: NightEstimate) -> str:
    plan = estimate.plan
    if not plan.guided:
        return f"guidance {plan.guidance:g}: one UNet pass per step"
    return f"guidance {plan.guidance:g}: two passes per step, {MODE_WORDS[plan.guidance_mode]}"


def _projection(p: Projection, plan_steps: int) -> str:
    phases = ", ".join(f"{name} {format_duration(s)}" for name, s in p.phases.items() if s >= 0.5)
    stall = f", {p.stall_share:.0%} of it waiting for weights" if p.stall_share >= 0.05 else ""
    return (f"{format_duration(p.seconds)} ({_steps(plan_steps)} of {format_duration(p.step_seconds)}{stall}; "
            f"{phases})")


def _fits(p: Projection, window_seconds: float, estimate: NightEstimate, minimum: int) -> str:
    fixed = p.seconds - p.step_seconds * estimate.plan.steps
    choice = choose_steps(estimate.plan.steps, minimum, fixed, p.step_seconds, window_seconds)
    if choice.fits and not choice.reduced:
        return "fits"
    if choice.fits:
        return (f"does not fit with {choice.margin:.0%} to spare; {_steps(choice.steps)} would "
                f"({format_duration(choice.projected_seconds)})")
    return (f"does not fit, not even at the minimum {_steps(choice.steps)} "
            f"({format_duration(choice.projected_seconds)})")


def lines(result: ConfiguredEstimate) -> list[str]:
    """The estimate as owner-facing lines (``frame estimate`` prints them as they are)."""
    e = result.estimate
    plan = e.plan
    minimum = plan.min_steps
    per_step_macs = e.macs_per_step
    unet_bytes = plan.runs_of("unet")[0].count.weight_bytes
    where = "over the link" if e.url else "from storage"
    source = redact_url(plan.source)  # a NAS URL's credentials are never printed
    out = [f"model: {plan.label} ({source}), {plan.width}x{plan.height}, {_steps(plan.steps)} {plan.sampler}; "
           f"{_guidance(e)}",
           f"per step: {macs_text(per_step_macs)} multiply-adds, {size_text(e.bytes_per_step)} of weights read "
           f"{where} (UNet {size_text(unet_bytes)} x {plan.weight_reads})",
           f"per night: {size_text(e.bytes_per_night)} read {where} "
           f"({', '.join(_phase_bytes(e))})",
           f"peak memory: {memory_text(e.peak_bytes)} ({e.peak_phase}); worker limit "
           f"{memory_text(result.memory_limit_bytes)}: "
           f"{'fits' if e.peak_bytes <= result.memory_limit_bytes else 'does NOT fit'}"]
    if plan.guided and plan.guidance_reason:
        out.append(f"guidance passes {plan.guidance_mode} tonight, as the render chooses: {plan.guidance_reason}")
    alt = result.alternative
    if alt is not None:
        way = "one after the other" if alt.plan.guidance_mode == "sequential" else alt.plan.guidance_mode
        out.append(f"guidance passes {way} instead: {size_text(alt.bytes_per_step)} read per step, peak "
                   f"{memory_text(alt.peak_bytes)}, night {format_duration(alt.here.seconds)} here, "
                   f"{format_duration(alt.projections[1].seconds)} on a Pi Zero 2 W")
    out.extend(_vae_lines(result))
    r = result.rates
    out.append(f"this machine: {_projection(e.here, plan.steps)}; measured in {r.seconds:.1f} s: conv "
               f"{macs_text(r.kind_macs['conv'])}/s, matmul {macs_text(r.kind_macs['matmul'])}/s, attention "
               f"{macs_text(r.kind_macs['attention'])}/s, storage {rate_text(r.read_bytes)}")
    pi = e.projections[1]
    out.append(f"Raspberry Pi Zero 2 W: {_projection(pi, plan.steps)}; "
               f"{'Wi-Fi' if e.url else 'SD card'} {rate_text(pi.read_bytes)}")
    out.append(f"render window {result.window} ({format_duration(result.window_seconds)}): this machine "
               f"{_fits(e.here, result.window_seconds, e, minimum)}; Pi Zero 2 W "
               f"{_fits(pi, result.window_seconds, e, minimum)}")
    out.extend(f"note: {n}" for n in e.notes)
    return out


def _vae_lines(result: ConfiguredEstimate) -> list[str]:
    """Tonight's VAE and the other (full <-> tiny) side by side: the decode and the night, here and on the Pi."""
    other = result.other_vae
    if other is None:
        return []
    e = result.estimate

    def figures(n: NightEstimate) -> str:
        return (f"decode {format_duration(n.here.phases.get('vae', 0.0))} here, "
                f"{format_duration(n.projections[1].phases.get('vae', 0.0))} on a Pi Zero 2 W; night "
                f"{format_duration(n.here.seconds)} here, {format_duration(n.projections[1].seconds)} on the Pi; "
                f"peak {memory_text(n.peak_bytes)}")

    return [f"VAE: {result.vae_label} (tonight): {figures(e)}",
            f"VAE: {result.other_vae_label} instead: {figures(other)}"]


def _vae_figures(label: str, n: NightEstimate) -> dict:
    return {"label": label, "decode_seconds_pi": round(n.projections[1].phases.get("vae", 0.0), 1),
            "seconds_here": round(n.here.seconds, 1), "seconds_pi": round(n.projections[1].seconds, 1),
            "peak_bytes": n.peak_bytes}


def _phase_bytes(e: NightEstimate) -> list[str]:
    totals: dict[str, int] = {}
    for run in e.plan.runs:
        total = run.count.weight_bytes * run.evaluations * (e.plan.steps if run.per_step else 1)
        totals[run.phase] = totals.get(run.phase, 0) + total
    return [f"{phase} {size_text(n)}" for phase, n in totals.items() if n]


def to_dict(result: ConfiguredEstimate, origin: str, config: Config | None = None) -> dict:
    """What the settings page shows (``estimate.json``): the same lines plus the key figures, the worker's
    ``memory_limit_bytes`` (the verdict's "to spare") and, given ``config``, the settings it depends on
    (``inputs``: the page says when they changed since, ``frame.config.estimate_inputs``).
    ``passes_per_step``: UNet passes computed per step (2 with guidance); ``guidance_mode``: how they
    run ("shared", "sequential", "batched"; "none" without guidance); ``weight_reads_per_step``: how
    often the UNet's weights are read per step; ``batched`` kept for readers of the older file."""
    e = result.estimate
    return {"made_at": time.time(), "origin": origin, "lines": lines(result),
            "model": e.plan.label, "size": f"{e.plan.width}x{e.plan.height}", "steps": e.plan.steps,
            "passes_per_step": e.plan.passes, "guidance_mode": e.plan.guidance_mode if e.plan.guided else "none",
            "weight_reads_per_step": e.plan.weight_reads, "batched": e.plan.batched,
            "bytes_per_step": e.bytes_per_step, "bytes_per_night": e.bytes_per_night,
            "macs_per_step": e.macs_per_step, "peak_bytes": e.peak_bytes,
            "seconds_here": round(e.here.seconds, 1), "seconds_pi": round(e.projections[1].seconds, 1),
            "window_seconds": result.window_seconds, "memory_limit_bytes": result.memory_limit_bytes,
            "vae": _vae_figures(result.vae_label, e),
            **({"other_vae": _vae_figures(result.other_vae_label, result.other_vae)} if result.other_vae else {}),
            **({"inputs": estimate_inputs.inputs(config)} if config is not None else {})}
