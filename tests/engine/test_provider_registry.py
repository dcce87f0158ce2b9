"""The weights-provider registry: every name an owner or the CLI can give builds a provider from the table.

The engine stays free of the configuration, so the schema's ``WeightsName`` (plus "auto") and the CLI's
``--weights`` choices (which cannot import numpy) are tied to the registry here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest

from frame.cli.engine import WEIGHTS_CHOICES
from frame.config.schema import ModelConfig, WeightsName
from frame.engine.providers import PROVIDERS, HttpPrefetch, NoCache, Prefetch, Ram, make_provider, provider_names
from frame.engine.providers.registry import register_provider
from frame.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]


def test_schema_names_and_cli_choices_are_registered() -> None:
    assert set(get_args(WeightsName)) - {"auto"} <= set(PROVIDERS)
    assert ModelConfig().weights == "auto"
    assert set(WEIGHTS_CHOICES) == set(provider_names())
    assert {PROVIDERS[n] for n in ("nocache", "prefetch", "ram", "http")} == {NoCache, Prefetch, Ram, HttpPrefetch}


def test_config_yaml_comment_lists_the_schema_names() -> None:
    (line,) = [ln for ln in (ROOT / "config.yaml").read_text().splitlines() if "# How weights are fetched:" in ln]
    listed = [n.strip(" .") for n in re.sub(r"\([^)]*\)", "", line.split(":", 1)[1]).split(",")]
    assert listed == list(get_args(WeightsName))


@pytest.mark.parametrize("name", ["nocache", "prefetch", "ram", "http"])
def test_every_name_builds_its_provider_with_the_url_variants(name: str) -> None:
    over_url = make_provider(name, source_is_url=True)
    assert type(over_url) is (HttpPrefetch if name == "prefetch" else PROVIDERS[name])
    if name == "http":
        with pytest.raises(UsageError, match="needs an http"):
            make_provider(name, source_is_url=False)
    else:
        assert type(make_provider(name, source_is_url=False)) is PROVIDERS[name]


def test_a_name_registered_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="registered twice"):
        register_provider("ram")
    with pytest.raises(UsageError, match=r"did you mean 'prefetch'\?\); choose one of: nocache, prefetch"):
        make_provider("prefech", source_is_url=False)
