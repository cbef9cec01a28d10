"""make bench's regression guard (bench/compare.py) on figures written by bench/results.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def record(path: Path, **figures: tuple[float, str]) -> None:
    for name, (value, better) in figures.items():
        subprocess.run([sys.executable, "-c", f"from results import record; record({name!r}, {value}, 'x', {better!r})"],
                       cwd=ROOT / "bench", env={**os.environ, "ENDSTATE_BENCH_RESULTS": str(path)}, check=True)


def compare(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "bench" / "compare.py"), *map(str, args)],
                          capture_output=True, text=True)


def test_a_figure_worse_than_its_tolerance_fails_and_better_ones_pass(tmp_path):
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps({
        "a": {"value": 1.0, "unit": "x", "better": "lower", "tolerance": 0.2},
        "b": {"value": 2.0, "unit": "x", "better": "higher", "tolerance": 0.1}}))
    ok = tmp_path / "ok.json"
    record(ok, a=(1.19, "lower"), b=(1.84, "higher"))
    result = compare(ok, "--baseline", baseline)
    assert result.returncode == 0, result.stderr
    assert "REGRESSION" not in result.stdout and "+19%" in result.stdout and "-8%" in result.stdout
    slow = tmp_path / "slow.json"
    record(slow, a=(1.21, "lower"), b=(2.5, "higher"))
    result = compare(slow, "--baseline", baseline)
    assert result.returncode == 1 and "1 figure(s) regressed" in result.stderr
    assert [line.split()[-1] for line in result.stdout.splitlines()[1:]] == ["REGRESSION", "better"]


def test_a_baselined_figure_the_run_did_not_record_fails(tmp_path):
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps({"a": {"value": 1.0, "unit": "x", "better": "lower"},
                                    "gone": {"value": 1.0, "unit": "x", "better": "lower"}}))
    run = tmp_path / "run.json"
    record(run, a=(1.0, "lower"))
    result = compare(run, "--baseline", baseline)
    assert result.returncode == 1 and "NOT MEASURED" in result.stdout and "gone" in result.stderr


def test_update_from_several_runs_takes_the_median_and_twice_the_spread(tmp_path):
    runs = []
    for i, value in enumerate((1.0, 1.1, 1.3)):
        runs.append(tmp_path / f"run{i}.json")
        record(runs[-1], a=(value, "lower"), steady=(5.0, "higher"))
    baseline = tmp_path / "baseline.json"
    assert compare(runs[0], "--baseline", baseline, "--update", "--noise", *runs[1:]).returncode == 0
    written = json.loads(baseline.read_text())
    assert written["a"]["value"] == 1.1 and written["a"]["tolerance"] == round(2 * 0.3 / 1.1, 2)
    assert written["steady"]["tolerance"] == 0.1  # no spread: the floor
    assert compare(runs[2], "--baseline", baseline).returncode == 0  # within its own noise


def test_update_never_narrows_a_recorded_tolerance(tmp_path):
    """Two close runs say little about the noise: a tolerance earlier runs widened stays."""
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps({"a": {"value": 1.0, "unit": "ms", "better": "lower",
                                          "tolerance": 1.1}}))
    runs = []
    for i, value in enumerate((0.66, 0.68)):
        runs.append(tmp_path / f"run{i}.json")
        record(runs[-1], a=(value, "lower"))
    assert compare(runs[0], "--baseline", baseline, "--update", "--noise", runs[1]).returncode == 0
    written = json.loads(baseline.read_text())["a"]
    assert written["value"] == 0.67 and written["tolerance"] == 1.1


def test_a_baseline_that_is_missing_empty_or_holds_nothing_is_not_a_pass(tmp_path):
    run = tmp_path / "run.json"
    record(run, a=(1.0, "lower"))
    for name, text in (("missing.json", None), ("empty.json", ""), ("nothing.json", "{}")):
        baseline = tmp_path / name
        if text is not None:
            baseline.write_text(text)
        result = compare(run, "--baseline", baseline)
        assert result.returncode == 2, (name, result.stderr)
        assert "--update" in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_figures_that_are_not_finite_or_not_json_are_their_own_exit_code(tmp_path):
    """4, not 1 (a regression) and not 0: NaN compares false against every tolerance, so a NaN
    baseline value, tolerance or result used to pass."""
    good = {"value": 1.0, "unit": "x", "better": "lower", "tolerance": 0.2}
    run = tmp_path / "run.json"
    record(run, a=(1.0, "lower"))
    cases = {"nan value": ({"a": {**good, "value": float("nan")}}, run),
             "nan tolerance": ({"a": {**good, "tolerance": float("nan")}}, run),
             "infinite value": ({"a": {**good, "value": float("inf")}}, run)}
    for what, (baseline_figures, results) in cases.items():
        baseline = tmp_path / "baseline.json"
        baseline.write_text(json.dumps(baseline_figures))  # json writes NaN and Infinity as such
        result = compare(results, "--baseline", baseline)
        assert result.returncode == 4, (what, result.stdout, result.stderr)
        assert "is not a finite number" in result.stderr or "not a number" in result.stderr, result.stderr
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps({"a": good}))
    nan_run = tmp_path / "nan_run.json"
    nan_run.write_text(json.dumps({"a": {**good, "value": float("nan")}}))
    result = compare(nan_run, "--baseline", baseline)
    assert result.returncode == 4 and f"{nan_run}: the results is not JSON" in result.stderr, result.stderr
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"a": {"value": 1.0,')
    for args in ((corrupt, "--baseline", baseline), (run, "--baseline", corrupt)):
        result = compare(*args)
        assert result.returncode == 4 and "is not JSON" in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
