"""LoRAs for a render: ``model.loras`` and A1111's ``<lora:NAME:SCALE>`` tags (``frame.config.lora_tags``),
read and handed to the engine per component (``frame.engine.lora`` applies them as the weights stream).
The tag is removed from the text the tokenizer sees and kept in the picture's parameters, so they
paste back into A1111.

At night a LoRA file that cannot be used (malformed, NaN or inf values, cut short) is left out with a
warning and the picture painted without it, as a missing one is: one bad file must not cost the
night, nor, for a queued prompt, every night after. ``LoraOutcome`` keeps what
happened to each LoRA (left out and why, or how many layers it changed: "matched 0 layers" is a
warning too) for the log and the picture's details.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from frame.config.lora_tags import (  # noqa: F401  (re-exported: the pipeline's one LoRA module)
    LoraRequest,
    available,
    check_prompts,
    find,
    lora_folders,
    split_tags,
    strip_tags,
)
from frame.engine.lora import LoraFile, LoraUse, match_loras, read_checked
from frame.engine.model import read_structure
from frame.errors import UsageError

if TYPE_CHECKING:
    from frame.engine.runnable import Runnable

log = logging.getLogger(__name__)
TEXT_COMPONENTS = ("text_encoder", "text_encoder_2")


@dataclass
class LoraOutcome:
    """What became of each requested LoRA in a render: left out (``refused``: name -> why) or applied to
    ``layers`` (name -> component -> layers changed, filled in as each model loads)."""

    refused: dict[str, str] = field(default_factory=dict)
    layers: dict[str, dict[str, int]] = field(default_factory=dict)
    unscaled: set[str] = field(default_factory=set)  # asked for at scale 0

    def notes(self) -> dict[str, str]:
        """Name -> "matched N layers" / "matched 0 layers" / "scale 0" / "not applied: why"."""
        out = {name: f"not applied: {why}" for name, why in self.refused.items()}
        for name, counts in self.layers.items():
            if name not in out:
                total = sum(counts.values())
                out[name] = "scale 0" if name in self.unscaled and not total else \
                    f"matched {total} layer{'' if total == 1 else 's'}"
        return out

    def warnings(self) -> list[str]:
        return [f"LoRA {name}: {note}" for name, note in self.notes().items()
                if note.startswith("not applied") or note == "matched 0 layers"]


def resolve(requests: Sequence[LoraRequest], folders: Sequence[str], outcome: LoraOutcome | None = None
            ) -> list[tuple[LoraRequest, LoraFile]]:
    """Each request's file, read and checked (``read_checked``). Without ``outcome`` a bad one raises
    UsageError; with it, it is left out and its reason kept there (a render: the night paints)."""
    resolved = []
    for request in requests:
        try:
            resolved.append((request, read_checked(find(request, folders))))
        except UsageError as exc:
            if outcome is None:
                raise
            outcome.refused[request.name] = str(exc)
            log.warning("LoRA %s is left out: %s", request.name, exc)
            continue
        if outcome is not None:
            outcome.layers.setdefault(request.name, {})
            if request.scale == 0 and not request.text_scale:
                outcome.unscaled.add(request.name)
    return resolved


def uses_for(resolved: Sequence[tuple[LoraRequest, LoraFile]], component: str) -> list[LoraUse]:
    """The engine's ``LoraUse`` list for one component (``unet``, ``text_encoder``, ``text_encoder_2``)."""
    uses = []
    for request, lora in resolved:
        scale = request.text_scale if component in TEXT_COMPONENTS and request.text_scale is not None else request.scale
        if lora.modules(component) and scale != 0:
            uses.append(LoraUse(request.name, lora.modules(component), scale))
    return uses


def loader(load: Callable[..., Runnable], requests: Sequence[LoraRequest], folders: Sequence[str],
           components: dict[Any, str], outcome: LoraOutcome | None = None) -> Callable[..., Runnable]:
    """``load`` with each component's part of the requested LoRAs (``components``: source -> component
    name). Without ``outcome``, UsageError for an unknown name or a file that is not a LoRA, before
    anything runs; with it, such a LoRA is left out and each loaded model's layer counts are kept."""
    resolved = resolve(requests, folders, outcome)
    return with_loras(load, {source: uses_for(resolved, name) for source, name in components.items()},
                      outcome, components)


def with_loras(load: Callable[..., Runnable], by_source: dict[Any, list[LoraUse]],
               outcome: LoraOutcome | None = None, components: dict[Any, str] | None = None
               ) -> Callable[..., Runnable]:
    """A loader that passes each component's LoRAs to the engine (``load(source, loras=...)``) and
    notes in ``outcome`` how many layers each changed in that component (the model's ``lora_report``)."""
    if not any(by_source.values()):
        return load

    def loaded(source: Any, **kwargs: Any) -> Runnable:
        uses = by_source.get(source)
        if not uses:
            return load(source, **kwargs)
        model = load(source, loras=uses, **kwargs)
        report = model.lora_report
        if outcome is not None and report is not None:
            component = (components or {}).get(source, str(source))
            for label, count in report.applied.items():
                outcome.layers.setdefault(label, {})[component] = count
        return model

    return loaded


def describe(requests: Sequence[LoraRequest], folders: Sequence[str], model_source: str,
             prompts: Sequence[str] = ()) -> list[tuple[str, str]]:
    """(level, line) for ``frame config check``: each LoRA found or not, what it changes in a local
    model (modules applied, keys matching nothing) and the ``<lora:…>`` tags of ``prompts`` (themes)."""
    lines = [("error", problem) for problem in check_prompts(prompts, folders)]
    root = Path(model_source).expanduser()
    for request in requests:
        try:
            lora = read_checked(find(request, folders))
        except UsageError as exc:
            lines.append(("error", str(exc)))
            continue
        for component, modules in sorted(lora.components.items()):
            path = root / component / "model.onnx"
            if "://" in model_source or not path.is_file():
                continue
            structure = read_structure(str(path))
            report = match_loras(structure.nodes, structure.weights, [LoraUse(lora.name, modules, 1.0)])[1]
            for line in report.lines():
                lines.append(("warning" if "not applied" in line else "info", f"{component}: {line.strip()}"))
        lines += [("warning", f"{lora.name}: unsupported key (not applied): {key}") for key in lora.unsupported]
    return lines
