"""One registry class for the four extension points whose names are listed apart from their code:
samplers, dithers, panel drivers and weights providers.

The owner-facing name lists stay ``Literal`` types in ``frame.config.schema`` (the daemon validates
``config.yaml`` from them without numpy; driver ids are ``DriverName`` beside the panel table in
``frame.config.panels``; the engine, which never imports the configuration, keeps its own equal
``ProviderName``), and the code that implements each name lives in a part above
(``frame.diffusion``, ``frame.display``, ``frame.engine``), registered there at import. A ``Registry`` ties
the two: it refuses, when the implementing module is imported, a name its list does not hold, and it
refuses a name or alias taken twice. A name the schema accepts and nothing implements shows in
``unimplemented``; ``tests/test_registries.py`` checks both directions for all four.

Some listed names are never registered because they are decided when used ("auto": the default
method or provider); they are ``stand_ins``. Some registered names are not
for owners (the HTTP weights provider is what "prefetch" becomes over a URL); they are registered
with ``listed=False`` and kept apart in ``hidden``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar, get_args

from frame.errors import unknown_choice

T = TypeVar("T")


class Registry(Mapping[str, T], Generic[T]):
    """name → entry (a class, a function or a table row) for one extension point, in the order of its
    schema list. Reads like the dictionary it replaces (``SAMPLERS[name]``, ``name in DITHERS``)."""

    def __init__(self, kind: str, listed: Any, where: str, *, stand_ins: Iterable[str] = ()) -> None:
        """``kind`` names an entry in messages ("sampler"); ``listed`` is the schema's ``Literal``;
        ``where`` is its dotted name, for the message that says where to add a name."""
        self.kind, self.where = kind, where
        self.listed: tuple[str, ...] = tuple(str(n) for n in get_args(listed))
        self.stand_ins = frozenset(stand_ins)
        self.hidden: list[str] = []
        self.aliases: dict[str, str] = {}
        self._entries: dict[str, T] = {}

    def claim(self, name: str, aliases: Iterable[str] = (), *, listed: bool = True) -> None:
        """Refuse ``name`` unless the list holds it (or ``listed=False`` says it is not for owners) and
        neither it nor an alias is taken. Called when the decorator is *made*, so a bad name fails at
        the registering line."""
        if listed and (name not in self.listed or name in self.stand_ins):
            raise ValueError(f"{self.kind} {name!r} is not in {self.where}: add it there first")
        if not listed and name in self.listed:
            raise ValueError(f"{self.kind} {name!r} is in {self.where}: register it as listed")
        taken = [n for n in (name, *aliases) if n in self._entries or n in self.aliases]
        if taken:
            raise ValueError(f"{self.kind} name(s) registered twice: {', '.join(taken)}")

    def add(self, name: str, entry: T, aliases: Iterable[str] = (), *, listed: bool = True) -> T:
        """Register ``entry`` as ``name`` (and its ``aliases``, other spellings of the same name)."""
        aliases = tuple(aliases)
        self.claim(name, aliases, listed=listed)
        self._entries[name] = entry
        self.aliases.update(dict.fromkeys(aliases, name))
        if not listed:
            self.hidden.append(name)
        return entry

    def register(self, name: str, *, listed: bool = True) -> Callable[[T], T]:
        """Decorator: the decorated class or function is the entry for ``name``."""
        self.claim(name, listed=listed)

        def decorate(entry: T) -> T:
            return self.add(name, entry, listed=listed)

        return decorate

    def names(self) -> tuple[str, ...]:
        """Every registered name: the listed ones in the schema's order, then the hidden ones."""
        return (*(n for n in self.listed if n in self._entries), *self.hidden)

    def lookup(self, name: str, cutoff: float = 0.6) -> T:
        """The entry for ``name``; an unknown name raises ``UsageError`` with a suggestion."""
        try:
            return self._entries[name]
        except KeyError:
            raise unknown_choice(self.kind, name, self.names(), cutoff=cutoff) from None

    def unimplemented(self) -> set[str]:
        """Listed names that nothing registered (stand-ins aside): each is a name the schema accepts
        and the code cannot serve."""
        return set(self.listed) - set(self._entries) - self.stand_ins

    def __getitem__(self, name: str) -> T:
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)
