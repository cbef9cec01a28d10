"""The posterior figure of task difficulty: each task's Beta posterior density, coloured by the
band it was placed in, with the band edges drawn (one panel per policy or run)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

# Okabe–Ito: told apart by colour-blind readers, dark enough for thin lines on white.
BAND_COLOURS = ("#D55E00", "#E69F00", "#009E73", "#0072B2", "#CC79A7", "#56B4E9", "#000000")


class Posterior(NamedTuple):
    """One task's posterior Beta(alpha, beta) and its band."""

    task_id: str
    alpha: float
    beta: float
    band: str


def band_colours(names: Sequence[str]) -> dict[str, str]:
    return {name: BAND_COLOURS[i % len(BAND_COLOURS)] for i, name in enumerate(names)}


def posterior_figure(panels: Sequence[tuple[str, Sequence[Posterior]]], edges: Sequence[float],
                     names: Sequence[str]):
    """A matplotlib Figure: per panel (title, posteriors), each density on (0, 1) in its band's
    colour; the edges as dashed lines, each band's colour and name (with its count of tasks)
    along the top. A Beta(½, ·) density is infinite at 0: the y axis stops above the highest
    peak inside (0.03, 0.97), so the spikes of never-solved tasks do not flatten the others."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from scipy.stats import beta as beta_dist

    colours = band_colours(names)
    x = np.linspace(0.0005, 0.9995, 800)
    inner = (x > 0.03) & (x < 0.97)
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 2.6 * len(panels) + 0.6), dpi=110,
                             squeeze=False)
    for ax, (title, posteriors) in zip(axes[:, 0], panels):
        peaks = []
        for p in posteriors:
            density = beta_dist.pdf(x, p.alpha, p.beta)
            peaks.append(float(np.max(density[inner])))
            ax.plot(x, density, color=colours.get(p.band, "#555555"), alpha=0.75, lw=1.2)
        ax.set_ylim(0, max(4.0, max(peaks, default=0.0) * 1.15))
        ax.set_xlim(0, 1)
        for edge in edges:
            ax.axvline(edge, color="#444444", ls="--", lw=0.8)
        bounds = [0.0, *edges, 1.0]
        for name, lo, hi in zip(names, bounds, bounds[1:]):
            count = sum(1 for p in posteriors if p.band == name)
            ax.axvspan(lo, hi, ymin=0.96, ymax=1.0, color=colours[name], lw=0)
            ax.text((lo + hi) / 2, 1.01, f"{name} ({count})", transform=ax.get_xaxis_transform(),
                    ha="center", va="bottom", fontsize=7, color="black")
        ax.set_title(f"{title}: {len(posteriors)} tasks", fontsize=9, pad=16)
        ax.set_ylabel("density")
        ax.spines[["top", "right"]].set_visible(False)
    axes[-1, 0].set_xlabel("success probability (Beta posterior of each task)")
    fig.tight_layout()
    return fig
