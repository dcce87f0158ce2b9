"""The owner's phone page: a Flask blueprint served by the daemon next to its JSON API.

``create_blueprint(config, store)`` is the one entry point; the daemon's app factory registers what it
returns. Flask loads on first use of ``create_blueprint``, so ``import frame.web`` stays cheap (flask
+24 MiB). See ``docs/web.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from frame.lazy import lazy_exports

if TYPE_CHECKING:
    from frame.web.blueprint import create_blueprint

__all__ = ["create_blueprint"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "create_blueprint": "frame.web.blueprint",
})
