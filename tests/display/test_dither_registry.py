"""The dither registry is the one table of dithering methods: schema, CLI, docs table and config.yaml agree."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import numpy as np
import pytest

from frame.cli.program import build_parser
from frame.config.panels import get_palette
from frame.config.schema import DisplayConfig, DitherName
from frame.display.dither import DEFAULT_DITHER, DITHERS, dither_indices, dither_names, register_dither, resolve_dither
from frame.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]


def test_registry_plus_auto_equals_the_schema_in_its_order() -> None:
    assert dither_names() == get_args(DitherName)
    assert set(DITHERS) | {"auto"} == set(get_args(DitherName))
    assert DisplayConfig().dither == "auto" and resolve_dither("auto") == DEFAULT_DITHER in DITHERS


def test_a_name_the_schema_does_not_list_is_refused_at_registration() -> None:
    with pytest.raises(ValueError, match="not in frame.config.schema.DitherName"):
        register_dither("stucki")
    with pytest.raises(ValueError, match="not in frame.config.schema.DitherName"):
        register_dither("auto")
    with pytest.raises(ValueError, match="registered twice"):
        register_dither("atkinson")


def test_an_unknown_name_gets_a_suggestion_and_the_list() -> None:
    with pytest.raises(UsageError, match=r"unknown dither 'atkinsn' \(did you mean 'atkinson'\?\); choose one "
                                         r"of: auto, linear-serpentine, floyd-steinberg"):
        resolve_dither("atkinsn")


@pytest.mark.parametrize("name", get_args(DitherName))
def test_every_name_dithers_to_ink_indices(name: str) -> None:
    inks = np.array(get_palette("bw").colours)
    picture = np.linspace(0, 1, 8 * 8 * 3, dtype=np.float32).reshape(8, 8, 3)
    indices = dither_indices(picture, inks, name)
    assert indices.shape == (8, 8) and indices.dtype == np.uint8 and set(np.unique(indices)) <= {0, 1}


def test_cli_choices_are_the_schema_names() -> None:
    show = build_parser()._subparsers._group_actions[0].choices["show"]
    (action,) = [a for a in show._actions if "--dither" in a.option_strings]
    assert tuple(action.choices) == dither_names()


def test_docs_table_and_config_yaml_list_the_registry() -> None:
    docs = (ROOT / "docs/display.md").read_text().split("### Dithering choices", 1)[1].split("\n\n", 2)[1]
    rows = [re.findall(r"`([^`]+)`", line.split("|")[1]) for line in docs.splitlines()[2:]]
    assert [name for row in rows for name in row] == list(dither_names())
    (comment,) = [ln for ln in (ROOT / "config.yaml").read_text().splitlines() if "# Dithering:" in ln]
    listed = [n.split("(")[0].strip(" .") for n in comment.split(":", 1)[1].split(",")]
    assert tuple(listed) == dither_names()
