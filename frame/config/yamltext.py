"""YAML text for the configuration layers. Reading: a SafeLoader without YAML 1.1's base-60 numbers, the
line of every key (so problems can say where), and syntax errors as ``ConfigError`` with their line.
Writing (``dump_yaml``): every string another YAML reader could take for something else is quoted.

Why quote more than PyYAML does: ``yaml.safe_dump`` quotes only what PyYAML itself would misread, so
``render_at: 02:00``, ``y``, ``1e3`` and ``0o17`` come out bare. A YAML 1.1 reader takes ``y`` and
``n`` for booleans, a YAML 1.2 one ``1e3`` for a float and ``0o17`` for 15, and an owner who edits
``02:00`` to ``12:30`` by hand gets the base-60 number 750 in every YAML 1.1 reader. So a string that
starts like a number (a digit, or a sign or dot before one) or is a YAML 1.1 boolean or null word in
any spelling is written in single quotes; the others stay plain, as the owner would write them.
"""

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


# YAML 1.1's booleans (y|yes|true|on and their negatives) and nulls, any capitalisation; .inf/.nan
_WORDS = re.compile(r"^(y|n|yes|no|true|false|on|off|null|~|[-+]?\.inf|\.nan)$", re.IGNORECASE)
_NUMBER_LIKE = re.compile(r"^[-+]?\.?[0-9]")


class QuotingDumper(yaml.SafeDumper):
    """SafeDumper that single-quotes every string a YAML 1.1 or 1.2 reader could read as another type."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if _WORDS.match(value) or _NUMBER_LIKE.match(value):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="'")
    return dumper.represent_str(value)


QuotingDumper.add_representer(str, _represent_str)


def dump_yaml(data: Any, stream: Any = None) -> Any:
    """``yaml.safe_dump`` in file order with unicode kept, quoting as the module docstring says;
    returns the text when ``stream`` is None."""
    return yaml.dump(data, stream, Dumper=QuotingDumper, sort_keys=False, allow_unicode=True)


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
