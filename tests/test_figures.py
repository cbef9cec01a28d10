"""Every picture the tools draw reads at a glance: each kind is rendered from a fixture and
every label drawn on it (heatmap cells, bar counts, point names, band names) has a WCAG
contrast ratio of at least 4.5 against what is behind it, read from the rendered pixels."""

from __future__ import annotations

import math

import numpy as np
import orjson
import pytest
from click.testing import CliRunner
from matplotlib.colors import to_rgb
from study import BASE, TRAINED, study, write

from endstate.core.figures.contrast import AA, BLACK, WHITE, contrast_ratio, text_colour
from endstate.evalstats.cli import cli


def labels_and_contrast(fig) -> list[tuple[str, float]]:
    """(text, contrast ratio) of every text drawn inside an axes: its colour against the most
    common colour of the pixels its box covers (the background; glyphs cover far fewer)."""
    fig.canvas.draw()
    rgba = np.asarray(fig.canvas.buffer_rgba())
    height, width = rgba.shape[:2]
    renderer = fig.canvas.get_renderer()
    out = []
    for ax in fig.axes:
        for text in ax.texts:
            if not text.get_visible() or not text.get_text().strip():
                continue
            box = text.get_window_extent(renderer)
            x0, x1 = max(int(box.x0), 0), min(math.ceil(box.x1), width)
            y0, y1 = max(int(height - box.y1), 0), min(math.ceil(height - box.y0), height)
            pixels = rgba[y0:y1, x0:x1, :3].reshape(-1, 3)
            colours, counts = np.unique(pixels, axis=0, return_counts=True)
            background = colours[counts.argmax()] / 255
            out.append((text.get_text(), contrast_ratio(to_rgb(text.get_color()), background)))
    return out


@pytest.fixture(scope="module")
def objects(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("figures")
    base, trained, graded = study()
    paths = [write(tmp / "b.jsonl", base), write(tmp / "t.jsonl", trained),
             write(tmp / "g.jsonl", graded)]

    def run(*args):
        result = CliRunner().invoke(cli, list(args))
        assert result.exit_code == 0, result.output
        return result.stdout

    same = write(tmp / "same.jsonl", [{**r, "model": "copy"} for r in base])
    return {
        "metrics": orjson.loads(run("--by", "policy", "--by", "domain", *paths[:2])),
        "compare": orjson.loads(run("compare", "--by", "domain", *paths[:2])),
        "no_change": orjson.loads(run("compare", "--by", "domain", paths[0], same)),
        "tally": [orjson.loads(x) for x in run("tally", "--graded", paths[2], *paths[:2]).splitlines()],
        "bucket": [orjson.loads(x) for x in CliRunner().invoke(
            __import__("endstate.bucket.cli", fromlist=["cli"]).cli,
            ["--all", paths[0]]).stdout.splitlines()],
    }


def figures(o):
    from endstate.bucket import report as bucket_report
    from endstate.core.stats.bands import Bands
    from endstate.evalstats import figures as F
    from endstate.grpo.plot import figure as training

    rows = [{"step": s, "reward_mean": 0.1 * s, "zero_variance_frac": 0.5, "loss": 0.0 if s % 2 else 0.1,
             "grad_norm": 0.0 if s % 2 else 1.0, "entropy": None if s % 2 else 1.2,
             "tokens_per_s": 0.0 if s % 2 else 400.0, "skipped": bool(s % 2)} for s in range(5)]
    return {
        "summary --plot": F.metrics_figure(o["metrics"], [(BASE, TRAINED)]),
        "compare --plot": F.compare_figure(o["compare"]),
        "compare --plot, no change": F.compare_figure(o["no_change"]),
        "policy × domain": F.cross_figure(o["metrics"], "policy", "domain"),
        "frontier": F.frontier_figure(o["metrics"]["by_policy"], [(BASE, TRAINED)]),
        "domains": F.domains_figure(o["metrics"]),
        "outcomes": F.outcomes_figure(o["tally"]),
        "outcomes of two tasks": F.outcomes_figure(o["tally"], ["bank-task-3", "travel-task-1"]),
        "posteriors": F.posteriors_figure(o["tally"]),
        "bucket --plot": bucket_report.figure(o["bucket"], Bands().names),
        "bucket --posteriors": bucket_report.posteriors_figure(o["bucket"], Bands()),
        "grpo --plot": training(rows),
    }


def test_every_label_contrasts_with_what_is_behind_it(objects):
    import matplotlib.pyplot as plt

    checked = 0
    for name, fig in figures(objects).items():
        for text, ratio in labels_and_contrast(fig):
            assert ratio >= AA, f"{name}: {text!r} has contrast {ratio:.2f} < {AA}"
            checked += 1
        plt.close(fig)
    assert checked > 100  # the heatmaps' cells, the bars' counts, the points' and bands' names


def test_a_comparison_without_change_labels_its_cells_in_black():
    """Δ = 0 everywhere drew white labels on near-white cells (the colour scale collapsed)."""
    assert text_colour((0.97, 0.97, 0.97)) == BLACK and text_colour((0.1, 0.2, 0.5)) == WHITE
    assert contrast_ratio(BLACK, WHITE) == pytest.approx(21.0)


def test_the_frontier_draws_an_arrow_from_base_to_trained(objects):
    from endstate.evalstats import figures as F

    fig = F.frontier_figure(objects["metrics"]["by_policy"], [(BASE, TRAINED)])
    arrows = [t for t in fig.axes[0].texts if getattr(t, "arrow_patch", None) is not None]
    base, new = (objects["metrics"]["by_policy"][m] for m in (BASE, TRAINED))
    assert len(arrows) == 1
    assert arrows[0].xy == (new["pass_at_1"], new["cost"]["per_success_usd"])
    assert arrows[0].xyann == (base["pass_at_1"], base["cost"]["per_success_usd"])


def test_training_curves_leave_skipped_steps_out_and_count_steps_in_integers(objects):
    from endstate.grpo.plot import figure as training

    rows = [{"step": s, "loss": 0.0 if s == 1 else 0.2, "tokens_per_s": 0.0 if s == 1 else 300.0,
             "reward_mean": 0.5, "skipped": s == 1} for s in range(3)]
    fig = training(rows)
    axes = {ax.get_title(): ax for ax in fig.axes}
    for title in ("loss", "update tokens/s"):
        y = axes[title].lines[0].get_ydata()
        assert math.isnan(y[1]) and not math.isnan(y[0]), title
        fig.canvas.draw()
        ticks = [t for t in axes[title].get_xticks() if axes[title].get_xlim()[0] <= t <= axes[title].get_xlim()[1]]
        assert all(float(t).is_integer() for t in ticks), ticks
    assert axes["reward (all clean episodes)"].lines[0].get_ydata()[1] == 0.5  # rollouts did happen


def test_long_policy_names_stay_told_apart():
    from endstate.evalstats.figures import shorts

    names = ["SmolLM2-135M-Instruct", "out/demo-learn/seed-0/grpo/checkpoints/step-10/hf",
             "out/demo-learn/seed-1/grpo/checkpoints/step-10/hf"]
    assert list(shorts(names).values()) == ["SmolLM2-135M-Instruct", "seed-0/…/step-10/hf",
                                            "seed-1/…/step-10/hf"]
