"""A queued prompt's LoRAs judged before it is stored, in the check child.

Why here and not in the daemon: judging a LoRA means reading every value of it (NaN or infinity
paints an all-black picture) and the model's graphs (a LoRA for another model changes no layer),
which takes numpy and the engine; the daemon stays without both and asks the check child
(``frame.daemon.jobs.config_checks.lora_findings``). A file that cannot be used is a problem (the
prompt is refused, naming the file); a LoRA that matches no layer of the configured model is a
warning (the prompt is queued, and the owner told). The engine is imported by this job alone: the
check child's settings jobs read no graph and stay at 35 MiB (tests/worker/test_check_child_memory.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from frame.config import lora_tags
from frame.config.schema import Config
from frame.errors import FrameError, UsageError
from frame.models import resolve_model_source

if TYPE_CHECKING:
    from frame.engine.lora import LoraFile


def _matched(lora: LoraFile, root: Path) -> int | None:
    """Layers the LoRA changes in the local diffusers model at ``root`` (None: no graph to ask)."""
    from frame.engine.lora import LoraUse, match_loras
    from frame.engine.model import read_structure  # onnx: only this job reads graphs (tests/test_layers.py)

    total, asked = 0, False
    for component, modules in lora.components.items():
        path = root / component / "model.onnx"
        if not path.is_file():
            continue
        structure = read_structure(str(path))
        total += match_loras(structure.nodes, structure.weights, [LoraUse(lora.name, modules, 1.0)])[1] \
            .applied.get(lora.name, 0)
        asked = True
    return total if asked else None


def lora_findings(config: Config, texts: Iterable[str | None]) -> tuple[list[str], list[str]]:
    """(problems, warnings) of the ``<lora:…>`` tags in ``texts`` under ``config``: unknown names, bad
    scales and files that cannot be used are problems; "matched 0 layers" is a warning."""
    from frame.engine.lora import read_checked  # the check child's other jobs import no engine

    folders = lora_tags.configured_folders(config)
    problems = lora_tags.check_prompts(texts, folders)
    if problems:
        return problems, []
    source = resolve_model_source(config.model.source)
    root = None if "://" in source else Path(source).expanduser()
    warnings: list[str] = []
    seen: set[str] = set()
    for text in texts:
        for request in lora_tags.split_tags(text or "")[1]:
            if request.name in seen:
                continue
            seen.add(request.name)
            try:
                lora = read_checked(lora_tags.find(request, folders))
            except UsageError as exc:
                problems.append(str(exc))
                continue
            try:
                matched = _matched(lora, root) if root is not None and root.is_dir() else None
            except FrameError:
                matched = None  # the model's own problems are the settings page's to report
            if matched == 0:
                warnings.append(f"LoRA {request.name} matched 0 layers of this model (a LoRA for another "
                                "model?): the picture will look as without it")
    return problems, warnings
