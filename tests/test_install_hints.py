"""Install hints name the Python running frame and the wheels of setup.cfg's extras (issue 13 item 22)."""

import configparser
import shlex
import sys
from pathlib import Path

import pytest

from frame.install_hints import EXTRAS, extra_hint, pip_command

SETUP_CFG = Path(__file__).resolve().parents[1] / "setup.cfg"


def test_the_hinted_wheels_are_the_extras_in_setup_cfg():
    parser = configparser.ConfigParser()
    parser.read(SETUP_CFG)
    extras = parser["options.extras_require"]
    for name, wheels in EXTRAS.items():
        assert sorted(wheels) == sorted(line.strip() for line in extras[name].splitlines() if line.strip())


def test_pip_command_is_this_interpreter_quoted_for_a_shell():
    assert pip_command("gpiod>=2.0") == f"{shlex.quote(sys.executable)} -m pip install 'gpiod>=2.0'"
    assert pip_command("inky", no_deps=True).endswith(" -m pip install --no-deps inky")
    assert "tools/install-pi.sh" in extra_hint("pi")


def test_the_inky_hint_installs_into_this_python(monkeypatch):
    import importlib

    from frame.display.drivers import inky
    from frame.errors import FrameError

    real = importlib.import_module

    def no_inky(name, *args):
        if name.startswith("inky"):
            raise ImportError(name)
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", no_inky)
    with pytest.raises(FrameError) as info:
        inky.load_inky()
    message = str(info.value)
    assert pip_command(*EXTRAS["inky"]) in message and pip_command("inky", no_deps=True) in message
    assert "frame[inky]" not in message


def test_an_extra_is_installed_from_the_checkout_frame_runs_from(monkeypatch, tmp_path):
    """Issue 40 item 19: the plot hint said pip install 'frame[plots]', a registry package; from a
    checkout the command is its editable install with the extra, else the extra's wheels."""
    from frame import install_hints

    root = Path(__file__).resolve().parents[1]
    assert install_hints.checkout() == root
    assert install_hints.extra_install("plots") == pip_command("-e", f"{root}[plots]")
    monkeypatch.setattr(install_hints, "checkout", lambda: None)
    assert install_hints.extra_install("plots") == pip_command("matplotlib>=3.7")
