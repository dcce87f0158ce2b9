"""Layered configuration loading: built-in defaults < config file < ``FRAME_*`` environment overrides.

The file is ``--config FILE`` when given, else ``$FRAME_CONFIG``, else ``/etc/frame/config.yaml`` when it
exists (the systemd unit's ConfigurationDirectory). Environment overrides name a key path with ``__``
between levels: ``FRAME_STATE_DIR=/var/lib/frame``, ``FRAME_MODEL__SOURCE=https://...``,
``FRAME_WEB__TOKEN=...``; values are parsed as YAML scalars/flow values (``FRAME_TASTE__THEMES='[a, b]'``).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from pathlib import Path as FsPath
from typing import Any

import yaml

from frame.config.schema import Config
from frame.config.validate import Path, Problems, build, format_path, hide_secrets
from frame.errors import ConfigError

SYSTEM_CONFIG = FsPath("/etc/frame/config.yaml")
ENV_PREFIX = "FRAME_"
ENV_NOT_OVERRIDES = {"FRAME_CONFIG"}


class _Loader(yaml.SafeLoader):
    """SafeLoader without YAML 1.1's base-60 numbers, so ``render_at: 01:30`` stays the string "01:30"."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in (
        "tag:yaml.org,2002:int", "tag:yaml.org,2002:float")]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:int", re.compile(r"^[-+]?(0|[1-9][0-9_]*|0x[0-9a-fA-F_]+|0o[0-7_]+)$"),
    list("-+0123456789"))
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?([0-9][0-9_]*)?\.[0-9_]*([eE][-+]?[0-9]+)?$|^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$"
               r"|^[-+]?\.(inf|Inf|INF)$|^\.(nan|NaN|NAN)$"),
    list("-+0123456789."))


def _line_map(node: yaml.Node, path: Path = ()) -> dict[Path, int]:
    """Line number (1-based) of every key and list item in a composed YAML document."""
    lines: dict[Path, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            child = (*path, str(key_node.value))
            lines[child] = key_node.start_mark.line + 1
            lines.update(_line_map(value_node, child))
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            lines[(*path, index)] = item.start_mark.line + 1
            lines.update(_line_map(item, (*path, index)))
    return lines


def read_yaml(text: str, source: str) -> tuple[Any, dict[Path, int]]:
    """Parse YAML text; a syntax error becomes a ConfigError with its line number."""
    try:
        node = yaml.compose(text, Loader=_Loader)
        data = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError([f"not valid YAML: {problem}{where}"], source) from None
    return data, (_line_map(node) if node is not None else {})


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
            value = yaml.load(environ[name], Loader=_Loader) if environ[name] != "" else ""
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
    if environ.get("FRAME_CONFIG"):
        return FsPath(environ["FRAME_CONFIG"])
    return SYSTEM_CONFIG if SYSTEM_CONFIG.is_file() else None


def validate(path: str | os.PathLike | None, environ: Mapping[str, str] | None) -> tuple[Config, Problems, str]:
    """Layer and validate; return the configuration (invalid values left at their defaults), the
    problems found and where the file layer came from."""
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

    def locate(p: Path) -> str | None:
        for n in range(len(p), 0, -1):
            if p[:n] in origins:
                return origins[p[:n]]
        return f"line {lines[p]}" if p in lines else None

    problems = Problems(locate)
    problems.lines.extend(env_problems)
    if not isinstance(data, dict):
        problems.add((), f"the file must be a mapping of sections, got {type(data).__name__}")
        data = {}
    config = build(Config, _merge(data, overrides), (), problems)
    return config, problems, source


def load_config(path: str | os.PathLike | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Load, layer and validate the configuration; raise ConfigError listing every problem."""
    config, problems, source = validate(path, environ)
    if problems.lines:
        raise ConfigError(problems.lines, source)
    return config


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


__all__ = ["load_config", "validate", "to_plain", "read_yaml", "env_overrides", "format_path", "SYSTEM_CONFIG"]


def state_dir(config: Config) -> FsPath:
    """The configuration's state folder (``state_dir``, ``~`` expanded)."""
    return FsPath(config.state_dir).expanduser()
