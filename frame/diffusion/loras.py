"""LoRAs for a render: ``model.loras`` and A1111's ``<lora:NAME:SCALE>`` tags (``frame.config.lora_tags``),
read and handed to the engine per component (``frame.engine.lora`` applies them as the weights stream).
The tag is removed from the text the tokenizer sees and kept in the picture's parameters, so they
paste back into A1111.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from frame.config.lora_tags import (  # noqa: F401  (re-exported: the pipeline's one LoRA module)
    LoraRequest,
    available,
    check_prompts,
    find,
    lora_folders,
    split_tags,
    strip_tags,
)
from frame.engine.lora import LoraFile, LoraUse, match_loras, read_lora
from frame.engine.model import read_structure
from frame.errors import UsageError

TEXT_COMPONENTS = ("text_encoder", "text_encoder_2")


def resolve(requests: Sequence[LoraRequest], folders: Sequence[str]) -> list[tuple[LoraRequest, LoraFile]]:
    return [(request, read_lora(find(request, folders))) for request in requests]


def uses_for(resolved: Sequence[tuple[LoraRequest, LoraFile]], component: str) -> list[LoraUse]:
    """The engine's ``LoraUse`` list for one component (``unet``, ``text_encoder``, ``text_encoder_2``)."""
    uses = []
    for request, lora in resolved:
        scale = request.text_scale if component in TEXT_COMPONENTS and request.text_scale is not None else request.scale
        if lora.modules(component) and scale != 0:
            uses.append(LoraUse(request.name, lora.modules(component), scale))
    return uses


def loader(load: Callable[..., Any], requests: Sequence[LoraRequest], folders: Sequence[str],
           components: dict[Any, str]) -> Callable[..., Any]:
    """``load`` with each component's part of the requested LoRAs (``components``: source -> component
    name); UsageError for an unknown name or a file that is not a LoRA, before anything runs."""
    resolved = resolve(requests, folders)
    return with_loras(load, {source: uses_for(resolved, name) for source, name in components.items()})


def with_loras(load: Callable[..., Any], by_source: dict[Any, list[LoraUse]]) -> Callable[..., Any]:
    """A loader that passes each component's LoRAs to the engine (``load(source, loras=...)``)."""
    if not any(by_source.values()):
        return load

    def loaded(source: Any, **kwargs: Any) -> Any:
        uses = by_source.get(source)
        return load(source, loras=uses, **kwargs) if uses else load(source, **kwargs)

    return loaded


def describe(requests: Sequence[LoraRequest], folders: Sequence[str], model_source: str,
             prompts: Sequence[str] = ()) -> list[tuple[str, str]]:
    """(level, line) for ``frame config check``: each LoRA found or not, what it changes in a local
    model (modules applied, keys matching nothing) and the ``<lora:…>`` tags of ``prompts`` (themes)."""
    lines = [("error", problem) for problem in check_prompts(prompts, folders)]
    root = Path(model_source).expanduser()
    for request in requests:
        try:
            lora = read_lora(find(request, folders))
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
