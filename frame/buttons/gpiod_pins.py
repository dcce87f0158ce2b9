"""A gpiozero pin factory over libgpiod v2 (the ``gpiod`` wheel): the buttons without a compiled backend.

gpiozero needs a pin library underneath. In a virtualenv on Raspberry Pi OS its choices are poor:
``lgpio`` has an aarch64 wheel for CPython 3.11 only (3.13 would build it from C), ``RPi.GPIO`` is a
source distribution, and gpiozero's pure-Python fallback watches edges through ``/sys/class/gpio``,
which Raspberry Pi kernels since 6.6 no longer offer. ``gpiod`` (the kernel's GPIO character device
bindings) ships wheels for both Pythons and does edge detection, pull-ups and debouncing in the
kernel, so this factory maps gpiozero's pin interface onto it: one line request per pin, reconfigured
when gpiozero changes the function, pull, bounce or edges, and a thread per watched pin that turns
kernel edge events (monotonic timestamps, as gpiozero's local ticks) into ``when_changed`` calls.

``default_pin_factory()`` is what frame's buttons use when no factory is given: gpiozero's own
choice when the owner set ``GPIOZERO_PIN_FACTORY`` or ``lgpio`` is importable, this one otherwise.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from datetime import timedelta
from typing import Any

from gpiozero.exc import (
    PinFixedPull,
    PinInvalidBounce,
    PinInvalidEdges,
    PinInvalidFunction,
    PinInvalidPull,
    PinSetInput,
)
from gpiozero.pins.local import LocalPiFactory, LocalPiPin

log = logging.getLogger(__name__)

_POLL_SECONDS = 0.1  # how long a watcher waits for edges before checking whether it should stop


class GpiodFactory(LocalPiFactory):
    """Pins on ``chip`` through gpiod v2. ``gpiod_module`` and ``revision`` are for tests."""

    def __init__(self, chip: str = "/dev/gpiochip0", gpiod_module: Any = None, revision: int | None = None) -> None:
        super().__init__()
        self._gpiod = gpiod_module if gpiod_module is not None else importlib.import_module("gpiod")
        self.chip = chip
        self._revision = revision
        self.pin_class = GpiodPin

    def _get_revision(self) -> int:
        return self._revision if self._revision is not None else super()._get_revision()

    def request(self, offset: int, line_settings: Any) -> Any:
        """A line request for ``offset`` with gpiod's own ``LineSettings`` (not frame settings)."""
        return self._gpiod.request_lines(self.chip, consumer="frame", config={offset: line_settings})


class GpiodPin(LocalPiPin):
    """One GPIO line, held as its own gpiod line request for as long as gpiozero uses the pin."""

    EDGES = ("both", "rising", "falling")

    def __init__(self, factory: GpiodFactory, info: Any) -> None:
        super().__init__(factory, info)
        self._gpiod = factory._gpiod
        self._function, self._output = "input", 0
        self._pull = info.pull or "floating"
        self._bounce: float | None = None
        self._edges = "both"
        self._watching = False
        self._watcher: threading.Thread | None = None
        self._stop = threading.Event()  # one per watcher thread
        self._request = factory.request(self._number, self._settings())

    # ----- gpiod line settings ----------------------------------------------------------------------
    def _settings(self) -> Any:
        line = self._gpiod.line
        if self._function == "output":
            value = line.Value.ACTIVE if self._output else line.Value.INACTIVE
            return self._gpiod.LineSettings(direction=line.Direction.OUTPUT, output_value=value)
        bias = {"up": line.Bias.PULL_UP, "down": line.Bias.PULL_DOWN, "floating": line.Bias.DISABLED}[self._pull]
        edge = {"both": line.Edge.BOTH, "rising": line.Edge.RISING, "falling": line.Edge.FALLING}[self._edges]
        return self._gpiod.LineSettings(direction=line.Direction.INPUT, bias=bias,
                                        edge_detection=edge if self._watching else line.Edge.NONE,
                                        debounce_period=timedelta(seconds=self._bounce or 0))

    def _reconfigure(self) -> None:
        """Apply the settings; a running watcher pauses meanwhile (a line request is not thread-safe)."""
        watching = self._watcher is not None
        if watching:
            self._stop_watcher()
        self._request.reconfigure_lines({self._number: self._settings()})
        if watching:
            self._start_watcher()

    def close(self) -> None:
        self._stop_watcher()
        self._watching = False
        if self._request is not None:
            self._request.release()
            self._request = None

    # ----- gpiozero's pin interface -----------------------------------------------------------------
    def _get_function(self) -> str:
        return self._function

    def _set_function(self, value: str) -> None:
        if value not in ("input", "output"):
            raise PinInvalidFunction(f'invalid function "{value}" for pin {self!r}')
        if value == "output":
            self._stop_watcher()
            self._watching = False
        self._function = value
        self._reconfigure()

    def _get_state(self) -> int:
        return int(self._request.get_value(self._number) == self._gpiod.line.Value.ACTIVE)

    def _set_state(self, value: Any) -> None:
        if self._function == "input":
            raise PinSetInput(f"cannot set state of pin {self!r}")
        self._output = int(bool(value))
        line = self._gpiod.line
        self._request.set_value(self._number, line.Value.ACTIVE if self._output else line.Value.INACTIVE)

    def _get_pull(self) -> str:
        return self._pull

    def _set_pull(self, value: str) -> None:
        if self._function != "input":
            raise PinFixedPull(f"cannot set pull on non-input pin {self!r}")
        if self.info.pull not in (value, ""):
            raise PinFixedPull(f"{self!r} has a physical pull-{self.info.pull} resistor")
        if value not in ("up", "down", "floating"):
            raise PinInvalidPull(f'invalid pull "{value}" for pin {self!r}')
        self._pull = value
        self._reconfigure()

    def _get_bounce(self) -> float | None:
        return self._bounce

    def _set_bounce(self, value: float | None) -> None:
        if value is not None and value < 0:
            raise PinInvalidBounce("bounce must be 0 or greater")
        self._bounce = value or None
        self._reconfigure()

    def _get_edges(self) -> str:
        return self._edges

    def _set_edges(self, value: str) -> None:
        if value not in self.EDGES:
            raise PinInvalidEdges(f'invalid edge specification "{value}" for pin {self!r}')
        self._edges = value
        self._reconfigure()

    def _enable_event_detect(self) -> None:
        self._watching = True
        self._request.reconfigure_lines({self._number: self._settings()})
        self._start_watcher()

    def _disable_event_detect(self) -> None:
        self._stop_watcher()
        self._watching = False
        if self._request is not None:
            self._request.reconfigure_lines({self._number: self._settings()})

    # ----- the edge watcher -------------------------------------------------------------------------
    def _start_watcher(self) -> None:
        self._stop = threading.Event()
        self._watcher = threading.Thread(target=self._watch, args=(self._stop,), name=f"frame-gpiod-{self._number}",
                                         daemon=True)
        self._watcher.start()

    def _stop_watcher(self) -> None:
        if self._watcher is not None:
            self._stop.set()
            if self._watcher is not threading.current_thread():
                self._watcher.join()
            self._watcher = None

    def _watch(self, stop: threading.Event) -> None:
        rising = self._gpiod.EdgeEvent.Type.RISING_EDGE
        while not stop.is_set():
            try:
                if not self._request.wait_edge_events(timedelta(seconds=_POLL_SECONDS)):
                    continue
                events = self._request.read_edge_events()
            except OSError as exc:
                log.error("GPIO%d: reading edge events failed (%s); the pin stops reporting", self._number, exc)
                return
            for event in events:
                if stop.is_set():
                    return
                self._call_when_changed(event.timestamp_ns / 1e9, int(event.event_type == rising))


def default_pin_factory() -> Any:
    """gpiozero's own choice (None) when the owner named one or lgpio is there; else a GpiodFactory."""
    if os.environ.get("GPIOZERO_PIN_FACTORY"):
        return None
    for name in ("lgpio", "gpiod"):
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        return None if name == "lgpio" else GpiodFactory()
    return None
