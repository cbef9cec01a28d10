"""Text that reads on its background: WCAG 2 relative luminance and contrast ratio.

A label on a coloured cell (a heatmap) takes black or white, whichever contrasts more with the
cell; the better of the two always reaches 4.58:1, above WCAG's 4.5:1 for normal text.
"""

from __future__ import annotations

from collections.abc import Sequence

BLACK, WHITE = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)
AA = 4.5  # WCAG 2 level AA for normal text


def _linear(channel: float) -> float:
    return channel / 12.92 if channel <= 0.04045 else ((channel + 0.055) / 1.055) ** 2.4


def luminance(rgb: Sequence[float]) -> float:
    """Relative luminance of an sRGB colour with channels in [0, 1] (WCAG 2)."""
    r, g, b = (_linear(c) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_ratio(a: Sequence[float], b: Sequence[float]) -> float:
    """(L_lighter + 0.05) / (L_darker + 0.05): 1 (no contrast) to 21 (black on white)."""
    la, lb = luminance(a), luminance(b)
    return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)


def text_colour(background: Sequence[float]) -> tuple[float, float, float]:
    """Black or white, whichever contrasts more with `background` (RGB in [0, 1])."""
    return BLACK if contrast_ratio(BLACK, background) >= contrast_ratio(WHITE, background) else WHITE
