"""The sampler table: each sampler class registers its name, A1111 name, aliases and defaults once.

``@register_sampler("euler_a", a1111="Euler a", class_defaults={...})`` on the class fills ``SAMPLERS``
when its module is imported (``frame.diffusion.samplers`` imports every family). Everything that shows
sampler names reads this table: ``make_sampler``, the PNG metadata (``a1111_name``), the AUTOMATIC1111
client and server (``frame_name``), the CLI help. The one other list is the schema's ``SamplerName``
Literal: the daemon validates ``model.sampler`` from it without importing numpy, so a name must be
added there first — registering a name the schema does not list fails at import, and
``tests/diffusion/test_sampler_registry.py`` checks that the two lists, the docs and config.yaml agree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from frame.config.schema import SamplerName
from frame.diffusion.samplers.base import Sampler
from frame.diffusion.samplers.schedule import SchedulerConfig
from frame.errors import UsageError, unknown_choice
from frame.registry import Registry

S = TypeVar("S", bound=type)

# frame's default (``model.sampler``'s default in the schema is the same name; the test checks it)
DEFAULT_SAMPLER = "euler_a"


@dataclass(frozen=True)
class SamplerEntry:
    """One registered sampler: its class, the options it is built with, and its other names."""

    name: str
    cls: type
    a1111: str                           # the name AUTOMATIC1111 writes and accepts ("DPM++ 2M Karras")
    class_defaults: Mapping[str, Any]    # the mirrored diffusers class's defaults for keys a config leaves out
    aliases: tuple[str, ...] = ()        # other spellings owners type ("k_euler_a", "dpmpp_2m")
    options: Mapping[str, Any] = field(default_factory=dict)  # keyword arguments for ``cls`` (karras=True)


SAMPLERS: Registry[SamplerEntry] = Registry("sampler", SamplerName, "frame.config.schema.SamplerName")
ALIASES = SAMPLERS.aliases


def register_sampler(name: str, *, a1111: str, class_defaults: Mapping[str, Any], aliases: tuple[str, ...] = (),
                     **options: Any) -> Callable[[S], S]:
    """Class decorator: register the class as sampler ``name`` (stackable: one class, several names).

    Refuses a name the schema's ``SamplerName`` does not list, and a name or alias already taken. A
    class registered without options is given ``name`` as its ``name`` attribute.
    """
    SAMPLERS.claim(name, aliases)

    def decorate(cls: S) -> S:
        SAMPLERS.add(name, SamplerEntry(name, cls, a1111, dict(class_defaults), tuple(aliases), dict(options)),
                     aliases)
        if not options:
            cls.name = name
        return cls

    return decorate


def sampler_names() -> tuple[str, ...]:
    """Every sampler name, in the schema's order (the order the CLI and the docs show)."""
    return SAMPLERS.names()


def resolve_sampler_name(name: str | None) -> str:
    """Canonical sampler name; ``None`` gives the default; unknown names raise with a suggestion."""
    if name is None:
        return DEFAULT_SAMPLER
    key = name.strip().lower().replace(" ", "_").replace("-", "_")
    key = ALIASES.get(key, key)
    if key in SAMPLERS:
        return key
    raise unknown_choice("sampler", name, sampler_names(), cutoff=0.5, aliases=ALIASES, lookup=key)


def sampler_entry(name: str | None) -> SamplerEntry:
    return SAMPLERS[resolve_sampler_name(name)]


def a1111_names() -> dict[str, str]:
    """frame name → AUTOMATIC1111 name, for every sampler."""
    return {n: SAMPLERS[n].a1111 for n in sampler_names()}


def a1111_name(name: str) -> str:
    """The AUTOMATIC1111 name of a frame sampler (a name frame does not know is passed through)."""
    entry = SAMPLERS.get(name)
    return entry.a1111 if entry else name


def frame_name(a1111: str) -> str | None:
    """The frame sampler an AUTOMATIC1111 name stands for, or None."""
    return next((n for n, e in SAMPLERS.items() if e.a1111 == a1111), None)


def make_sampler(name: str | None, scheduler_config: dict[str, Any], steps: int) -> Sampler:
    """Build sampler ``name`` for ``steps`` steps from a ``scheduler_config.json`` dictionary."""
    entry = sampler_entry(name)
    config = SchedulerConfig.from_json(scheduler_config, dict(entry.class_defaults))
    config.check()
    if not isinstance(steps, int) or not 1 <= steps <= config.num_train_timesteps:
        raise UsageError(f"steps must be an integer from 1 to {config.num_train_timesteps}, got {steps!r}")
    return entry.cls(config, steps, **entry.options)
