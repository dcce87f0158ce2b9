"""Buttons: debounce, hold-to-info and pin mapping, first hardware-free, then through gpiozero's MockFactory."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from frame.buttons.dispatch import ActionDispatcher, ButtonCallbacks, ButtonLogic, parse_pins, start_buttons
from frame.config.schema import ButtonsConfig
from frame.errors import FrameError


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class FakeTimer:
    def __init__(self, delay, fn) -> None:
        self.delay, self.fn, self.cancelled = delay, fn, False

    def cancel(self) -> None:
        self.cancelled = True

    def fire(self) -> None:
        if not self.cancelled:
            self.fn()


@pytest.fixture
def rig():
    clock, timers, emitted = FakeClock(), [], []

    def start_timer(delay, fn):
        timers.append(FakeTimer(delay, fn))
        return timers[-1]

    logic = ButtonLogic({5: "like", 6: "dislike"}, bounce_seconds=0.05, hold_seconds=1.5,
                        emit=emitted.append, clock=clock, start_timer=start_timer)
    return logic, clock, timers, emitted


def test_short_press_acts_on_release(rig):
    logic, clock, timers, emitted = rig
    logic.pressed(5)
    assert emitted == [] and timers[0].delay == 1.5
    clock.now += 0.2
    logic.released(5)
    assert emitted == ["like"]
    assert timers[0].cancelled


def test_contact_bounce_gives_one_action(rig):
    logic, clock, _timers, emitted = rig
    logic.pressed(6)
    for step in range(6):  # a chattering contact: alternating edges 5 ms apart
        clock.now += 0.005
        (logic.released if step % 2 == 0 else logic.pressed)(6)
    clock.now += 0.2
    logic.released(6)
    clock.now += 0.01
    logic.pressed(6)  # release bounce
    clock.now += 0.01
    logic.released(6)
    assert emitted == ["dislike"]


def test_presses_spaced_beyond_bounce_all_count(rig):
    logic, clock, _timers, emitted = rig
    for _ in range(3):
        logic.pressed(5)
        clock.now += 0.1
        logic.released(5)
        clock.now += 0.1
    assert emitted == ["like", "like", "like"]


def test_hold_shows_info_instead_of_action(rig):
    logic, clock, timers, emitted = rig
    logic.pressed(5)
    clock.now += 1.6
    timers[0].fire()
    assert emitted == ["info"]
    logic.released(5)
    assert emitted == ["info"]


def test_lost_release_edge_does_not_become_a_hold(rig):
    logic, clock, timers, emitted = rig
    logic._is_down = lambda pin: False  # the pin is really up: its release edge fell inside the bounce window
    logic.pressed(5)
    clock.now += 0.01
    logic.released(5)  # ignored as bounce
    timers[0].fire()
    assert emitted == []
    clock.now += 2
    logic.pressed(5)
    clock.now += 0.2
    logic.released(5)
    assert emitted == ["like"]


def test_unmapped_pins_are_ignored(rig):
    logic, _clock, timers, emitted = rig
    logic.pressed(17)
    logic.released(17)
    assert emitted == [] and timers == []


def test_parse_pins_drops_none_and_rejects_bad_entries():
    assert parse_pins({"5": "like", "6": "none", "25": "next"}) == {5: "like", 25: "next"}
    with pytest.raises(FrameError, match="BCM GPIO"):
        parse_pins({"40": "like"})
    with pytest.raises(FrameError, match="unknown action 'reboot'"):
        parse_pins({"5": "reboot"})


class Recorder:
    """Callbacks that record what the daemon was asked to do."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.event = threading.Event()

    def _add(self, *call) -> None:
        self.calls.append(call)
        self.event.set()

    def callbacks(self) -> ButtonCallbacks:
        return ButtonCallbacks(rate=lambda v: self._add("rate", v), previous=lambda: self._add("previous"),
                               next=lambda: self._add("next"), info=lambda: self._add("info"))

    def wait_for(self, count: int, timeout: float = 2.0) -> list[tuple]:
        deadline = time.monotonic() + timeout
        while len(self.calls) < count and time.monotonic() < deadline:
            self.event.wait(0.01)
            self.event.clear()
        return self.calls


def test_dispatcher_runs_in_order_and_survives_a_failing_callback():
    recorder = Recorder()
    callbacks = recorder.callbacks()
    failing = ButtonCallbacks(rate=callbacks.rate, previous=lambda: 1 / 0, next=callbacks.next,
                              info=callbacks.info)
    dispatcher = ActionDispatcher(failing)
    for action in ("like", "previous", "next", "dislike", "info", "none"):
        dispatcher.submit(action)
    dispatcher.close()
    assert recorder.calls == [("rate", 1), ("next",), ("rate", -1), ("info",)]


def test_disabled_buttons_do_not_import_gpiozero():
    code = ("import sys\nfrom frame.buttons.dispatch import start_buttons, ButtonCallbacks\n"
            "from frame.config.schema import ButtonsConfig\n"
            "cb = ButtonCallbacks(rate=print, previous=print, next=print, info=print)\n"
            "assert start_buttons(ButtonsConfig(enabled=False), cb) is None\n"
            "assert 'gpiozero' not in sys.modules, 'gpiozero imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=30)


@pytest.fixture
def mock_factory():
    mock = pytest.importorskip("gpiozero.pins.mock", reason="gpiozero not installed (optional extra 'buttons')")
    factory = mock.MockFactory()
    yield factory
    factory.reset()


def _press(factory, pin: int, seconds: float) -> None:
    factory.pin(pin).drive_low()  # active low: pressing pulls the pull-up to ground
    time.sleep(seconds)
    factory.pin(pin).drive_high()


def test_gpio_default_mapping_like_dislike_next_previous(mock_factory):
    recorder = Recorder()
    config = ButtonsConfig(enabled=True, bounce_ms=20, hold_seconds=1.0)
    with start_buttons(config, recorder.callbacks(), pin_factory=mock_factory) as buttons:
        assert buttons.pins == {5: "like", 6: "dislike", 16: "next", 24: "previous"}
        assert mock_factory.pin(5).pull == "up"
        for pin in (5, 6, 16, 24):
            _press(mock_factory, pin, 0.03)
            time.sleep(0.03)
        calls = recorder.wait_for(4)
    assert calls == [("rate", 1), ("rate", -1), ("next",), ("previous",)]


def test_gpio_debounce_and_hold(mock_factory):
    recorder = Recorder()
    config = ButtonsConfig(enabled=True, pins={"25": "next", "6": "none"}, bounce_ms=50, hold_seconds=0.2)
    with start_buttons(config, recorder.callbacks(), pin_factory=mock_factory):
        pin = mock_factory.pin(25)
        pin.drive_low()
        for _ in range(3):  # contact chatter right after the press
            pin.drive_high()
            pin.drive_low()
        time.sleep(0.08)
        pin.drive_high()
        assert recorder.wait_for(1) == [("next",)]
        time.sleep(0.08)
        _press(mock_factory, 25, 0.35)  # held past hold_seconds
        calls = recorder.wait_for(2)
        assert calls == [("next",), ("info",)]
        _press(mock_factory, 6, 0.03)  # mapped to none: not claimed, no action
        time.sleep(0.1)
    assert recorder.calls == [("next",), ("info",)]


def test_gpio_pin_in_use_is_a_clear_error(mock_factory):
    from gpiozero import Button

    blocker = Button(5, pin_factory=mock_factory)
    try:
        with pytest.raises(FrameError, match="GPIO5"):
            start_buttons(ButtonsConfig(enabled=True), Recorder().callbacks(), pin_factory=mock_factory)
    finally:
        blocker.close()
