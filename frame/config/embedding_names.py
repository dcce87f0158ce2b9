"""Where textual-inversion embedding files are looked up, and which ones a prompt names, by file name
only (no numpy): the renderer (``frame.diffusion.textual_inversion.Embeddings``) reads the files this
lists, and the phone pages list the same names in the same order without reading a byte of them.

Folders, the first found winning a name: ``embeddings/`` inside the model folder, beside it
(``<model>/../embeddings``, shared by the models there), then in the state folder. Subfolders count.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from frame.models import resolve_model_source

if TYPE_CHECKING:
    from frame.config.schema import Config

FOLDER = "embeddings"
SUFFIXES = (".pt", ".bin", ".safetensors")


def model_folders(source: str | os.PathLike | None) -> list[Path]:
    """The ``embeddings/`` folders of a local model: inside it, then beside it (none for a URL)."""
    text = "" if source is None else os.fspath(source)
    if not text or text.startswith(("http://", "https://")):
        return []
    root = Path(text).expanduser()
    return [root / FOLDER, root.parent / FOLDER]


def state_folder(state_dir: str | os.PathLike) -> Path:
    """``<state folder>/embeddings`` (``~`` expanded: the configured state_dir keeps it)."""
    return Path(state_dir).expanduser() / FOLDER


def available(folders: Iterable[str | os.PathLike]) -> dict[str, Path]:
    """Name (the file's stem) → file of every embedding in ``folders`` and their subfolders, the first
    folder's file winning over a later one of the same name (the order the render looks them up in)."""
    found: dict[str, Path] = {}
    for folder in map(Path, folders):
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*")):
            if path.suffix.lower() in SUFFIXES and path.is_file():
                found.setdefault(path.stem, path)
    return found


def configured_folders(config: Config) -> list[Path]:
    """The folders of a configuration, in the render's order (``PipelineSetup`` builds the same)."""
    return model_folders(resolve_model_source(config.model.source)) + [state_folder(config.state_dir)]


def named_in(prompt: str | None, names: Iterable[str]) -> list[str]:
    """The ``names`` that stand as words in ``prompt`` (any case, inside emphasis brackets too), in the
    prompt's order: what a picture's details show as its embeddings. The render matches the names'
    tokens (CLIP's tokenizer lowercases and splits words at letters/digits), which whole-word matching
    follows; a longer name is taken before a shorter one it contains, as the render does."""
    text = prompt or ""
    hits: list[tuple[int, str]] = []
    taken: list[tuple[int, int]] = []
    for name in sorted(set(names), key=lambda n: (-len(n), n)):
        pattern = re.compile(rf"(?<![^\W_]){re.escape(name)}(?![^\W_])", re.IGNORECASE)
        for match in pattern.finditer(text):
            if not any(start < match.end() and match.start() < end for start, end in taken):
                taken.append(match.span())
                hits.append((match.start(), name))
    return list(dict.fromkeys(name for _, name in sorted(hits)))
