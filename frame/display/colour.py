"""Colour maths for e-paper: sRGB <-> linear light, CIE XYZ/Lab, and colour differences.

Why here and not Pillow: dithering has to add and subtract light, which only works in linear RGB, and
judging how close a panel gets to a picture needs a perceptual distance (CIEDE2000). Everything is
vectorised numpy on float arrays whose last axis is the three channels.
"""

from __future__ import annotations

import numpy as np

# sRGB (D65) primaries to CIE XYZ, IEC 61966-2-1.
_RGB_TO_XYZ = np.array([
    [0.4124564, 0.3575761, 0.1804375],
    [0.2126729, 0.7151522, 0.0721750],
    [0.0193339, 0.1191920, 0.9503041],
])
_WHITE_D65 = _RGB_TO_XYZ.sum(axis=1)
LUMINANCE = _RGB_TO_XYZ[1]


def srgb_to_linear(srgb: np.ndarray) -> np.ndarray:
    """Gamma-encoded sRGB in 0..1 to linear light in 0..1 (exact piecewise curve)."""
    srgb = np.asarray(srgb, dtype=np.float32)
    return np.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4).astype(np.float32)


def linear_to_srgb(linear: np.ndarray) -> np.ndarray:
    """Linear light in 0..1 to gamma-encoded sRGB in 0..1 (values outside 0..1 are clipped)."""
    linear = np.clip(np.asarray(linear, dtype=np.float32), 0.0, 1.0)
    return np.where(linear <= 0.0031308, linear * 12.92,
                    1.055 * linear ** (1 / 2.4) - 0.055).astype(np.float32)


def srgb8_to_linear(rgb8: np.ndarray) -> np.ndarray:
    """8-bit sRGB values (any shape, last axis 3) to linear float32."""
    return srgb_to_linear(np.asarray(rgb8, dtype=np.float32) / 255.0)


def linear_to_srgb8(linear: np.ndarray) -> np.ndarray:
    """Linear light to rounded 8-bit sRGB."""
    return np.round(linear_to_srgb(linear) * 255.0).astype(np.uint8)


def _lab_f(t: np.ndarray) -> np.ndarray:
    delta = 6.0 / 29.0
    return np.where(t > delta**3, np.cbrt(t), t / (3 * delta**2) + 4.0 / 29.0)


def _lab_f_inv(t: np.ndarray) -> np.ndarray:
    delta = 6.0 / 29.0
    return np.where(t > delta, t**3, 3 * delta**2 * (t - 4.0 / 29.0))


def linear_to_lab(linear: np.ndarray) -> np.ndarray:
    """Linear RGB to CIE L*a*b* (D65 white = linear (1, 1, 1))."""
    xyz = np.asarray(linear, dtype=np.float32) @ _RGB_TO_XYZ.T.astype(np.float32)
    f = _lab_f(xyz / _WHITE_D65.astype(np.float32))
    lightness = 116.0 * f[..., 1] - 16.0
    a = 500.0 * (f[..., 0] - f[..., 1])
    b = 200.0 * (f[..., 1] - f[..., 2])
    return np.stack([lightness, a, b], axis=-1).astype(np.float32)


def lab_to_linear(lab: np.ndarray) -> np.ndarray:
    """CIE L*a*b* back to linear RGB (may fall outside 0..1 for colours sRGB cannot show)."""
    lab = np.asarray(lab, dtype=np.float32)
    fy = (lab[..., 0] + 16.0) / 116.0
    fx = fy + lab[..., 1] / 500.0
    fz = fy - lab[..., 2] / 200.0
    xyz = np.stack([_lab_f_inv(fx), _lab_f_inv(fy), _lab_f_inv(fz)], axis=-1) * _WHITE_D65
    return (xyz @ np.linalg.inv(_RGB_TO_XYZ).T).astype(np.float32)


def srgb8_to_lab(rgb8: np.ndarray) -> np.ndarray:
    """8-bit sRGB to CIE L*a*b*."""
    return linear_to_lab(srgb8_to_linear(rgb8))


def luminance(linear: np.ndarray) -> np.ndarray:
    """Relative luminance Y of linear RGB."""
    return np.asarray(linear, dtype=np.float32) @ LUMINANCE.astype(np.float32)


def delta_e76(lab1: np.ndarray, lab2: np.ndarray) -> np.ndarray:
    """Euclidean distance in Lab (CIE 1976)."""
    return np.sqrt(np.sum((np.asarray(lab1) - np.asarray(lab2)) ** 2, axis=-1))


def delta_e2000(lab1: np.ndarray, lab2: np.ndarray) -> np.ndarray:
    """CIEDE2000 colour difference (Sharma, Wu & Dalal 2005 formulation, kL = kC = kH = 1)."""
    lab1 = np.asarray(lab1, dtype=np.float64)
    lab2 = np.asarray(lab2, dtype=np.float64)
    l1, a1, b1 = lab1[..., 0], lab1[..., 1], lab1[..., 2]
    l2, a2, b2 = lab2[..., 0], lab2[..., 1], lab2[..., 2]
    # 1. Chroma-dependent stretch of a* (G factor).
    c_mean = (np.hypot(a1, b1) + np.hypot(a2, b2)) / 2.0
    g = 0.5 * (1.0 - np.sqrt(c_mean**7 / (c_mean**7 + 25.0**7)))
    a1p, a2p = a1 * (1.0 + g), a2 * (1.0 + g)
    c1p, c2p = np.hypot(a1p, b1), np.hypot(a2p, b2)
    h1p = np.degrees(np.arctan2(b1, a1p)) % 360.0
    h2p = np.degrees(np.arctan2(b2, a2p)) % 360.0
    # 2. Differences in lightness, chroma and hue.
    dlp = l2 - l1
    dcp = c2p - c1p
    dh = h2p - h1p
    dh = np.where(dh > 180.0, dh - 360.0, np.where(dh < -180.0, dh + 360.0, dh))
    dh = np.where(c1p * c2p == 0.0, 0.0, dh)
    dhp = 2.0 * np.sqrt(c1p * c2p) * np.sin(np.radians(dh) / 2.0)
    # 3. Means used by the weighting functions.
    lp_mean = (l1 + l2) / 2.0
    cp_mean = (c1p + c2p) / 2.0
    h_sum = h1p + h2p
    hp_mean = np.where(np.abs(h1p - h2p) > 180.0,
                       np.where(h_sum < 360.0, h_sum + 360.0, h_sum - 360.0), h_sum) / 2.0
    hp_mean = np.where(c1p * c2p == 0.0, h_sum, hp_mean)
    t = (1.0 - 0.17 * np.cos(np.radians(hp_mean - 30.0)) + 0.24 * np.cos(np.radians(2.0 * hp_mean))
         + 0.32 * np.cos(np.radians(3.0 * hp_mean + 6.0)) - 0.20 * np.cos(np.radians(4.0 * hp_mean - 63.0)))
    # 4. Weights and the rotation term for blues.
    s_l = 1.0 + 0.015 * (lp_mean - 50.0) ** 2 / np.sqrt(20.0 + (lp_mean - 50.0) ** 2)
    s_c = 1.0 + 0.045 * cp_mean
    s_h = 1.0 + 0.015 * cp_mean * t
    d_theta = 30.0 * np.exp(-(((hp_mean - 275.0) / 25.0) ** 2))
    r_c = 2.0 * np.sqrt(cp_mean**7 / (cp_mean**7 + 25.0**7))
    r_t = -np.sin(np.radians(2.0 * d_theta)) * r_c
    return np.sqrt((dlp / s_l) ** 2 + (dcp / s_c) ** 2 + (dhp / s_h) ** 2
                   + r_t * (dcp / s_c) * (dhp / s_h))
