"""Text the pages show is shown as what it holds: bidi and other control characters neutralised.

Typed text can never hold them (``frame.config.checks.control_character`` refuses them on every form and
in config.yaml), but file names can: a LoRA, an embedding, a model or a folder named
``woodcut\u202egpj.safetensors`` would read as something else on the page (a right-to-left override turns
the rest of the line around). So every value a template prints passes ``neutralise`` (the Jinja
environment's ``finalize``, set once per app by ``install``), and each such character is shown as its
code point, e.g. ``[U+202E]``: the owner sees that the name holds something odd, and nothing on the page
reads differently from what is stored. Whitespace and the zero-width (non-)joiner stay, as the typed-text
rule keeps them.
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from frame.config.checks import control_character


def neutralise(text: str) -> str:
    """``text`` with every character typed text must not hold replaced by ``[U+XXXX]``."""
    if control_character(text) is None:  # the common case: one pass, no copy
        return text
    return "".join(f"[U+{ord(c):04X}]" if control_character(c) is not None else c for c in text)


def finalize(value: Any) -> Any:
    """Jinja's ``finalize``: each ``{{ ... }}`` value before it is escaped (markup stays markup)."""
    if isinstance(value, Markup):
        return Markup(neutralise(str(value)))
    if isinstance(value, str):
        return neutralise(value)
    if value is None or isinstance(value, (int, float)):
        return value
    return neutralise(str(value))


def install(app: Any) -> None:
    """Set ``finalize`` on ``app``'s Jinja environment (before its first template is compiled)."""
    app.jinja_env.finalize = finalize
