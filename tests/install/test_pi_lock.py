"""requirements-pi.txt against setup.cfg (no network): every Pi requirement is pinned, hashed and met."""

from __future__ import annotations

import re
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.version import Version

from tests.install.pitools import load_tool

pi_wheels = load_tool("pi_wheels")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(text: str) -> list[tuple[str, Version, Marker | None, list[str]]]:
    """(name, version, marker, hashes) per entry of a hash-pinned requirements file."""
    entries = []
    for entry in re.sub(r"\\\n\s*", " ", text).splitlines():
        if not entry.strip() or entry.startswith("#"):
            continue
        requirement, *hashes = entry.split("--hash=")
        parsed = Requirement(requirement.strip())
        (version,) = [spec.version for spec in parsed.specifier]
        entries.append((_normal(parsed.name), Version(version), parsed.marker,
                        [h.strip() for h in hashes]))
    return entries


def test_every_pi_requirement_is_pinned_with_hashes_for_both_pythons() -> None:
    pins = _pins(pi_wheels.LOCK.read_text())
    assert all(hashes and all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in hashes) for *_, hashes in pins)
    for python in pi_wheels.PYTHONS:
        environment = pi_wheels.marker_environment(python)
        active = {name: version for name, version, marker, _ in pins
                  if marker is None or marker.evaluate(environment)}
        assert len(active) == len({n for n, _, m, _ in pins if m is None or m.evaluate(environment)})
        for line in pi_wheels.pi_requirements() + list(pi_wheels.NO_DEPS):
            requirement = Requirement(line)
            name = _normal(requirement.name)
            assert name in active, f"{line} is not locked for CPython {python}: run tools/pi_wheels.py lock"
            assert requirement.specifier.contains(active[name], prereleases=True), (
                f"requirements-pi.txt pins {name}=={active[name]}, setup.cfg wants {line}")
    assert "spidev" not in {name for name, *_ in pins}


def test_the_pi_requirements_are_install_requires_plus_the_pi_extras(tmp_path) -> None:
    setup_cfg = tmp_path / "setup.cfg"
    setup_cfg.write_text("[options]\ninstall_requires =\n    numpy>=1.24\n    # a comment\n    pyyaml>=6  # why\n"
                         "[options.extras_require]\npi =\n    gpiod>=2.0\ninky =\n    gpiod>=2.0\n    smbus2\n"
                         "buttons =\n    gpiozero>=2.0\ntest =\n    pytest\n")
    assert pi_wheels.pi_requirements(setup_cfg) == ["numpy>=1.24", "pyyaml>=6", "gpiod>=2.0", "smbus2",
                                                    "gpiozero>=2.0"]


def _wheel(folder: Path, name: str, content: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(content)
    return path


def test_lock_text_merges_pythons_and_marks_what_differs(tmp_path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    resolutions = [
        pi_wheels.Resolution("3.11", [_wheel(a, "numpy-2.4.6-cp311-cp311-manylinux_2_28_aarch64.whl", b"1"),
                                      _wheel(a, "Flask-3.1.3-py3-none-any.whl", b"f")]),
        pi_wheels.Resolution("3.13", [_wheel(b, "numpy-2.5.5-cp313-cp313-manylinux_2_28_aarch64.whl", b"3"),
                                      _wheel(b, "Flask-3.1.3-py3-none-any.whl", b"f")]),
    ]
    pins = _pins(pi_wheels.lock_text(resolutions))
    assert [(name, str(version), str(marker) if marker else None, len(hashes)) for name, version, marker, hashes
            in pins] == [("flask", "3.1.3", None, 1), ("numpy", "2.4.6", 'python_version == "3.11"', 1),
                         ("numpy", "2.5.5", 'python_version == "3.13"', 1)]
