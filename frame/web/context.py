"""What the phone pages share (``WebContext``): configuration, store, the daemon's live status and the
login bookkeeping. Its own module so the route modules (``views``, ``images``) and the blueprint that
registers them (``blueprint``) need not import each other."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flask import abort, session

from frame.config import Config
from frame.daemon.http.contract import MODEL_IMPORTS
from frame.daemon.http.token import ensure_token
from frame.daemon.jobs.estimate_child import EstimateRunner
from frame.daemon.jobs.model_import import ModelImports
from frame.daemon.jobs.night import RenderContext
from frame.daemon.store.records import StoredPicture
from frame.errors import FrameError
from frame.net.ratelimit import FailureLimiter
from frame.web import auth, pairing
from frame.web.sessions import SESSIONS_FILE, SessionRegistry

log = logging.getLogger(__name__)


@dataclass
class WebContext:
    """What the views share: configuration, store, the daemon's live status and login bookkeeping."""

    config: Config
    store: Any
    state_dir: Path
    status: Callable[[], dict] | None = None
    config_path: Path | None = None
    token: str | None = None
    controller: Any = None
    limiter: auth.LoginLimiter = field(default_factory=auth.LoginLimiter)
    sessions: SessionRegistry | None = None  # created with the app (it needs the final state dir)
    estimates: EstimateRunner | None = None  # the settings page's "Estimate now" child, made when first asked
    pairings: pairing.PairingCodes | None = None  # made with the app (it needs the final state dir)
    # wrong pairing codes from every address together (per address they count into ``limiter``)
    pair_limiter: FailureLimiter = field(default_factory=lambda: FailureLimiter(
        pairing.GLOBAL_FAILURES, pairing.GLOBAL_WINDOW))
    # "show a code on the frame": one panel refresh per PANEL_INTERVAL, whoever asks
    panel_limiter: FailureLimiter = field(default_factory=lambda: FailureLimiter(1, pairing.PANEL_INTERVAL))
    imports: ModelImports | None = None  # the app's model import (``shared[MODEL_IMPORTS]``), else made when asked

    def render_context(self) -> RenderContext:
        """What the preview worker needs: today's configuration (the settings page replaces
        ``config`` when the owner saves), the store and the state dir."""
        return RenderContext(self.config, self.store, self.state_dir)

    def picture_or_404(self, picture_id: int) -> StoredPicture:
        """The stored picture, or the page's 404 (every picture route's first step)."""
        picture = self.store.picture(picture_id)
        if picture is None:
            abort(404)
        return picture

    def adopt(self, shared: dict[str, Any]) -> None:
        """Take the daemon's shared objects (``app.extensions["frame"]``): token, controller, state dir
        and the failed-token limiter the API counts into too."""
        self.token = shared.get("token") or self.token
        self.controller = shared.get("controller") or self.controller
        self.limiter = shared.get("limiter") or self.limiter
        if shared.get("state_dir"):
            self.state_dir = Path(shared["state_dir"])
        if self.status is None and self.controller is not None:
            self.status = self.controller.status
        self.imports = shared.get(MODEL_IMPORTS) or self.imports

    def take_config(self, config: Config) -> None:
        """Use a configuration the owner saved (``frame.daemon.actions.settings`` hands it over)."""
        self.config = config

    def rendering(self) -> bool:
        """A render is running now (the daemon's live status says so)."""
        return self.status is not None and (self.status() or {}).get("state") == "rendering"

    def estimate_runner(self) -> EstimateRunner:
        if self.estimates is None:
            self.estimates = EstimateRunner(self.rendering)
        return self.estimates

    def model_imports(self) -> ModelImports:
        if self.imports is None:
            self.imports = ModelImports(self.state_dir, self.rendering)
        return self.imports

    def owner_token(self) -> str:
        if self.token:
            return self.token
        return ensure_token(self.config.web.token, self.state_dir)

    def session_registry(self) -> SessionRegistry:
        if self.sessions is None:
            self.sessions = SessionRegistry(self.state_dir / SESSIONS_FILE)
        return self.sessions

    def pairing_codes(self) -> pairing.PairingCodes:
        if self.pairings is None:
            self.pairings = pairing.PairingCodes(self.state_dir)
        return self.pairings

    def open_owner_session(self) -> None:
        """Log this browser in as the owner (the token or a pairing was right): a fresh session, so a
        session id planted before the login is worthless (no fixation), listed in the registry."""
        registry = self.session_registry()
        registry.revoke(session.get("sid"))  # a login over a live session replaces it
        session.clear()
        session.permanent = True
        session["owner"] = auth.fingerprint(self.owner_token())
        session["sid"] = registry.create()

    def logged_in(self) -> bool:
        """The session was opened by a login that has not been logged out (here or everywhere) and
        was made with the current owner token."""
        return self.owner_session(session)

    def owner_session(self, data: Mapping[str, Any]) -> bool:
        """``logged_in`` for a session's decoded contents; also usable outside a request (the upload's
        body policy reads the cookie before the request exists)."""
        remembered = data.get("owner")
        if not remembered or not self.session_registry().valid(data.get("sid")):
            return False
        try:
            expected = auth.fingerprint(self.owner_token())
        except FrameError as exc:  # e.g. a token file others can read: nobody is logged in until fixed
            log.warning("web: no usable owner token: %s", exc)
            return False
        return auth.tokens_match(remembered, expected)
