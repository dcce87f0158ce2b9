"""The owner's phone page: a Flask blueprint served by the daemon next to its JSON API.

``create_blueprint(config, store)`` is the one entry point; the daemon's app factory registers what it
returns. Flask is imported only inside it, so ``import frame.web`` stays cheap. See ``docs/web.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flask import Blueprint

    from frame.config import Config


def create_blueprint(config: Config, store: Any, status: Callable[[], dict] | None = None,
                     config_path: str | Path | None = None) -> Blueprint:
    """The ``web`` blueprint for ``config`` and the daemon's ``store`` (``frame.daemon.store.database.Store``).

    ``status``: optional callable returning the daemon's live status (``LiveStatus.snapshot``) for the
    render progress; ``config_path``: the file the daemon loaded, re-validated on the settings page.
    """
    from frame.web.blueprint import build_blueprint

    return build_blueprint(config, store, status=status, config_path=config_path)


__all__ = ["create_blueprint"]
