"""A Raspberry Pi installs frame from wheels only (slow: asks the package registry; `.ci/run` runs it).

Each test resolves for aarch64 CPython 3.11 (Raspberry Pi OS bookworm) and 3.13 (trixie) with
``pip download --only-binary=:all:`` into a temporary folder, through tools/pi_wheels.py.
"""

from __future__ import annotations

import pytest

from tests.install.pitools import load_tool

pytestmark = pytest.mark.slow
pi_wheels = load_tool("pi_wheels")
PYTHONS = sorted(pi_wheels.PYTHONS)


@pytest.mark.parametrize("python", PYTHONS)
def test_install_requires_and_the_pi_extras_resolve_to_wheels_only(python: str, tmp_path) -> None:
    resolution = pi_wheels.resolve(python, tmp_path)
    assert not resolution.would_compile, (
        "these would compile on a Pi:\n" + "\n".join(resolution.would_compile) + "\n" + resolution.log[-3000:])
    names = {pi_wheels.wheel_name_version(w)[0] for w in resolution.wheels}
    assert {"numpy", "onnx", "gpiod", "gpiozero", "inky", "scikit-learn"} <= names
    assert "spidev" not in names


@pytest.mark.parametrize("python", PYTHONS)
def test_the_lock_downloads_with_its_hashes(python: str, tmp_path) -> None:
    """requirements-pi.txt is complete and its hashes are the registry's Pi wheels."""
    done = pi_wheels.pip_download(["-r", str(pi_wheels.LOCK)], python, tmp_path, no_deps=True,
                                  extra=("--require-hashes",))
    assert done.returncode == 0, done.stderr[-3000:]
    assert all(path.suffix == ".whl" for path in tmp_path.iterdir())


def test_the_check_names_packages_that_would_compile(tmp_path) -> None:
    """spidev reached through inky's dependencies, where pip itself names no package at all."""
    resolution = pi_wheels.resolve("3.11", tmp_path, requirements=["inky>=2.0", "smbus2"])
    assert [line.split(":")[0] for line in resolution.would_compile] == ["spidev"]


def test_markers_are_evaluated_for_the_pi_not_for_this_machine(tmp_path) -> None:
    for python, marker, expected in [("3.11", "platform_machine == 'aarch64'", True),
                                     ("3.11", "platform_machine == 'x86_64'", False),
                                     ("3.13", "python_version >= '3.13'", True),
                                     ("3.11", "python_version >= '3.13'", False)]:
        dest = tmp_path / f"{python}-{len(list(tmp_path.iterdir()))}"
        dest.mkdir()
        done = pi_wheels.pip_download([f"colorzero==2.0 ; {marker}"], python, dest, no_deps=True)
        assert done.returncode == 0, done.stderr
        assert bool(list(dest.glob("colorzero-*.whl"))) is expected, (python, marker)
