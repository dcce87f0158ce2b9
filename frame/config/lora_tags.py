"""A1111's ``<lora:NAME:SCALE>`` prompt tags and the folders their names are looked up in, without numpy:
the daemon checks a queued prompt's tags when it is queued (``frame.daemon.http.queue_api``), the
render worker reads them at night (``frame.diffusion.loras``).

A tag anywhere in a prompt (queue, feed, theme) names a file ``NAME.safetensors`` in a ``loras``
folder beside the model (``<model folder>/loras``, then the folder holding the model) or in the state
folder (``<state>/loras``); the scale defaults to 1 as in A1111, and A1111's three-part form
``<lora:NAME:TE:UNET>`` gives the text encoders and the UNet their own scales.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from frame.config.lora_header import looks_like_lora
from frame.errors import UsageError
from frame.models import resolve_model_source

if TYPE_CHECKING:
    from frame.config.schema import Config

TAG = re.compile(r"<lora:([^:>]+)((?::[^:>]*){0,2})>", re.IGNORECASE)
SUFFIX = ".safetensors"



@dataclass(frozen=True)
class LoraRequest:
    """One LoRA for a render: a name (looked up in the folders) or a file, and its scales."""

    name: str
    scale: float = 1.0
    text_scale: float | None = None  # None: ``scale``
    file: str | None = None  # an explicit path (model.loras); None: ``name`` is looked up

    @property
    def tag(self) -> str:
        """The A1111 form, for the picture's parameters."""
        scales = f"{self.scale:g}" if self.text_scale is None else f"{self.text_scale:g}:{self.scale:g}"
        return f"<lora:{self.name}:{scales}>"


def _number(text: str, tag: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{tag}: the scale {text!r} is not a number (write e.g. <lora:ink:0.8>)") from None
    if not -10.0 <= value <= 10.0:
        raise UsageError(f"{tag}: the scale {value:g} is outside -10..10")
    return value


def split_tags(prompt: str) -> tuple[str, list[LoraRequest]]:
    """The prompt without its ``<lora:…>`` tags (spaces tidied), and the requests they make."""
    requests = []
    for match in TAG.finditer(prompt or ""):
        name, rest = match.group(1).strip(), [p.strip() for p in match.group(2).split(":")[1:]]
        if not name:
            raise UsageError(f"{match.group(0)}: the LoRA has no name")
        numbers = [_number(p, match.group(0)) for p in rest if p]
        if len(numbers) == 2:
            requests.append(LoraRequest(name, numbers[1], numbers[0]))
        else:
            requests.append(LoraRequest(name, numbers[0] if numbers else 1.0))
    if not requests:
        return prompt, []
    clean = re.sub(r"\s{2,}", " ", TAG.sub("", prompt)).strip()
    return re.sub(r"\s+([,.;])", r"\1", clean), requests


def strip_tags(prompt: str | None) -> str | None:
    return prompt if prompt is None else split_tags(prompt)[0]


def lora_folders(model_source: str | os.PathLike | None, state_dir: str | os.PathLike | None) -> list[str]:
    """Where tag names are looked up, in order (URLs have no folder beside them)."""
    folders = []
    text = "" if model_source is None else str(model_source)
    if text and not text.startswith(("http://", "https://")):
        model = os.path.abspath(text)
        model_dir = model if os.path.isdir(model) else os.path.dirname(model)
        folders += [os.path.join(model_dir, "loras"), os.path.join(os.path.dirname(model_dir), "loras")]
    if state_dir is not None:
        folders.append(os.path.join(os.fspath(state_dir), "loras"))
    return list(dict.fromkeys(folders))


def available(folders: Iterable[str]) -> list[tuple[str, str]]:
    """(name, path) of every LoRA file in the folders, first folder winning a name (the phone page's
    list): only files whose header names LoRA factors (``lora_header``), so garbage is not offered."""
    found: dict[str, str | None] = {}  # None: the name's file (the one a tag finds) is not a LoRA
    for folder in folders:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for entry in names:
            path = os.path.join(folder, entry)
            if entry.lower().endswith(SUFFIX) and entry[:-len(SUFFIX)] not in found and os.path.isfile(path):
                found[entry[:-len(SUFFIX)]] = path if looks_like_lora(path) else None
    return sorted(((name, path) for name, path in found.items() if path is not None), key=lambda item: item[0].lower())


def find(request: LoraRequest, folders: Sequence[str]) -> str:
    """The file of a request; UsageError naming the folders looked in when there is none."""
    if request.file is not None:
        if not os.path.isfile(request.file):
            raise UsageError(f"LoRA file {request.file} does not exist")
        return request.file
    if "/" in request.name or "\\" in request.name or request.name.startswith("."):
        raise UsageError(f"<lora:{request.name}>: a LoRA name cannot contain a path")
    for folder in folders:
        path = os.path.join(folder, request.name + SUFFIX)
        if os.path.isfile(path):
            return path
    names = [name for name, _ in available(folders)]
    raise UsageError(f"unknown LoRA {request.name!r}: no {request.name}{SUFFIX} in "
                     f"{', '.join(folders) or 'any folder'}" + (f" (found: {', '.join(names)})" if names else ""))


def check_prompts(prompts: Iterable[str | None], folders: Sequence[str]) -> list[str]:
    """Problems of the ``<lora:…>`` tags in these prompts (bad scale, unknown name): checked when a
    prompt is queued or a theme saved, not at night."""
    problems = []
    for prompt in prompts:
        try:
            for request in split_tags(prompt or "")[1]:
                find(request, folders)
        except UsageError as exc:
            problems.append(str(exc))
    return list(dict.fromkeys(problems))


def configured_folders(config: Config) -> list[str]:
    """The lookup folders of a configuration: beside ``model.source`` and in ``state_dir``."""
    return lora_folders(resolve_model_source(config.model.source), os.path.expanduser(config.state_dir))


def configured_requests(config: Config) -> list[LoraRequest]:
    """``model.loras`` as requests: an entry's ``file`` is a path (with a ``/`` or ``.safetensors``,
    ``~`` allowed) or a name looked up in the folders like a tag's."""
    requests = []
    for entry in config.model.loras:
        text = entry.file.strip()
        if os.sep in text or "/" in text or text.lower().endswith(SUFFIX):
            path = os.path.expanduser(text)
            name = os.path.basename(path)
            name = name[:-len(SUFFIX)] if name.lower().endswith(SUFFIX) else name
            requests.append(LoraRequest(name, float(entry.scale), file=path))
        else:
            requests.append(LoraRequest(text, float(entry.scale)))
    return requests


def drop_unknown(prompt: str, folders: Sequence[str]) -> tuple[str, list[str]]:
    """``prompt`` without the tags whose LoRA is not found, and their names: at night a feed's tag, or a
    queued prompt's LoRA deleted since, must not cost the picture (checked tags were refused earlier)."""
    dropped: list[str] = []

    def keep(match: re.Match) -> str:
        try:
            find(LoraRequest(match.group(1).strip()), folders)
            _ = [_number(p.strip(), match.group(0)) for p in match.group(2).split(":")[1:] if p.strip()]
        except UsageError:
            dropped.append(match.group(1).strip())
            return ""
        return match.group(0)

    cleaned = TAG.sub(keep, prompt or "")
    return (re.sub(r"\s{2,}", " ", cleaned).strip() if dropped else prompt), dropped
