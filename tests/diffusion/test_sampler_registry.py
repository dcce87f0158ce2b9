"""The sampler registry is the one table of samplers: the schema, CLI, docs, config.yaml and PNG metadata agree.

The schema's ``SamplerName`` Literal stays the owner-facing list (the daemon checks ``model.sampler``
without numpy); every other place either reads the registry or is compared with it here.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest

from frame.cli.program import build_parser
from frame.config.schema import ModelConfig, RemoteRenderConfig, SamplerName
from frame.diffusion.pngmeta import GenerationParameters
from frame.diffusion.samplers import DEFAULT_SAMPLER, SAMPLERS, make_sampler, resolve_sampler_name, sampler_names
from frame.diffusion.samplers.registry import ALIASES, a1111_name, frame_name, register_sampler
from frame.remote.a1111 import a1111_sampler, frame_sampler

ROOT = Path(__file__).resolve().parents[2]


def test_registry_equals_the_schema_in_its_order() -> None:
    assert sampler_names() == get_args(SamplerName)
    assert set(SAMPLERS) == set(get_args(SamplerName))
    assert ModelConfig().sampler == DEFAULT_SAMPLER


def test_a_name_the_schema_does_not_list_is_refused_at_registration() -> None:
    with pytest.raises(ValueError, match="not in frame.config.schema.SamplerName"):
        register_sampler("heun", a1111="Heun", class_defaults={})
    with pytest.raises(ValueError, match="registered twice: euler"):
        register_sampler("euler", a1111="Euler", class_defaults={})
    with pytest.raises(ValueError, match="registered twice: lcm, k_euler_a"):
        register_sampler("lcm", a1111="LCM", class_defaults={}, aliases=("k_euler_a",))
    assert sampler_names() == get_args(SamplerName)


@pytest.mark.parametrize("name", get_args(SamplerName))
def test_every_entry_builds_a_sampler_of_its_name(name: str) -> None:
    sampler = make_sampler(name, {}, 4)
    assert isinstance(sampler, SAMPLERS[name].cls)
    assert sampler.name == name


def test_every_alias_resolves_to_its_sampler() -> None:
    assert ALIASES  # the table is filled
    for alias, name in ALIASES.items():
        assert resolve_sampler_name(alias) == name
        assert make_sampler(alias, {}, 2).name == name


def test_png_metadata_and_the_a1111_client_use_the_registry_names() -> None:
    for name, entry in SAMPLERS.items():
        text = GenerationParameters("p", "", 4, name, 7.0, 1, 64, 64, "m").to_text()
        assert f"Sampler: {entry.a1111}," in text
        assert a1111_sampler(name) == a1111_name(name) == entry.a1111
        assert frame_sampler(entry.a1111) == frame_name(entry.a1111) == name
    assert len({e.a1111 for e in SAMPLERS.values()}) == len(SAMPLERS)


def _listed(line: str) -> tuple[str, ...]:
    names = line.split(":", 1)[1].split("(")[0].replace(" or ", ", ").strip(" .\n")
    return tuple(n.strip() for n in names.split(","))


def test_config_yaml_comments_list_the_registry() -> None:
    lines = [ln for ln in (ROOT / "config.yaml").read_text().splitlines() if ln.strip().startswith("# Sampler:")]
    assert len(lines) == 2  # model.sampler and render.remote.sampler
    for line in lines:
        assert _listed(line) == sampler_names()
    assert RemoteRenderConfig().sampler in SAMPLERS


def test_cli_help_lists_the_registry() -> None:
    render = build_parser()._subparsers._group_actions[0].choices["render"]
    (action,) = [a for a in render._actions if "--sampler" in a.option_strings]
    assert _listed("x: " + action.help) == sampler_names()


def test_the_fixture_makers_scheduler_table_lists_the_registry() -> None:
    """tools/pipeline_cases.py (dev-only: it imports torch, so it is read, not imported) maps each
    sampler to the diffusers scheduler the reference fixtures are made with."""
    tree = ast.parse((ROOT / "tools/pipeline_cases.py").read_text(encoding="utf-8"))
    (table,) = [node.value for node in tree.body if isinstance(node, ast.AnnAssign)
                and getattr(node.target, "id", None) == "SAMPLERS"]
    assert sorted(ast.literal_eval(table)) == sorted(SAMPLERS)


def test_a_fresh_import_of_the_png_metadata_fills_the_whole_table() -> None:
    code = ("from frame.diffusion import pngmeta; from frame.diffusion.samplers.registry import SAMPLERS; "
            "print(','.join(SAMPLERS))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert set(out.strip().split(",")) == set(get_args(SamplerName))
