"""The owner layer: ``<state_dir>/settings.yaml``, what the owner changed on the phone's settings page.

It sits above the configuration file and below the ``FRAME_*`` environment overrides (``loader.py``).
It holds only the values that differ from the layers below it, so a later edit of
``/etc/frame/config.yaml`` still reaches every key the owner never touched.

``state_dir`` itself is never read from this file: the file lives in the state folder, so the folder
must be known before the file can be found (it comes from the configuration file or
``FRAME_STATE_DIR``).

Writes are atomic (``frame.atomicfile``) and private (0600: the file may hold ``model.token`` or a
model URL with credentials). Each save first copies the current file to ``settings.previous.yaml``,
so "restore previous" is one rename away; restoring swaps the two files, so a second restore undoes
the first. A file that cannot be used is never deleted: ``set_aside`` renames it to
``settings.yaml.unusable-<time>`` and the daemon runs on the layers below.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from frame.atomicfile import replace_durably, write_private_atomic
from frame.config.yamltext import dump_yaml, read_yaml
from frame.errors import ConfigError

SETTINGS_FILE = "settings.yaml"
PREVIOUS_FILE = "settings.previous.yaml"
ASIDE_PREFIX = "settings.yaml.unusable-"
HEADER = ("# frame: the settings changed on the phone's settings page (the owner layer).\n"
          "# Only values that differ from {below} are kept here;\n"
          "# FRAME_* environment variables still win over them. Written by the daemon: edit with care.\n")


def header(below: str | None = None) -> str:
    """The file's opening comment, naming the layer below it: the configuration file the daemon was
    started with (``--config``, ``$FRAME_CONFIG`` or /etc/frame/config.yaml), or the built-in defaults."""
    if below is None or below == "built-in defaults":
        return HEADER.format(below="the built-in defaults")
    return HEADER.format(below=f"{below} (or the built-in defaults)")


def settings_path(state_dir: str | Path) -> Path:
    return Path(state_dir).expanduser() / SETTINGS_FILE


def previous_path(state_dir: str | Path) -> Path:
    return Path(state_dir).expanduser() / PREVIOUS_FILE


@dataclass
class OwnerLayer:
    """What ``settings.yaml`` holds: ``data`` (a mapping, ``{}`` when absent), the line of every key,
    and ``unusable``: why the file could not be read at all (then ``data`` is ``{}``)."""

    path: Path
    data: dict = field(default_factory=dict)
    lines: dict = field(default_factory=dict)
    exists: bool = False
    unusable: str | None = None


def read_owner_layer(state_dir: str | Path) -> OwnerLayer:
    """Read ``settings.yaml``; a missing file is an empty layer, a broken one says why in ``unusable``."""
    return _read_layer(settings_path(state_dir))


def read_previous_layer(state_dir: str | Path) -> OwnerLayer:
    """Read ``settings.previous.yaml`` (what "restore" would bring back) as ``read_owner_layer`` reads."""
    return _read_layer(previous_path(state_dir))


def _read_layer(path: Path) -> OwnerLayer:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return OwnerLayer(path)
    except (OSError, UnicodeDecodeError) as exc:
        return OwnerLayer(path, exists=True, unusable=f"cannot read {path}: {exc}")
    try:
        data, lines = read_yaml(text, str(path))
    except ConfigError as exc:
        return OwnerLayer(path, exists=True, unusable="; ".join(exc.problems))
    if data is None:
        data = {}
    if not isinstance(data, dict):
        return OwnerLayer(path, exists=True, unusable=f"must be a mapping of sections, got {type(data).__name__}")
    return OwnerLayer(path, data=data, lines=lines, exists=True)


def dump(data: dict, below: str | None = None) -> bytes:
    """The file's bytes: the header (naming ``below``, the configuration file under it), then ``data``
    with every string that another YAML reader could take for a time, number or boolean quoted
    (``yamltext.dump_yaml``)."""
    return (header(below) + dump_yaml(data)).encode("utf-8") if data else header(below).encode("utf-8")


def save(state_dir: str | Path, data: dict, below: str | None = None) -> None:
    """Replace ``settings.yaml`` with ``data``, keeping the current file as ``settings.previous.yaml``.

    Each of the two writes is atomic: a power cut leaves the old settings, or the old ones twice
    (previous == current), or the new ones with the old as previous, never a half-written file."""
    path, previous = settings_path(state_dir), previous_path(state_dir)
    try:
        current = path.read_bytes()
    except FileNotFoundError:
        current = header(below).encode("utf-8")  # "previous" = no owner settings at all
    write_private_atomic(previous, current)
    write_private_atomic(path, dump(data, below))


def restore_previous(state_dir: str | Path) -> bool:
    """Swap ``settings.yaml`` and ``settings.previous.yaml`` (each write atomic); False when there is
    no previous version."""
    path, previous = settings_path(state_dir), previous_path(state_dir)
    try:
        older = previous.read_bytes()
    except FileNotFoundError:
        return False
    try:
        current = path.read_bytes()
    except FileNotFoundError:
        current = header().encode("utf-8")
    write_private_atomic(path, older)
    write_private_atomic(previous, current)
    return True


def set_aside(state_dir: str | Path) -> Path | None:
    """Rename an unusable ``settings.yaml`` out of the way (kept for the owner to read), durably."""
    path = settings_path(state_dir)
    if not path.exists():
        return None
    target = path.with_name(ASIDE_PREFIX + time.strftime("%Y%m%d-%H%M%S"))
    counter = 1
    while target.exists():
        target = path.with_name(f"{ASIDE_PREFIX}{time.strftime('%Y%m%d-%H%M%S')}-{counter}")
        counter += 1
    replace_durably(path, target)
    return target


def get_path(data: Any, path: tuple) -> tuple[bool, Any]:
    """(present, value) of the key path in nested plain data; a list met on the way holds the whole
    path (a layer replaces lists whole)."""
    node = data
    for part in path:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list):
            return True, node
        else:
            return False, None
    return True, node


def set_path(data: dict, path: tuple, value: Any) -> None:
    node = data
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = copy.deepcopy(value)


def drop_path(data: dict, path: tuple) -> None:
    """Remove a key path and any section it leaves empty."""
    if not path:
        return
    node = data.get(path[0]) if len(path) > 1 else None
    if len(path) == 1:
        data.pop(path[0], None)
    elif isinstance(node, dict):
        drop_path(node, path[1:])
        if not node:
            data.pop(path[0], None)
