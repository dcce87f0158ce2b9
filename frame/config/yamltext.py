"""Reading YAML text for the configuration layers: a SafeLoader without YAML 1.1's base-60 numbers, the
line of every key (so problems can say where), and syntax errors as ``ConfigError`` with their line."""

from __future__ import annotations

import re
from typing import Any

import yaml

from frame.config.validate import Path
from frame.errors import ConfigError


class ConfigLoader(yaml.SafeLoader):
    """SafeLoader without YAML 1.1's base-60 numbers, so ``render_at: 01:30`` stays the string "01:30"."""


ConfigLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in (
        "tag:yaml.org,2002:int", "tag:yaml.org,2002:float")]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
ConfigLoader.add_implicit_resolver(
    "tag:yaml.org,2002:int", re.compile(r"^[-+]?(0|[1-9][0-9_]*|0x[0-9a-fA-F_]+|0o[0-7_]+)$"),
    list("-+0123456789"))
ConfigLoader.add_implicit_resolver(
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
        node = yaml.compose(text, Loader=ConfigLoader)
        data = yaml.load(text, Loader=ConfigLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError([f"not valid YAML: {problem}{where}"], source) from None
    return data, (_line_map(node) if node is not None else {})
