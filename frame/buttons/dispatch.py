"""The frame's physical buttons: GPIO pins mapped to owner actions, debounced, with hold = info.

Inky Impression boards carry four buttons, active low with pull-ups: A=GPIO5, B=GPIO6, C=GPIO16
(GPIO25 on the 13.3" board) and D=GPIO24. ``buttons.pins`` in config.yaml maps any BCM pin to one of
``like``, ``dislike``, ``next``, ``previous``, ``info`` or ``none``; the default maps A/B/C/D to like,
dislike, next and previous. Holding *any* mapped button for ``buttons.hold_seconds`` shows the info
screen instead of the button's own action, so a short press acts on release.

Why the debouncing lives here rather than in gpiozero's ``bounce_time``: pin back-ends disagree on it
(lgpio filters in the kernel, gpiozero's MockFactory ignores it entirely), and doing it in one place
makes the behaviour the same on every board and testable with a fake pin factory.

The daemon passes a :class:`ButtonCallbacks`; callbacks run one at a time, in press order, on a
dispatcher thread of this module, never on gpiozero's edge-detection thread, so a slow panel refresh
can neither block nor drop button edges. gpiozero is imported only when ``buttons.enabled`` is true.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from frame.config.schema import ButtonsConfig
from frame.errors import FrameError
from frame.install_hints import extra_hint

log = logging.getLogger(__name__)

ACTIONS = ("like", "dislike", "next", "previous", "info", "none")
INKY_IMPRESSION_PINS = {5: "A", 6: "B", 16: "C", 25: "C", 24: "D"}  # C is GPIO25 on the 13.3" board
_MAX_PENDING = 8


@dataclass(frozen=True)
class ButtonCallbacks:
    """What the buttons can ask the daemon to do. Each callback should return within a second or so.

    ``rate(value)``: rate the picture currently on the panel, ``+1`` (like) or ``-1`` (dislike).
    ``previous()`` / ``next()``: show the previous / next picture of the gallery.
    ``info()``: show what is on the panel and why it was chosen.
    """

    rate: Callable[[int], None]
    previous: Callable[[], None]
    next: Callable[[], None]
    info: Callable[[], None]

    def run(self, action: str) -> None:
        """Perform one action name from ``ACTIONS`` (``none`` does nothing)."""
        if action == "like":
            self.rate(1)
        elif action == "dislike":
            self.rate(-1)
        elif action == "next":
            self.next()
        elif action == "previous":
            self.previous()
        elif action == "info":
            self.info()
        elif action != "none":
            raise ValueError(f"unknown button action {action!r}")


def parse_pins(pins: Mapping[str, str]) -> dict[int, str]:
    """``buttons.pins`` as {BCM pin: action}, without ``none`` entries; bad entries raise FrameError."""
    mapping: dict[int, str] = {}
    for pin, action in pins.items():
        if not str(pin).isdigit() or not 0 <= int(pin) <= 27:
            raise FrameError(f"buttons.pins: {pin!r} is not a BCM GPIO number from 0 to 27")
        if action not in ACTIONS:
            raise FrameError(f"buttons.pins: pin {pin} has unknown action {action!r} "
                             f"(choose from {', '.join(ACTIONS)})")
        if action != "none":
            mapping[int(pin)] = action
    return mapping


class ButtonLogic:
    """Press/release edges of several buttons → debounced actions, with hold-to-info.

    Hardware-free: edges come in through :meth:`pressed` / :meth:`released` with a timestamp from
    ``clock``; the hold timer is started through ``start_timer(delay, fn)`` which returns an object
    with ``cancel()``. Actions go to ``emit(action)``. ``is_down(pin)``, when given, reads the pin's
    real level when the hold timer expires, so a release edge lost to debouncing cannot turn into a
    phantom hold.
    """

    def __init__(self, pins: Mapping[int, str], bounce_seconds: float, hold_seconds: float,
                 emit: Callable[[str], None], clock: Callable[[], float] = time.monotonic,
                 start_timer: Callable[[float, Callable[[], None]], Any] | None = None,
                 is_down: Callable[[int], bool] | None = None) -> None:
        self._pins = dict(pins)
        self._bounce = bounce_seconds
        self._hold = hold_seconds
        self._emit = emit
        self._clock = clock
        self._start_timer = start_timer or _thread_timer
        self._is_down = is_down
        self._lock = threading.Lock()
        self._last_edge: dict[int, float] = {}
        self._down: dict[int, bool] = {}
        self._held: dict[int, bool] = {}
        self._timers: dict[int, Any] = {}

    def _accept_edge(self, pin: int, down: bool) -> bool:
        """Debounce: ignore edges closer than the bounce time to the last accepted one, and repeats."""
        now = self._clock()
        last = self._last_edge.get(pin)
        if self._down.get(pin, False) == down or (last is not None and now - last < self._bounce):
            log.debug("button on GPIO%d: ignored %s edge (bounce)", pin, "press" if down else "release")
            return False
        self._last_edge[pin] = now
        self._down[pin] = down
        return True

    def pressed(self, pin: int) -> None:
        """A falling edge (button pushed) on ``pin``."""
        with self._lock:
            if pin not in self._pins or not self._accept_edge(pin, True):
                return
            self._held[pin] = False
            self._timers[pin] = self._start_timer(self._hold, lambda: self._hold_expired(pin))

    def released(self, pin: int) -> None:
        """A rising edge (button let go) on ``pin``: a short press performs the pin's action."""
        with self._lock:
            if pin not in self._pins or not self._accept_edge(pin, False):
                return
            timer = self._timers.pop(pin, None)
            if timer is not None:
                timer.cancel()
            held = self._held.pop(pin, False)
        if not held:
            log.info("button on GPIO%d pressed: %s", pin, self._pins[pin])
            self._emit(self._pins[pin])

    def _hold_expired(self, pin: int) -> None:
        with self._lock:
            if not self._down.get(pin) or self._held.get(pin) is not False:
                return
            if self._is_down is not None and not self._is_down(pin):
                log.debug("button on GPIO%d: release edge was lost, resynchronised", pin)
                self._down[pin] = False
                self._timers.pop(pin, None)
                return
            self._held[pin] = True
            self._timers.pop(pin, None)
        log.info("button on GPIO%d held: info", pin)
        self._emit("info")

    def cancel_timers(self) -> None:
        with self._lock:
            for timer in self._timers.values():
                timer.cancel()
            self._timers.clear()


def _thread_timer(delay: float, fn: Callable[[], None]) -> threading.Timer:
    timer = threading.Timer(delay, fn)
    timer.daemon = True
    timer.start()
    return timer


class ActionDispatcher:
    """Runs button actions one at a time, in order, on its own thread; a failing callback is logged.

    At most ``_MAX_PENDING`` actions wait; more presses while the daemon is busy are dropped with a
    warning rather than replayed minutes later.
    """

    def __init__(self, callbacks: ButtonCallbacks) -> None:
        self._callbacks = callbacks
        self._queue: queue.Queue[str | None] = queue.Queue(maxsize=_MAX_PENDING)
        self._thread = threading.Thread(target=self._loop, name="frame-buttons", daemon=True)
        self._thread.start()

    def submit(self, action: str) -> None:
        try:
            self._queue.put_nowait(action)
        except queue.Full:
            log.warning("button action %s dropped: %d actions still waiting", action, _MAX_PENDING)

    def _loop(self) -> None:
        while True:
            action = self._queue.get()
            if action is None:
                return
            started = time.monotonic()
            try:
                self._callbacks.run(action)
            except Exception:
                log.exception("button action %s failed", action)
            else:
                log.debug("button action %s took %.2f s", action, time.monotonic() - started)

    def close(self, timeout: float = 5.0) -> None:
        """Finish the actions already queued (up to ``timeout`` seconds) and stop the thread."""
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            log.warning("button dispatcher still busy; abandoning its queue")
            return
        self._thread.join(timeout)


class Buttons:
    """gpiozero ``Button`` devices (pull-up, active low) wired to :class:`ButtonLogic`.

    Use :func:`start_buttons`; ``pin_factory`` is for tests (gpiozero's ``MockFactory``). Without one,
    :func:`frame.buttons.gpiod_pins.default_pin_factory` picks the pin library (gpiod when lgpio is missing).
    """

    def __init__(self, config: ButtonsConfig, callbacks: ButtonCallbacks, pin_factory: Any = None) -> None:
        self.pins = parse_pins(config.pins)
        self._pin_factory = pin_factory
        self._dispatcher = ActionDispatcher(callbacks)
        self._devices: dict[int, Any] = {}
        self.logic = ButtonLogic(self.pins, config.bounce_ms / 1000.0, config.hold_seconds,
                                 self._dispatcher.submit, is_down=self._is_down)

    def _is_down(self, pin: int) -> bool:
        device = self._devices.get(pin)
        return bool(device is not None and device.is_pressed)

    def start(self) -> None:
        """Claim the pins; raise FrameError naming the pin when gpiozero or the pin is unavailable."""
        try:
            from gpiozero import Button
            from gpiozero.exc import GPIOZeroError

            from frame.buttons.gpiod_pins import default_pin_factory
        except ImportError:
            self.close()
            raise FrameError("buttons.enabled is true but gpiozero is not installed: "
                             + extra_hint("buttons")) from None
        factory = self._pin_factory if self._pin_factory is not None else default_pin_factory()
        for pin, action in sorted(self.pins.items()):
            try:
                device = Button(pin, pull_up=True, bounce_time=None, pin_factory=factory)
            except (GPIOZeroError, OSError) as exc:
                self.close()
                raise FrameError(f"buttons.pins: cannot use GPIO{pin} for {action}: {exc}") from None
            device.when_pressed = lambda pin=pin: self.logic.pressed(pin)
            device.when_released = lambda pin=pin: self.logic.released(pin)
            self._devices[pin] = device
        log.info("buttons ready: %s", ", ".join(
            f"GPIO{p}{'/' + INKY_IMPRESSION_PINS[p] if p in INKY_IMPRESSION_PINS else ''}={a}"
            for p, a in sorted(self.pins.items())))

    def close(self) -> None:
        """Release every pin and stop the dispatcher; safe to call twice."""
        self.logic.cancel_timers()
        for device in self._devices.values():
            device.close()
        self._devices.clear()
        self._dispatcher.close()

    def __enter__(self) -> Buttons:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_buttons(config: ButtonsConfig, callbacks: ButtonCallbacks, pin_factory: Any = None) -> Buttons | None:
    """Start reading the buttons when ``buttons.enabled``; ``None`` (and no gpiozero import) otherwise."""
    if not config.enabled:
        log.debug("buttons disabled")
        return None
    buttons = Buttons(config, callbacks, pin_factory)
    buttons.start()
    return buttons
