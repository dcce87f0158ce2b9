"""What each command from Home Assistant does: always an owner action of ``frame.daemon.actions``, the
one the phone page and the JSON API call, with the same checks and the same messages.

A command is a topic (``BASE/cmd/<name>``) and a short text payload. Its answer (``Answer``) goes to
``BASE/answer`` and a refused one is logged too; nothing a payload holds can do more than be refused:
it is bounded in size and read as text, matched against fixed words, or handed to the owner action
that checks it (the prompt). ``CommandRate`` bounds how many are carried out per second, so a flood of
junk costs the daemon a counter, not a store write each.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from frame.config.schema import Config
from frame.daemon import deletion
from frame.daemon import queue as queue_rules
from frame.daemon.actions import pictures as picture_actions
from frame.daemon.actions import queue as queue_actions
from frame.daemon.actions import tonight
from frame.daemon.actions.errors import BadValue, NotFound, NotRunning
from frame.daemon.feeds.parse import Sanitiser
from frame.daemon.http.contract import Busy
from frame.daemon.mqtt.discovery import OFF, ON, PRESS, RATINGS
from frame.daemon.store.database import Store
from frame.daemon.wishes import Wishes
from frame.recordcodec import Record

log = logging.getLogger(__name__)

SOURCE = "mqtt"
MAX_PAYLOAD_BYTES = 2048  # a prompt of feeds.max_prompt_chars in any script fits; more is not a command
# the owner's errors, answered with their own message (as the API's 4xx)
OWNER_ERRORS = (NotFound, NotRunning, BadValue, Busy, queue_rules.QueueError, deletion.PictureInUse)


@dataclass(frozen=True)
class Answer(Record):
    """A command's answer on ``BASE/answer`` (``to_json``: its three fields)."""

    command: str
    ok: bool
    message: str


class CommandHost(Protocol):
    """What the commands need of the running daemon (``service.Daemon`` implements it)."""

    config: Config
    store: Store
    state_dir: Path
    wishes: Wishes

    def status(self) -> dict[str, Any]: ...

    def render_now(self) -> dict[str, Any]: ...

    def show(self, picture_id: int) -> dict[str, Any]: ...

    def on_panel(self) -> int | None: ...

    def browse_base(self) -> int | None: ...


class CommandRate:
    """A token bucket: ``burst`` commands at once, then ``per_second``; the rest are dropped and
    counted (``dropped``), one log line a minute saying how many."""

    def __init__(self, per_second: float = 5.0, burst: int = 20) -> None:
        self.per_second, self.burst = per_second, burst
        self._tokens, self._at = float(burst), time.monotonic()
        self._lock = threading.Lock()
        self.dropped = 0
        self._logged_at, self._logged_count = 0.0, 0

    def admit(self) -> bool:
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.per_second)
            self._at = now
            if self._tokens >= 1:
                self._tokens -= 1
                return True
            self.dropped += 1
            if now - self._logged_at >= 60:
                log.warning("mqtt: more than %g commands a second; %d dropped so far", self.per_second,
                            self.dropped - self._logged_count)
                self._logged_at, self._logged_count = now, self.dropped
            return False


def payload_text(payload: bytes) -> str:
    """The payload as text; ``BadValue`` when it is too long or not UTF-8."""
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise BadValue("payload", f"the payload is {len(payload)} bytes; at most {MAX_PAYLOAD_BYTES} are read")
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError:
        raise BadValue("payload", "the payload is not UTF-8 text") from None


def _press(text: str) -> None:
    if text.strip() != PRESS:
        raise BadValue("payload", f"send {PRESS} to press this button")


def run(host: CommandHost, name: str, payload: bytes) -> Answer:
    """Carry out one command; never raises (an unexpected failure is logged with its trace)."""
    try:
        message = _run(host, name, payload_text(payload))
    except OWNER_ERRORS as exc:
        text = getattr(exc, "message", None) or str(exc)
        log.warning("mqtt: %s refused: %s", name, text)
        return Answer(name, False, text)
    except Exception:
        log.exception("mqtt: %s failed", name)
        return Answer(name, False, "internal error (see the frame's log)")
    return Answer(name, True, message)


def _shown(answer: dict[str, Any]) -> str:
    deferred = answer.get("deferred")
    return f"picture {answer.get('picture_id')}" + (f" waits for the end of {deferred}" if deferred else " shown")


def _run(host: CommandHost, name: str, text: str) -> str:
    store = host.store
    if name == "paint":
        _press(text)
        return f"render {picture_actions.render_now(host, SOURCE)['render_id']} started"
    if name == "next":
        _press(text)
        return _shown(picture_actions.show_next(store, host, host.browse_base(), SOURCE))
    if name == "favourite":
        _press(text)
        return _shown(picture_actions.show_favourite(store, host, host.on_panel(), SOURCE))
    if name == "prompt":
        feeds = host.config.feeds
        sanitiser = Sanitiser(feeds.max_prompt_chars, tuple(feeds.blocklist))
        prompt_id, prompt = queue_actions.add_text(host.config, store, sanitiser, text, SOURCE)
        return f"queued prompt {prompt_id}: {prompt}"
    if name == "theme":
        chosen = tonight.choose_theme(host.config, host.wishes, text.strip(), SOURCE)
        return f"tonight's theme: {chosen}" if chosen else "tonight's theme: the taste model chooses"
    if name == "rate":
        if text.strip() not in RATINGS:
            raise BadValue("payload", f"send one of: {', '.join(RATINGS)}")
        picture_id = host.on_panel()
        if picture_id is None:
            raise NotFound("no picture has been shown yet, nothing to rate")
        kind, value = RATINGS[text.strip()]
        picture_actions.rate_picture(store, picture_id, kind, value, source=SOURCE)
        return f"picture {picture_id} rated {text.strip()}"
    if name == "quiet":
        if text.strip() not in (ON, OFF):
            raise BadValue("payload", f"send {ON} or {OFF}")
        tonight.hold_quiet(host.wishes, text.strip() == ON, SOURCE)
        return f"quiet hold {text.strip().lower()}"
    raise BadValue("topic", f"no command {name!r}")
