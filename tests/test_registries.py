"""The four registries (samplers, dithers, panel drivers, weights providers) are one
``frame.registry.Registry`` each, and each holds exactly the names its list holds (the schema's
``Literal`` for the owner's names, ``DriverName`` beside the panel table for driver ids; the engine's
``ProviderName``, which must equal the schema's ``WeightsName``): a name the
list lacks fails at import, a name the list has and nothing registers fails here (issue 30, item 4).
Panel and palette names are the panel table's rows, which the schema checks ``display.panel`` and
``display.palette`` against."""

from __future__ import annotations

from typing import Literal

import pytest

from frame.config.panels import PANELS, DriverName
from frame.config.schema import DitherName, SamplerName, WeightsName
from frame.diffusion.samplers.registry import SAMPLERS
from frame.display.dither import DITHERS
from frame.display.drivers import DRIVERS
from frame.engine.providers.registry import PROVIDERS
from frame.errors import UsageError
from frame.registry import Registry

REGISTRIES = {"sampler": (SAMPLERS, SamplerName), "dither": (DITHERS, DitherName), "weights": (PROVIDERS, WeightsName),
              "driver": (DRIVERS, DriverName)}


@pytest.mark.parametrize("kind", REGISTRIES)
def test_each_registry_holds_exactly_the_names_its_schema_list_holds(kind: str) -> None:
    registry, schema_list = REGISTRIES[kind]
    assert isinstance(registry, Registry)
    assert registry.listed == tuple(schema_list.__args__)
    assert registry.unimplemented() == set(), f"the schema lists {kind} names nothing registers"
    assert set(registry) - set(registry.hidden) <= set(registry.listed), f"{kind} names the schema lacks"
    assert set(registry) | registry.stand_ins == set(registry.listed) | set(registry.hidden)


def test_only_the_url_provider_is_hidden_and_auto_names_are_stand_ins() -> None:
    assert PROVIDERS.hidden == ["http"]
    assert DITHERS.stand_ins == PROVIDERS.stand_ins == {"auto"}
    assert {panel.driver for panel in PANELS.values()} == set(DRIVERS)  # and every driver drives a row


def test_a_registry_refuses_an_unlisted_name_a_listed_hidden_one_and_a_name_taken_twice() -> None:
    table: Registry[int] = Registry("thing", Literal["auto", "a", "b"], "tests.Names", stand_ins=("auto",))
    table.add("a", 1, aliases=("alpha",))
    with pytest.raises(ValueError, match=r"thing 'c' is not in tests.Names: add it there first"):
        table.add("c", 3)
    with pytest.raises(ValueError, match="'auto' is not in tests.Names"):
        table.register("auto")
    with pytest.raises(ValueError, match="registered twice: a, alpha"):
        table.add("a", 2, aliases=("alpha",))
    with pytest.raises(ValueError, match="'b' is in tests.Names: register it as listed"):
        table.add("b", 2, listed=False)
    assert table.unimplemented() == {"b"}  # what the parametrised test above would fail on
    table.add("x", 9, listed=False)
    table.register("b")(2)
    assert table.names() == ("a", "b", "x") and table.unimplemented() == set()
    assert table.lookup("b") == 2 and table.aliases == {"alpha": "a"}
    with pytest.raises(UsageError, match=r"unknown thing 'bb' \(did you mean 'b'\?\); choose one of: a, b, x"):
        table.lookup("bb")


def test_panel_and_palette_names_are_checked_against_the_panel_table_by_the_schema(tmp_path) -> None:
    from frame.config.loader import load_config
    from frame.errors import ConfigError

    path = tmp_path / "config.yaml"
    path.write_text("display:\n  panel: waveshare-7in3g\n  palette: bww\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert info.value.problems == [
        "display.panel: unknown panel 'waveshare-7in3g'; did you mean 'waveshare-7in3f'? (line 2)",
        "display.palette: unknown palette 'bww'; did you mean 'bw'? (line 3)"]
