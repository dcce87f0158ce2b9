"""The gpiozero pin factory over gpiod v2, driven through a fake ``gpiod`` module that plays the kernel.

``FakeRequest`` keeps each line's settings and level and queues edge events the way a gpiod line
request does (``wait_edge_events`` / ``read_edge_events``), so gpiozero's own Button and LED classes and
frame's Buttons run unchanged on top of GpiodFactory.
"""

from __future__ import annotations

import enum
import threading
import time
import types

import pytest
from gpiozero import LED, Button
from gpiozero.exc import PinFixedPull, PinInvalidEdges, PinSetInput

from frame.buttons import gpiod_pins
from frame.buttons.dispatch import ButtonCallbacks, Buttons
from frame.buttons.gpiod_pins import GpiodFactory
from frame.config.schema import ButtonsConfig

PI_ZERO_2_W = 0x902120
Direction = enum.Enum("Direction", "INPUT OUTPUT")
Value = enum.Enum("Value", "INACTIVE ACTIVE")
Bias = enum.Enum("Bias", "PULL_UP PULL_DOWN DISABLED")
Edge = enum.Enum("Edge", "NONE RISING FALLING BOTH")
EventType = enum.Enum("EventType", "RISING_EDGE FALLING_EDGE")


class FakeRequest:
    def __init__(self, chip: str, config: dict) -> None:
        self.chip, self.settings, self.released = chip, dict(config), False
        self.levels = {offset: Value.ACTIVE for offset in config}  # pulled up: reads high
        self.events: list = []
        self.ready = threading.Condition()
        self.history = [dict(config)]

    def reconfigure_lines(self, config: dict) -> None:
        assert not self.released
        self.settings.update(config)
        self.history.append(dict(config))

    def get_value(self, offset: int) -> Value:
        return self.levels[offset]

    def set_value(self, offset: int, value: Value) -> None:
        assert self.settings[offset]["direction"] is Direction.OUTPUT
        self.levels[offset] = value

    def wait_edge_events(self, timeout) -> bool:
        with self.ready:
            return self.ready.wait_for(lambda: self.events, timeout.total_seconds())

    def read_edge_events(self) -> list:
        with self.ready:
            events, self.events = self.events, []
            return events

    def release(self) -> None:
        self.released = True

    def drive(self, offset: int, level: int) -> None:
        """The outside world moves the line; the kernel queues an edge event if edges are watched."""
        self.levels[offset] = Value.ACTIVE if level else Value.INACTIVE
        edge = self.settings[offset]["edge_detection"]
        kind = EventType.RISING_EDGE if level else EventType.FALLING_EDGE
        if edge is Edge.BOTH or edge.name == kind.name.split("_")[0]:
            with self.ready:
                self.events.append(types.SimpleNamespace(event_type=kind, timestamp_ns=time.monotonic_ns(),
                                                         line_offset=offset))
                self.ready.notify_all()


class FakeGpiod:
    def __init__(self) -> None:
        self.line = types.SimpleNamespace(Direction=Direction, Value=Value, Bias=Bias, Edge=Edge)
        self.EdgeEvent = types.SimpleNamespace(Type=EventType)
        self.requests: dict[int, FakeRequest] = {}

    @staticmethod
    def LineSettings(**settings):  # noqa: N802 - gpiod's name
        return settings

    def request_lines(self, chip: str, consumer: str, config: dict) -> FakeRequest:
        assert consumer == "frame" and len(config) == 1
        (offset,) = config
        assert offset not in self.requests or self.requests[offset].released, "line already requested"
        self.requests[offset] = FakeRequest(chip, config)
        return self.requests[offset]


@pytest.fixture
def gpiod():
    fake = FakeGpiod()
    factory = GpiodFactory(gpiod_module=fake, revision=PI_ZERO_2_W)
    fake.factory = factory
    yield fake
    factory.close()


def _wait(event: threading.Event) -> None:
    assert event.wait(5), "no callback within 5 s"


def test_a_button_gets_a_pull_up_and_kernel_edges(gpiod) -> None:
    pressed, released = threading.Event(), threading.Event()
    button = Button(5, pull_up=True, bounce_time=None, pin_factory=gpiod.factory)
    request = gpiod.requests[5]
    assert request.chip == "/dev/gpiochip0"
    assert request.settings[5]["direction"] is Direction.INPUT and request.settings[5]["bias"] is Bias.PULL_UP
    assert not button.is_pressed
    button.when_pressed = pressed.set
    button.when_released = released.set
    assert request.settings[5]["edge_detection"] is Edge.BOTH

    request.drive(5, 0)  # active low: pushed
    _wait(pressed)
    assert button.is_pressed and not released.is_set()
    request.drive(5, 1)
    _wait(released)
    assert not button.is_pressed

    button.close()
    assert request.released
    assert not any(t.name == "frame-gpiod-5" for t in threading.enumerate())


def test_an_output_pin_drives_the_line(gpiod) -> None:
    led = LED(17, pin_factory=gpiod.factory)
    request = gpiod.requests[17]
    assert request.settings[17]["direction"] is Direction.OUTPUT
    led.on()
    assert request.levels[17] is Value.ACTIVE
    led.off()
    assert request.levels[17] is Value.INACTIVE
    with pytest.raises(PinFixedPull):
        led.pin.pull = "up"
    led.close()
    assert request.released


def test_bad_settings_are_gpiozero_s_errors_and_bounce_is_the_kernel_s(gpiod) -> None:
    pin = gpiod.factory.pin(6)
    with pytest.raises(PinSetInput):
        pin.state = 1
    with pytest.raises(PinInvalidEdges):
        pin.edges = "sideways"
    pin.bounce = 0.02
    assert gpiod.requests[6].settings[6]["debounce_period"].total_seconds() == pytest.approx(0.02)
    pin.pull = "down"
    assert gpiod.requests[6].settings[6]["bias"] is Bias.PULL_DOWN


def test_frame_s_buttons_run_on_it(gpiod) -> None:
    liked = threading.Event()
    callbacks = ButtonCallbacks(rate=lambda value: value == 1 and liked.set(), previous=lambda: None,
                                next=lambda: None, info=lambda: None)
    config = ButtonsConfig(enabled=True, pins={"5": "like"}, bounce_ms=10, hold_seconds=5)
    with Buttons(config, callbacks, pin_factory=gpiod.factory) as buttons:
        buttons.start()
        gpiod.requests[5].drive(5, 0)
        time.sleep(0.05)  # past the bounce time
        gpiod.requests[5].drive(5, 1)
        _wait(liked)


def test_the_default_factory_is_gpiod_only_without_lgpio_or_an_owner_s_choice(monkeypatch) -> None:
    present = {"gpiod": types.SimpleNamespace()}

    def import_module(name: str):
        if name not in present:
            raise ModuleNotFoundError(name)
        return present[name]

    monkeypatch.setattr(gpiod_pins.importlib, "import_module", import_module)
    monkeypatch.delenv("GPIOZERO_PIN_FACTORY", raising=False)
    factory = gpiod_pins.default_pin_factory()
    assert isinstance(factory, GpiodFactory) and factory._gpiod is present["gpiod"]
    present["lgpio"] = types.SimpleNamespace()
    assert gpiod_pins.default_pin_factory() is None  # gpiozero picks lgpio itself
    del present["lgpio"]
    monkeypatch.setenv("GPIOZERO_PIN_FACTORY", "mock")
    assert gpiod_pins.default_pin_factory() is None
