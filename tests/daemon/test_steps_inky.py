"""Panel preparation for an auto-detected Inky board: the model comes from its EEPROM, not the config."""

import functools

from PIL import Image

import frame.display
from frame.config import DisplayConfig, load_config
from frame.worker.events import StageEvent
from frame.worker.render import prepare_for_panel
from tests.display.test_device import InkyE673, _fake_inky


def test_inky_panel_is_prepared_for_the_detected_board(tmp_path, monkeypatch):
    board = InkyE673()
    monkeypatch.setattr(frame.display, "open_display",
                        functools.partial(frame.display.open_display, inky_module=_fake_inky(board)))
    config = load_config(None, environ={})
    config = type(config)(**{**config.__dict__, "display": DisplayConfig(panel="inky")})
    picture = tmp_path / "picture.png"
    Image.new("RGB", (256, 160), (200, 40, 40)).save(picture)
    stages = []
    out = prepare_for_panel(config, picture, tmp_path, stages.append)
    prepared = Image.open(out)
    assert prepared.mode == "P" and prepared.size == (800, 480)  # the detected 7.3" board's size
    assert len(prepared.getpalette()) // 3 >= 6
    assert stages == [StageEvent("preparing for the panel")]
