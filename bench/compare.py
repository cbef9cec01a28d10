"""Set a `make bench` run's figures against the committed baseline; exit 1 on a regression.

Each baseline figure has a tolerance, chosen from the noise of repeated runs on an idle 2-core box
(docs/benchmarks.md): a figure that is worse than the baseline by more than its tolerance (as a
fraction of the baseline) is a regression, and so is a baselined figure the run did not record.
Better than the baseline by more than the tolerance is reported as an improvement: refresh the
baseline with --update (it keeps each tolerance, or widens it to what --noise runs show; narrow
one by hand) and commit it.

    python bench/compare.py out/bench/results.json [--baseline bench/baseline.json] [--update]

Exit codes: 0 no regression; 1 a figure regressed or went unmeasured; 2 nothing to compare (no
results, or a baseline that is missing, empty or holds no figure: `--update` makes one); 4 a file
that is not a guard's figures (not JSON, not an object of figures, a value or tolerance that is
not a finite number).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_TOLERANCE = 0.25
MIN_TOLERANCE = 0.10
NOTHING_TO_COMPARE, NOT_FIGURES = 2, 4


class Unusable(Exception):
    """A results or baseline file the guard cannot judge by; `code` is the exit code."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


def load(path: Path, what: str, needed: bool = True) -> dict:
    """The figures of a results or baseline file, each checked: a finite `value` (positive in a
    baseline: changes are fractions of it) and, if given, a finite non-negative `tolerance`. An
    absent or empty file is {} unless `needed`."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        if needed:
            fix = "run make bench" if what == "results" else "make one with --update"
            raise Unusable(f"no {what} at {path}; {fix}", NOTHING_TO_COMPARE) from None
        return {}
    except (OSError, UnicodeDecodeError) as e:
        raise Unusable(f"{path}: cannot read the {what} ({e})", NOT_FIGURES) from None
    if not text.strip():
        if needed:
            raise Unusable(f"the {what} {path} is empty; "
                           + ("run make bench" if what == "results" else "make one with --update"),
                           NOTHING_TO_COMPARE)
        return {}
    try:
        figures = json.loads(text, parse_constant=_no_constant)
    except ValueError as e:
        raise Unusable(f"{path}: the {what} is not JSON ({e})", NOT_FIGURES) from None
    if not isinstance(figures, dict):
        raise Unusable(f"{path}: the {what} is not an object of figures", NOT_FIGURES)
    for name, fig in figures.items():
        problem = _figure_problem(fig, baseline=what == "baseline")
        if problem:
            raise Unusable(f"{path}: {what} figure {name!r}: {problem}", NOT_FIGURES)
    return figures


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number")


def _figure_problem(fig, baseline: bool) -> str | None:
    if not isinstance(fig, dict):
        return "not an object with value, unit and better"
    value = fig.get("value")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return f"value {value!r} is not a finite number"
    if baseline and value <= 0:
        return f"value {value!r}: a baseline value must be positive (changes are fractions of it)"
    tolerance = fig.get("tolerance", DEFAULT_TOLERANCE)
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) \
            or not math.isfinite(tolerance) or tolerance < 0:
        return f"tolerance {tolerance!r} is not a finite non-negative number"
    if fig.get("better") not in ("lower", "higher"):
        return f"better is {fig.get('better')!r}, not 'lower' or 'higher'"
    return None


def verdicts(results: dict, baseline: dict) -> list[tuple[str, str, str, str, str, str]]:
    """(figure, baseline, now, change, tolerance, verdict) per baselined figure."""
    rows = []
    for name, base in sorted(baseline.items()):
        tolerance = base.get("tolerance", DEFAULT_TOLERANCE)
        now = results.get(name)
        if now is None:
            rows.append((name, f"{base['value']:g}", "-", "-", f"{tolerance:.0%}", "NOT MEASURED"))
            continue
        change = (now["value"] - base["value"]) / base["value"]
        worse = change if base["better"] == "lower" else -change
        verdict = "REGRESSION" if worse > tolerance else "better" if worse < -tolerance else "ok"
        rows.append((name, f"{base['value']:g} {base['unit']}", f"{now['value']:g}",
                     f"{change:+.0%}", f"{tolerance:.0%}", verdict))
    return rows


def from_runs(values: list[float]) -> dict:
    """A figure measured several times: its median, and twice the runs' spread around it (at
    least MIN_TOLERANCE) as the tolerance, so that noise alone fails the guard rarely."""
    values = sorted(values)
    median = statistics.median(values)
    spread = (values[-1] - values[0]) / median if median else 0.0
    return {"value": round(median, 4), "tolerance": round(max(MIN_TOLERANCE, 2 * spread), 2),
            "runs": len(values)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--baseline", type=Path, default=HERE / "baseline.json")
    ap.add_argument("--update", action="store_true",
                    help="write the run's figures as the new baseline, keeping each tolerance")
    ap.add_argument("--noise", type=Path, nargs="+", metavar="RESULTS",
                    help="with --update: more runs' results; the baseline is each figure's median "
                         "over all runs and its tolerance twice their spread (at least 10%%, "
                         "and never below the tolerance it had)")
    args = ap.parse_args()
    try:
        return run(args)
    except Unusable as e:
        print(f"compare: {e}", file=sys.stderr)
        return e.code


def run(args) -> int:
    results = load(args.results, "results")
    baseline = load(args.baseline, "baseline", needed=not args.update)
    if args.update:
        runs = [results, *(load(p, "results") for p in args.noise or ())]
        merged = {name: {**fig, "tolerance": baseline.get(name, {}).get("tolerance", DEFAULT_TOLERANCE)}
                  for name, fig in results.items()}
        for name, fig in merged.items():
            values = [r[name]["value"] for r in runs if name in r]
            if len(values) > 1:  # measured once: its tolerance stays as it was (or the default)
                recorded = baseline.get(name, {}).get("tolerance", 0.0)
                fig.update(from_runs(values))
                # a few runs understate the noise that earlier ones showed: never narrower
                fig["tolerance"] = max(fig["tolerance"], recorded)
        args.baseline.write_text(json.dumps(merged, indent=1, sort_keys=True) + "\n")
        print(f"compare: wrote {len(merged)} figure(s) to {args.baseline}", file=sys.stderr)
        return 0
    if not baseline:
        raise Unusable(f"the baseline {args.baseline} holds no figure: nothing would be compared "
                       "(make one with --update)", NOTHING_TO_COMPARE)
    rows = verdicts(results, baseline)
    header = ("figure", "baseline", "now", "change", "tolerance", "verdict")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)))
    bad = [r[0] for r in rows if r[5] in ("REGRESSION", "NOT MEASURED")]
    if bad:
        print(f"compare: {len(bad)} figure(s) regressed past their tolerance or went unmeasured: "
              f"{', '.join(bad)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
