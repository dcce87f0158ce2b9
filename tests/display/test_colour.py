"""Colour maths against published reference values."""

from __future__ import annotations

import numpy as np
import pytest

from frame.display import colour

# Sharma, Wu & Dalal (2005), "The CIEDE2000 color-difference formula", Table 1 (selected pairs).
SHARMA = [
    ((50.0, 2.6772, -79.7751), (50.0, 0.0, -82.7485), 2.0425),
    ((50.0, 3.1571, -77.2803), (50.0, 0.0, -82.7485), 2.8615),
    ((50.0, 2.8361, -74.0200), (50.0, 0.0, -82.7485), 3.4412),
    ((50.0, 0.0, 0.0), (50.0, -1.0, 2.0), 2.3669),
    ((50.0, 2.5, 0.0), (73.0, 25.0, -18.0), 27.1492),
    ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644),
]


@pytest.mark.parametrize("lab1,lab2,expected", SHARMA)
def test_ciede2000_matches_sharma_table(lab1, lab2, expected) -> None:
    assert colour.delta_e2000(np.array(lab1), np.array(lab2)) == pytest.approx(expected, abs=1e-4)
    assert colour.delta_e2000(np.array(lab2), np.array(lab1)) == pytest.approx(expected, abs=1e-4)


def test_srgb_linear_round_trip_and_known_points() -> None:
    values = np.linspace(0, 1, 101, dtype=np.float32)
    assert np.allclose(colour.linear_to_srgb(colour.srgb_to_linear(values)), values, atol=1e-5)
    assert colour.srgb8_to_linear(np.array([128]))[0] == pytest.approx(0.2158605, abs=1e-5)


def test_lab_of_white_black_and_round_trip() -> None:
    lab = colour.srgb8_to_lab(np.array([[255, 255, 255], [0, 0, 0], [255, 0, 0]]))
    assert lab[0] == pytest.approx([100.0, 0.0, 0.0], abs=0.01)
    assert lab[1] == pytest.approx([0.0, 0.0, 0.0], abs=0.01)
    assert lab[2] == pytest.approx([53.24, 80.09, 67.20], abs=0.05)  # sRGB red, standard value
    rng = np.random.default_rng(0)
    linear = rng.random((50, 3)).astype(np.float32)
    assert np.allclose(colour.lab_to_linear(colour.linear_to_lab(linear)), linear, atol=1e-4)
    assert colour.delta_e76(lab[0], lab[1]) == pytest.approx(100.0, abs=0.01)
