"""Layered configuration loading: built-in defaults < config file < owner layer < ``FRAME_*`` environment
overrides.

The owner layer is ``<state_dir>/settings.yaml``, written by the phone's settings page (``owner.py``);
its folder comes from the file and the environment, never from itself.

The file is ``--config FILE`` when given, else ``$FRAME_CONFIG``, else ``/etc/frame/config.yaml`` when it
exists (the systemd unit's ConfigurationDirectory). Environment overrides name a key path with ``__``
between levels: ``FRAME_STATE_DIR=/var/lib/frame``, ``FRAME_MODEL__SOURCE=https://...``,
``FRAME_WEB__TOKEN=...``; values are parsed as YAML scalars/flow values (``FRAME_TASTE__THEMES='[a, b]'``).
The few ``FRAME_*`` variables that are not settings (``FRAME_CONFIG``, the daemon's ``FRAME_PARENT_PID``
for its workers, ...) are listed in ``environment.NOT_SETTINGS`` and skipped.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path as FsPath
from typing import Any

import yaml

from frame.config import environment, owner
from frame.config.owner import OwnerLayer
from frame.config.schema import Config
from frame.config.validate import Path, Problems, build, format_path, hide_secrets
from frame.config.yamltext import ConfigLoader, read_yaml
from frame.errors import ConfigError

SYSTEM_CONFIG = FsPath("/etc/frame/config.yaml")
ENV_PREFIX = "FRAME_"
ENV_NOT_OVERRIDES = environment.NOT_SETTINGS

log = logging.getLogger(__name__)


def env_overrides(environ: Mapping[str, str]) -> tuple[dict, dict[Path, str], list[str]]:
    """Nested override data from ``FRAME_*`` variables, where each came from, and parse problems."""
    data: dict = {}
    origins: dict[Path, str] = {}
    problems: list[str] = []
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX) or name in ENV_NOT_OVERRIDES:
            continue
        path = tuple(part.lower() for part in name[len(ENV_PREFIX):].split("__"))
        try:
            value = yaml.load(environ[name], Loader=ConfigLoader) if environ[name] != "" else ""
        except yaml.YAMLError:
            problems.append(f"{'.'.join(path)}: value of {name} is not a valid YAML value")
            continue
        target = data
        for part in path[:-1]:
            target = target.setdefault(part, {})
            if not isinstance(target, dict):
                break
        else:
            target[path[-1]] = value
            origins[path] = f"from environment variable {name}"
    return data, origins, problems


def _merge(base: Any, override: dict) -> dict:
    merged = dict(base) if isinstance(base, dict) else {}
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def config_file_path(path: str | os.PathLike | None, environ: Mapping[str, str]) -> FsPath | None:
    """Which file supplies the file layer, or None for defaults only."""
    if path is not None:
        return FsPath(path)
    if environ.get(environment.CONFIG_FILE):
        return FsPath(environ[environment.CONFIG_FILE])
    return SYSTEM_CONFIG if SYSTEM_CONFIG.is_file() else None


@dataclass
class Layers:
    """The raw layers under one configuration: the file (``source`` names it), the environment and the
    owner layer (``settings.yaml`` in the state folder the file and environment name; None when not
    read)."""

    source: str
    file_data: dict
    file_lines: dict[Path, int]
    env_data: dict
    env_origins: dict[Path, str]
    env_problems: list[str]
    owner: OwnerLayer | None

    def below_owner(self) -> dict:
        """The plain data of the layers the owner layer sits on (file, then environment)."""
        return _merge(self.file_data, self.env_data)

    def origin(self, path: Path) -> str:
        """Where the value at ``path`` comes from: an environment variable, the owner layer, the
        file (with its line) or the built-in default."""
        for n in range(len(path), 0, -1):
            if path[:n] in self.env_origins:
                return self.env_origins[path[:n]]
        if self.owner is not None and owner.get_path(self.owner.data, path)[0]:
            line = self._line(self.owner.lines, path)
            return f"{self.owner.path}{f' line {line}' if line else ''} (set on the settings page)"
        if owner.get_path(self.file_data, path)[0]:
            line = self._line(self.file_lines, path)
            return f"{self.source}{f' line {line}' if line else ''}"
        return "built-in default"

    @staticmethod
    def _line(lines: dict[Path, int], path: Path) -> int | None:
        for n in range(len(path), 0, -1):
            if path[:n] in lines:
                return lines[path[:n]]
        return None


def read_layers(path: str | os.PathLike | None, environ: Mapping[str, str] | None, *,
                with_owner: bool = True, owner_dir: str | os.PathLike | None = None) -> Layers:
    """Read the file, the ``FRAME_*`` overrides and (``with_owner``) ``<state_dir>/settings.yaml``,
    whose folder comes from the file and environment only (or ``owner_dir``: the running daemon's
    state folder); a broken file is a ConfigError."""
    environ = os.environ if environ is None else environ
    file_path = config_file_path(path, environ)
    data: Any = {}
    lines: dict[Path, int] = {}
    source = "built-in defaults"
    if file_path is not None:
        source = str(file_path)
        try:
            text = file_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError([f"no such file: {file_path}"], source) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError([f"cannot read {file_path}: {exc}"], source) from None
        data, lines = read_yaml(text, source)
        data = {} if data is None else data
    overrides, origins, env_problems = env_overrides(environ)
    layers = Layers(source, data, lines, overrides, origins, env_problems, None)
    if with_owner and isinstance(data, dict):
        folder = str(owner_dir) if owner_dir is not None else layers.below_owner().get("state_dir", Config.state_dir)
        if isinstance(folder, str) and folder:
            layers.owner = owner.read_owner_layer(folder)
    return layers


@dataclass
class Resolved:
    """A validated configuration and how it was reached. ``owner_problems`` lists why the owner layer
    could not be used; ``config`` and ``problems`` are then those of the layers below it."""

    config: Config
    problems: Problems
    layers: Layers
    owner_problems: list[str]
    owner_items: list[tuple[Path, str]] = dataclasses.field(default_factory=list)  # the same, by key path
    # the owner layer applied with its refused values at their defaults: what the settings page's model
    # checks judge, so a size the model refuses is named together with a schema problem, not after it
    with_owner: Config | None = None

    @property
    def source(self) -> str:
        return self.layers.source


def _build(layers: Layers, owner_data: dict | None) -> tuple[Config, Problems]:
    owner_lines = layers.owner.lines if layers.owner is not None and owner_data is layers.owner.data else {}
    owner_name = layers.owner.path.name if layers.owner is not None else owner.SETTINGS_FILE

    def locate(p: Path) -> str | None:
        for n in range(len(p), 0, -1):
            if p[:n] in layers.env_origins:
                return layers.env_origins[p[:n]]
        if owner_data is not None and owner.get_path(owner_data, p)[0]:
            return f"{owner_name} line {owner_lines[p]}" if p in owner_lines else f"set in {owner_name}"
        return f"line {layers.file_lines[p]}" if p in layers.file_lines else None

    problems = Problems(locate)
    problems.lines.extend(layers.env_problems)
    data = layers.file_data
    if not isinstance(data, dict):
        problems.add((), f"the file must be a mapping of sections, got {type(data).__name__}")
        data = {}
    if owner_data:
        if "state_dir" in owner_data:
            problems.add(("state_dir",), f"cannot be set in {owner_name}: the file lives in the state folder; "
                                         "set state_dir in the configuration file or FRAME_STATE_DIR")
            owner_data = {k: v for k, v in owner_data.items() if k != "state_dir"}
        data = _merge(data, owner_data)
    return build(Config, _merge(data, layers.env_data), (), problems), problems


def resolve(path: str | os.PathLike | None = None, environ: Mapping[str, str] | None = None, *,
            with_owner: bool = True, owner_data: dict | None = None,
            owner_dir: str | os.PathLike | None = None) -> Resolved:
    """Layer and validate: defaults < file < owner layer < environment. ``owner_data`` stands in for
    ``settings.yaml`` (the settings page checks what it is about to save)."""
    layers = read_layers(path, environ, with_owner=with_owner or owner_data is not None, owner_dir=owner_dir)
    base, base_problems = _build(layers, None)
    if owner_data is None:
        if layers.owner is None or not (layers.owner.data or layers.owner.unusable):
            return Resolved(base, base_problems, layers, [])
        if layers.owner.unusable:
            return Resolved(base, base_problems, layers, [f"{layers.owner.path}: {layers.owner.unusable}"])
        owner_data = layers.owner.data
    config, problems = _build(layers, owner_data)
    known = {format_path(p) for p, _ in base_problems.items}
    pairs = zip(problems.items, problems.lines[len(layers.env_problems):], strict=True)
    own = [(item, line) for item, line in pairs if format_path(item[0]) not in known]
    lines, items = [line for _, line in own], [item for item, _ in own]
    if own or base_problems.lines:  # a broken file stays an error even where the owner layer covers it
        return Resolved(base, base_problems, layers, lines, items, with_owner=config)
    return Resolved(config, problems, layers, lines, items, with_owner=config)


def validate(path: str | os.PathLike | None, environ: Mapping[str, str] | None) -> tuple[Config, Problems, str]:
    """Layer and validate; return the configuration (invalid values left at their defaults), the
    problems found (the owner layer's included: ``frame config check`` is strict) and where the file
    layer came from."""
    resolved = resolve(path, environ)
    problems = resolved.problems
    if resolved.owner_problems and not problems.lines:
        problems = Problems(lambda p: None)
        problems.lines.extend(resolved.owner_problems)
    return resolved.config, problems, resolved.source


def load_config(path: str | os.PathLike | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Load, layer and validate the configuration; raise ConfigError listing every problem of the
    file and environment. An owner layer (``settings.yaml``) that cannot be used is skipped with a
    warning: the frame keeps working on the layers below it (``frame run`` also sets the file aside)."""
    resolved = resolve(path, environ)
    if resolved.problems.lines:
        raise ConfigError(resolved.problems.lines, resolved.source)
    if resolved.owner_problems:
        log.warning("the settings made on the phone are not used: %s", "; ".join(resolved.owner_problems))
    return resolved.config


def to_plain(config: Config, reveal_secrets: bool = False) -> dict:
    """The configuration as plain data for printing: secrets replaced by ``'***'`` (or ``''``), URLs
    that may carry credentials with their userinfo and query values hidden (as the schema marks)."""
    plain = dataclasses.asdict(config)
    if not reveal_secrets:
        plain = hide_secrets(type(config), plain)
    return _tuples_to_lists(plain)


def _tuples_to_lists(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _tuples_to_lists(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_tuples_to_lists(v) for v in value]
    return value


__all__ = ["load_config", "validate", "resolve", "read_layers", "Layers", "Resolved", "to_plain", "read_yaml",
           "env_overrides", "format_path", "SYSTEM_CONFIG"]


def state_dir(config: Config) -> FsPath:
    """The configuration's state folder (``state_dir``, ``~`` expanded)."""
    return FsPath(config.state_dir).expanduser()
