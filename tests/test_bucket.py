"""bucket: band masses, assignment, selection rules, and every flag of the CLI."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import msgspec
import orjson
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from numerics import gamma, incbet_error, stated
from scipy import stats

from endstate.bucket import pool as P
from endstate.bucket.cli import cli
from endstate.core.records.structs import Attempt
from endstate.core.stats.bands import TIE_TOL, Bands, assign, band_masses, posterior

NAMES = ["too_hard", "hard", "medium", "easy", "too_easy"]


def tally(records):
    """P.tally over records as the reader hands them over: decoded as schemas.Attempt."""
    return P.tally(msgspec.convert(r, Attempt) for r in records)


def attempts(task_id, rewards, domain="retail", errors=0):
    rows = [{"task_id": task_id, "domain": domain, "attempt": i, "reward": r, "status": "ok"}
            for i, r in enumerate(rewards)]
    rows += [{"task_id": task_id, "domain": domain, "attempt": len(rewards) + i, "reward": None,
              "status": "system_error"} for i in range(errors)]
    return rows


def task(task_id, domain="retail", instruction="Cancel order 7.", checks=None):
    return {"id": task_id, "domain": domain, "user": {"instruction": instruction, "opening": "hi"},
            "checks": checks or [{"kind": "said", "value": "done"}]}


def write(path, rows):
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return str(path)


def run(args, input=None):
    return CliRunner().invoke(cli, args, input=input)


def lines(text):
    return [orjson.loads(x) for x in text.splitlines() if x.strip()]


# --- masses ---------------------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(st.integers(0, 200).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))),
       st.tuples(st.floats(0.05, 5), st.floats(0.05, 5)))
def test_band_masses_sum_to_one(nk, prior):
    (masses,) = band_masses([posterior(*nk, prior)], Bands().edges)
    assert len(masses) == 5 and all(0 <= m <= 1 for m in masses)
    # differences of CDF values telescope, whatever the CDF's error: 5 subtractions, each rounded
    # at its own result, and 5 additions; a mass clipped at 0 (a CDF out of order by its error)
    # breaks the telescope by at most that error
    clipped = sum(m == 0 for m in masses) * 2 * incbet_error(*posterior(*nk, prior))
    assert sum(masses) == stated(1.0, abs=gamma(10, float) + clipped)


def test_uniform_prior_without_runs_gives_the_band_widths():
    # a mass is a difference of two CDF values ≤ 1, each within incbet_error: 2·that, plus the
    # subtraction's and the decimal literal's roundings
    bound = 2 * incbet_error(2, 1) + gamma(2, float)
    (masses,) = band_masses([posterior(0, 0, (1, 1))], Bands().edges)
    assert masses == stated([0.08, 0.32, 0.20, 0.30, 0.10], abs=bound)
    assert NAMES[assign(masses)] == "hard"
    (masses,) = band_masses([posterior(1, 1, (1, 1))], Bands().edges)  # Beta(2,1): cdf x^2
    assert masses == stated([0.0064, 0.1536, 0.20, 0.45, 0.19], abs=bound)


def test_jeffreys_one_failure_closed_form():
    # Beta(1/2, 3/2): I_x = (2/pi) (asin(sqrt x) + sqrt(x (1 - x)))
    def cdf(x):
        return 2 / math.pi * (math.asin(math.sqrt(x)) + math.sqrt(x * (1 - x)))
    edges = [0, 0.08, 0.40, 0.60, 0.90, 1]
    expected = [cdf(b) - cdf(a) for a, b in itertools.pairwise(edges)]
    (masses,) = band_masses([posterior(1, 0)], Bands().edges)
    assert posterior(1, 0) == (0.5, 1.5)
    # as above; the closed form: asin, two √, a product, a sum and 2/π (each ≤ 1 ulp) at a scale
    # ≤ (2/π)(π/2 + 1/2), differenced
    closed_form = gamma(2 * 8 + 1, float) * 2 * (1 + 1 / math.pi)
    assert masses == stated(expected, abs=2 * incbet_error(0.5, 1.5) + gamma(1, float) + closed_form)
    assert NAMES[assign(masses)] == "hard"  # 0.3925 beats too_hard's 0.3553


def test_exact_ties_go_to_the_harder_band():
    symmetric = Bands((0.25, 0.5, 0.75), ("a", "b", "c", "d"))
    (masses,) = band_masses([posterior(2, 1)], symmetric.edges)  # Beta(1.5, 1.5)
    # equal by symmetry, up to four CDF values' errors (I(.5) twice, I(.25) + I(.75) = 1): well
    # inside TIE_TOL, so this is a tie to assign
    bound = 4 * incbet_error(1.5, 1.5) + gamma(2, float)
    assert masses[1] == stated(masses[2], abs=bound) and bound < TIE_TOL
    assert symmetric.names[assign(masses)] == "b"
    assert assign([0.5, 0.5]) == 0 and assign([0.2, 0.4, 0.4]) == 1
    assert assign([0.3, 0.3 + 1e-9, 0.4 - 1e-9]) == 2  # not a tie


def test_bands_validation():
    for edges, names, message in [((0.5, 0.4), ("a", "b", "c"), "increase"),
                                  ((0.0, 0.5), ("a", "b", "c"), "strictly between"),
                                  ((0.5,), ("a", "b", "c"), "--bands"),
                                  ((0.5,), ("a", "a"), "distinct")]:
        with pytest.raises(ValueError, match=message):
            Bands(edges, names)


# --- selection ------------------------------------------------------------------------------------

def test_assess_reasons_in_order_of_strength():
    counts = tally([*attempts("a", [1, 0, 0, 1, 0, 1, 0, 0], errors=2), *attempts("b", [1, 1]),
                    *attempts("c", [0] * 8), *attempts("d", [1, 0] * 4), *attempts("e", [1, 0] * 4)])
    assert counts["a"] == P.TaskRuns(runs=8, successes=3, system_errors=2, domain="retail",
                                     seen=0b11111111)  # clean attempts 0..7
    ref = tally([*attempts("a", [1]), *attempts("b", [1]), *attempts("c", [1]),
                 *attempts("d", [0, 0])])
    recs = {d["task_id"]: d for d in P.assess(counts, counts, P.Rules(), reference=ref,
                                              overlap=frozenset({"e"}))}
    assert [recs[t]["reason"] for t in "abcde"] == [
        "kept", "insufficient_runs", "band", "unsolved_by_reference", "benchmark_overlap"]
    a = recs["a"]
    assert (a["n"], a["k"], a["system_errors"], a["alpha"], a["beta"]) == (8, 3, 2, 3.5, 5.5)
    assert a["band"] == "hard" and a["keep"] is True and list(a["mass"]) == NAMES
    assert recs["c"]["band"] == "too_hard"


def test_fingerprint_ignores_ids_case_and_spacing():
    a = task("x", instruction="Cancel  order 7.\n")
    assert P.fingerprint(a) == P.fingerprint(task("y", instruction="cancel order 7."))
    assert P.fingerprint(a) != P.fingerprint(task("x", domain="travel"))
    assert P.fingerprint(a) != P.fingerprint(task("x", checks=[{"kind": "said", "value": "no"}]))


def test_holdout_is_stratified_reproducible_and_a_partition():
    recs = [{"task_id": f"t{i:02d}", "domain": "ab"[i % 2], "band": "hm"[i // 20]} for i in range(40)]
    train, hold = P.holdout_split(recs, 0.25, seed=3)
    assert len(hold) == 10 and len(train) == 30
    assert sorted(d["task_id"] for d in train + hold) == [d["task_id"] for d in recs]
    assert {(d["domain"], d["band"]) for d in hold} == {("a", "h"), ("a", "m"), ("b", "h"), ("b", "m")}
    assert P.holdout_split(recs, 0.25, seed=3) == (train, hold)
    assert P.holdout_split(recs, 0.25, seed=4)[1] != hold


# --- CLI ------------------------------------------------------------------------------------------

@pytest.fixture
def files(tmp_path):
    rows = [*attempts("hard-1", [1, 0, 0, 0, 0, 1, 0, 0]), *attempts("easy-1", [1, 1, 1, 0, 1, 1, 1, 1]),
            *attempts("dead-1", [0] * 8, domain="travel"), *attempts("new-1", [1, 0], errors=1),
            *attempts("mid-1", [1, 0] * 4, domain="travel")]
    tasks = [task(t, domain="travel" if t in ("dead-1", "mid-1") else "retail",
                  instruction=f"Do {t}.") for t in ("hard-1", "easy-1", "dead-1", "new-1", "mid-1",
                                                     "never-1")]
    return {"att": write(tmp_path / "att.jsonl", rows), "tasks": write(tmp_path / "tasks.jsonl", tasks),
            "dir": tmp_path}


def test_cli_default_emits_kept_difficulty_records_sorted(files):
    result = run([files["att"]])
    assert result.exit_code == 0, result.output
    out = lines(result.stdout)
    assert [d["task_id"] for d in out] == ["easy-1", "hard-1", "mid-1"]
    assert [d["band"] for d in out] == ["easy", "hard", "medium"]
    assert all(d["keep"] and d["reason"] == "kept" for d in out)
    assert result.stderr == ""


def test_cli_reads_stdin(files):
    with open(files["att"]) as fh:
        result = run([], input=fh.read())
    assert [d["task_id"] for d in lines(result.stdout)] == ["easy-1", "hard-1", "mid-1"]


def test_cli_all_and_min_clean_runs(files):
    out = {d["task_id"]: d for d in lines(run(["--all", files["att"]]).stdout)}
    assert list(out) == ["dead-1", "easy-1", "hard-1", "mid-1", "new-1"]
    from endstate.core.records.schemas import problem
    assert all(problem("difficulty", d) is None for d in out.values())
    assert out["new-1"]["reason"] == "insufficient_runs" and out["new-1"]["system_errors"] == 1
    assert out["dead-1"]["reason"] == "band" and out["dead-1"]["band"] == "too_hard"
    out = lines(run(["--min-clean-runs", "2", files["att"]]).stdout)
    assert "new-1" in [d["task_id"] for d in out]


def test_cli_prior_edges_bands_keep(files):
    out = lines(run(["--all", "--prior", "1,1", files["att"]]).stdout)
    assert out[0]["alpha"] == 1.0 and out[0]["beta"] == 9.0
    out = lines(run(["--all", "--edges", "0.5", "--bands", "lo,hi", "--keep", "hi",
                     files["att"]]).stdout)
    assert {d["task_id"]: d["band"] for d in out}["easy-1"] == "hi"
    assert list(out[0]["mass"]) == ["lo", "hi"]
    assert [d["task_id"] for d in out if d["keep"]] == ["easy-1"]
    kept = lines(run(["--keep", "too_hard", files["att"]]).stdout)
    assert [d["task_id"] for d in kept] == ["dead-1"]


@pytest.mark.parametrize("args, message", [
    (["--edges", "0.2,0.1"], "Invalid value for '--edges': edges must increase strictly"),
    (["--edges", "0.5"], ("Invalid value for '--edges': 1 edges make 2 bands but 0 names were "
                          "given; name them with --bands")),
    (["--edges", "x"], "Invalid value for '--edges': 'x' is not a comma-separated list of numbers"),
    (["--keep", "hard,nope"], ("Invalid value for '--keep': no band named nope; bands: "
                               "too_hard,hard,medium,easy,too_easy")),
    (["--prior", "0,1"], "Invalid value for '--prior': both numbers must be > 0 and at most 10000, e.g. 0.5,0.5"),
    (["--prior", "1"], "Invalid value for '--prior': expected 2 numbers separated by a comma, got '1'"),
    (["--holdout", "0.2"], "--holdout and --holdout-file go together"),
    (["--uncertain", "0.6", "--all"], "--uncertain selects tasks to probe again; it does not combine"),
    (["--all", "--holdout", "0.2", "--holdout-file", "h.jsonl"],
     "--holdout splits the kept pool; drop --all"),
])
def test_cli_usage_errors(files, args, message):
    result = run([*args, files["att"]])
    assert result.exit_code == 2
    assert message in result.stderr


def test_cli_reference(files):
    ref = write(files["dir"] / "ref.jsonl", [*attempts("hard-1", [0, 1]), *attempts("easy-1", [1, 1]),
                                             *attempts("mid-1", [0, 0, 0])])
    out = {d["task_id"]: d["reason"] for d in lines(run(["--all", "--reference", ref,
                                                         files["att"]]).stdout)}
    assert out == {"dead-1": "unsolved_by_reference", "easy-1": "kept", "hard-1": "kept",
                   "mid-1": "unsolved_by_reference", "new-1": "unsolved_by_reference"}
    out = lines(run(["--reference", ref, "--reference-min-successes", "2", files["att"]]).stdout)
    assert [d["task_id"] for d in out] == ["easy-1"]


def test_cli_tasks_emits_task_records_with_difficulty(files):
    result = run(["--tasks", files["tasks"], files["att"]])
    out = lines(result.stdout)
    assert [t["id"] for t in out] == ["easy-1", "hard-1", "mid-1"]
    assert out[0]["user"]["instruction"] == "Do easy-1." and out[0]["difficulty"]["band"] == "easy"
    from endstate.core.records.schemas import problem
    assert all(problem("task", t) is None for t in out)
    every = {t["id"]: t["difficulty"] for t in lines(run(["--all", "--tasks", files["tasks"],
                                                          files["att"]]).stdout)}
    assert every["never-1"]["n"] == 0 and every["never-1"]["reason"] == "insufficient_runs"


def test_cli_tasks_warns_about_attempts_of_unknown_tasks(files):
    tasks = write(files["dir"] / "few.jsonl", [task("hard-1")])
    result = run(["--tasks", tasks, files["att"]])
    assert [t["id"] for t in lines(result.stdout)] == ["hard-1"]
    assert result.stderr == (f"bucket: 4 task id(s) in the attempts are not in {tasks} and are left "
                             "out (first: dead-1)\n")


def test_cli_tasks_duplicate_id_is_bad_input(files):
    tasks = write(files["dir"] / "dup.jsonl", [task("a"), task("a")])
    result = run(["--tasks", tasks, files["att"]])
    assert result.exit_code == 4
    assert result.stderr == (f"{tasks}:2: duplicate task id 'a' (first at {tasks}:1); "
                             "task ids must be unique\n")


def test_cli_exclude_by_id_and_fingerprint(files):
    bench = write(files["dir"] / "bench.jsonl", [
        task("hard-1", instruction="something else"),
        task("bench-9", domain="travel", instruction="  DO mid-1. ")])
    result = run(["--all", "--exclude", bench, "--tasks", files["tasks"], files["att"]])
    out = {t["id"]: t["difficulty"]["reason"] for t in lines(result.stdout)}
    assert out["hard-1"] == "benchmark_overlap" and out["mid-1"] == "benchmark_overlap"
    assert out["easy-1"] == "kept"
    by_id_only = {d["task_id"]: d["reason"] for d in lines(run(["--all", "--exclude", bench,
                                                                files["att"]]).stdout)}
    assert by_id_only["hard-1"] == "benchmark_overlap" and by_id_only["mid-1"] == "kept"


def test_cli_refuses_candidates_of_a_held_out_split_naming_them(files):
    """The leak guard: --tasks is a training pool; bench and ood tasks are refused unless
    --allow-bench says the user means it."""
    held = [{**task(f"b-{i}"), "split": "bench"} for i in range(11)] + \
        [{**task("o-1", domain="insurance"), "split": "ood"}, {**task("t-1"), "split": "train"}]
    tasks = write(files["dir"] / "mixed.jsonl", held)
    result = run(["--tasks", tasks, files["att"]])
    assert result.exit_code == 2
    named = ", ".join(f"b-{i} (bench)" for i in range(10))
    assert result.stderr == (
        f"12 task(s) of a held-out split (bench 11, ood 1) in {tasks} would go into a training "
        f"pool: {named} and 2 more; train on the train split (`grade tasks --split train --full`), "
        "or pass --allow-bench if you mean to train on them\n")
    assert result.stdout == ""
    allowed = run(["--all", "--allow-bench", "--tasks", tasks, files["att"]])
    assert allowed.exit_code == 0 and len(lines(allowed.stdout)) == 13


def test_cli_holdout(files, tmp_path):
    held = tmp_path / "val.jsonl"
    args = ["--keep", "too_hard,hard,medium,easy,too_easy", "--min-clean-runs", "2",
            "--holdout", "0.4", "--holdout-file", str(held), "--seed", "7", files["att"]]
    result = run(args)
    train, hold = lines(result.stdout), lines(held.read_text())
    assert len(train) == 3 and len(hold) == 2
    assert sorted(d["task_id"] for d in train + hold) == ["dead-1", "easy-1", "hard-1", "mid-1",
                                                          "new-1"]
    assert result.stderr == f"bucket: 2 task(s) held out to {held}, 3 for training\n"
    assert lines(run(args).stdout) == train  # reproducible from the seed


def p_keep(n, k, lo=0.08, hi=0.90):
    """P(hard, medium or easy) under Beta(k + 1/2, n - k + 1/2), by scipy.stats."""
    post = stats.beta(k + 0.5, n - k + 0.5)
    return post.cdf(hi) - post.cdf(lo)


def test_uncertain_selects_exactly_the_open_decisions():
    """0/4 (P(keep) 0.40) was not emitted and 4/8 (P(keep) 1.00) was; at n = 20,
    k = 1, 2, 17, 19 (P(keep) 0.35-0.79) were not. Over the whole (n, k) grid the selection is
    exactly 1 - P < P(kept bands) < P (scipy's Beta CDF as the reference)."""
    rows = [r for n in range(1, 21) for k in range(n + 1)
            for r in attempts(f"t{n:02d}-{k:02d}", [1] * k + [0] * (n - k))]
    counts = tally(rows)
    records = P.assess(counts, counts, P.Rules(min_clean_runs=1))
    chosen = {d["task_id"] for d in P.uncertain(records, 0.6, P.Rules(min_clean_runs=1))}
    expected = {f"t{n:02d}-{k:02d}" for n in range(1, 21) for k in range(n + 1)
                if 0.4 < p_keep(n, k) < 0.6}
    assert chosen == expected
    for d in records:  # Σ of 3 masses vs a difference of 2 CDF values, each ≤ 1 within incbet_error
        bound = 4 * incbet_error(d["k"] + 0.5, d["n"] - d["k"] + 0.5) + gamma(5, float)
        assert d["p_keep"] == stated(p_keep(d["n"], d["k"]), abs=bound)
    assert p_keep(8, 4) > 0.99 and "t08-04" not in chosen
    wider = {d["task_id"] for d in P.uncertain(records, 0.8, P.Rules(min_clean_runs=1))}
    assert p_keep(4, 0) == stated(0.40, abs=0.005) and "t04-00" in wider  # the docstring's figure, to 2 places
    assert {"t20-01", "t20-02", "t20-17", "t20-19"} <= wider and "t08-04" not in wider


def test_uncertain_with_keep_if_reopens_what_keep_if_decides_against_the_odds():
    """--keep-if Q with --uncertain P: --keep-if 0.9 drops 2/12 (P(keep) 0.867), which the
    rule 1 − P < P(keep) < P (0.8) left settled although the drop is wrong with probability
    0.867. Open is min(1 − P, Q) < P(keep) < max(P, Q), over the whole (n, k) grid."""
    rows = [r for n in range(1, 21) for k in range(n + 1)
            for r in attempts(f"t{n:02d}-{k:02d}", [1] * k + [0] * (n - k))]
    counts = tally(rows)
    for keep_if in (0.9, 0.1, 0.5):
        rules = P.Rules(min_clean_runs=1, keep_if=keep_if)
        records = P.assess(counts, counts, rules)
        chosen = {d["task_id"] for d in P.uncertain(records, 0.8, rules)}
        lo, hi = min(1 - 0.8, keep_if), max(0.8, keep_if)
        assert chosen == {d["task_id"] for d in records if lo < d["p_keep"] < hi}, keep_if
    assert P.open_range(0.8, 0.9) == (1 - 0.8, 0.9) and P.open_range(0.8, None) == (1 - 0.8, 0.8)
    assert "t12-02" in {d["task_id"] for d in P.uncertain(
        P.assess(counts, counts, P.Rules(min_clean_runs=1, keep_if=0.9)), 0.8,
        P.Rules(min_clean_runs=1, keep_if=0.9))}


def test_cli_posteriors_draws_a_png(files, tmp_path):
    png = tmp_path / "posteriors.png"
    assert run(["--all", "--posteriors", str(png), files["att"]]).exit_code == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_credible_interval_is_the_exact_beta_quantiles():
    counts = tally([*attempts("a", [1, 0, 0, 1, 0]), *attempts("b", [0] * 7)])
    for d in P.assess(counts, counts, P.Rules(prior=(1.0, 1.0))):
        post = stats.beta(d["alpha"], d["beta"])
        # one inverse (betaincinv) each: Cephes incbi's documented peak relative error for
        # .25 ≤ a, b ≤ 100 is 1.8e-13, twice for two implementations
        assert d["credible95"] == stated([post.ppf(0.025), post.ppf(0.975)], rel=2 * 1.8e-13)
        assert d["credible95"][0] < d["k"] / d["n"] * (1 + 2 * 1.8e-13 + gamma(1, float)) or d["k"] == 0


def test_cli_uncertain_selects_unsettled_tasks(files):
    result = run(["--uncertain", "0.6", files["att"]])
    out = {d["task_id"] for d in lines(result.stdout)}
    every = {d["task_id"]: d for d in lines(run(["--all", files["att"]]).stdout)}
    expected = {t for t, d in every.items() if 0.4 < d["p_keep"] < 0.6 or d["n"] < 4}
    assert out == expected and "new-1" in out and "dead-1" not in out
    as_tasks = lines(run(["--uncertain", "0.6", "--tasks", files["tasks"], files["att"]]).stdout)
    assert {t["id"] for t in as_tasks} == expected | {"never-1"}
    result = run(["--uncertain", "0.4", files["att"]])
    assert result.exit_code == 2 and "0.5<x<1" in result.stderr


def test_keep_if_decides_on_p_kept(files):
    every = {d["task_id"]: d for d in lines(run(["--all", files["att"]]).stdout)}
    kept = [d["task_id"] for d in lines(run(["--keep-if", "0.9", files["att"]]).stdout)]
    assert kept == sorted(t for t, d in every.items() if d["p_keep"] >= 0.9 and d["n"] >= 4)
    assert kept != [t for t, d in every.items() if d["keep"]]  # a different rule, visibly


def test_unprobed_tasks_are_never_kept(files):
    """n = 0 showed as `hard` and --min-clean-runs 0 kept it."""
    every = {t["id"]: t["difficulty"] for t in lines(run(
        ["--all", "--min-clean-runs", "0", "--keep", "too_hard,hard,medium,easy,too_easy",
         "--tasks", files["tasks"], files["att"]]).stdout)}
    never = every["never-1"]
    assert (never["n"], never["band"], never["keep"], never["reason"]) == (
        0, "unprobed", False, "insufficient_runs")
    assert every["new-1"]["keep"] is True  # two clean runs are enough when asked for
    result = run(["--report", "--tasks", files["tasks"], files["att"]])
    assert "unprobed       1   16.7%       0" in result.stderr.splitlines()


def test_holdout_rounds_half_up():
    """0.5 of 5 held out 2 (half to even), undocumented."""
    assert P.held_out_count(0.5, 5) == 3 and P.held_out_count(0.5, 7) == 4
    assert P.held_out_count(0.1, 25) == 3 and P.held_out_count(0.1, 24) == 2  # exact decimals
    recs = [{"task_id": f"t{i}", "domain": "d", "band": "hard"} for i in range(5)]
    assert len(P.holdout_split(recs, 0.5, seed=1)[1]) == 3


def test_duplicate_keys(files, tmp_path):
    """a key read twice was counted twice."""
    dup = write(tmp_path / "d.jsonl", [*attempts("a", [1, 0]), *attempts("a", [1])])
    result = run([dup])
    assert result.exit_code == 4 and result.stdout == ""
    assert result.stderr == (f"{dup}:3: duplicate attempt: task_id 'a' attempt 0 is already at "
                             f"{dup}:1; each (task_id, attempt) must be one clean record; remove "
                             "one, or pass --duplicates first|last to keep one\n")
    first = run(["--all", "--min-clean-runs", "1", "--duplicates", "first", dup])
    assert [(d["n"], d["k"]) for d in lines(first.stdout)] == [(2, 1)]
    assert first.stderr.startswith("bucket: 1 duplicate clean record(s)")
    ref = run(["--reference", dup, files["att"]])
    assert ref.exit_code == 4 and f"{dup}:3: duplicate attempt" in ref.stderr
    parts = [tally(attempts("a", [1, 0])), tally(attempts("a", [1]))]
    assert P.merge(parts).repeated() == ["a"]
    assert tally(attempts("b", [1, 0], errors=1)).repeated() == []


def test_cli_report_and_plot(files, tmp_path):
    png = tmp_path / "bands.png"
    result = run(["--report", "--plot", str(png), files["att"]])
    assert result.exit_code == 0
    assert result.stderr.splitlines() == [
        "band       tasks   share    kept",
        "too_hard       1   20.0%       0",
        "hard           2   40.0%       1",
        "medium         1   20.0%       1",
        "easy           1   20.0%       1",
        "too_easy       0    0.0%       0",
        "total          5  100.0%       3",
        "not kept: band 1, insufficient_runs 1",
    ]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_bad_input_and_skip_invalid(files, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(Path(files["att"]).read_text() + '{"task_id": "x", "attempt": 0, "status": "ok"}\n')
    result = run([str(bad)])
    assert result.exit_code == 4 and result.stdout == ""
    assert result.stderr == (f"{bad}:36: attempt record: 'reward' is a required property "
                             "(schema: schemas/attempt.schema.json)\n")
    result = run(["--skip-invalid", str(bad)])
    assert result.exit_code == 0 and len(lines(result.stdout)) == 3
    assert result.stderr.startswith(f"skipped 1 invalid line(s):\n  {bad}:36: attempt record")


def test_cli_workers_flag_and_help(files):
    assert run(["--procs", "2", files["att"]]).stdout == run([files["att"]]).stdout
    help_text = run(["--help"]).stdout
    assert "bucket --all schemas/examples/attempt.json" in help_text
    assert "probe -n 12 --resume att.jsonl" in help_text


def test_bucket_runs_on_the_light_core_without_numpy_or_scipy(tmp_path):
    """pyproject's light core is enough for bucket: the bands' masses and intervals come from
    core.stats.special, not scipy (which an install without the stats extra lacks)."""
    import subprocess
    import sys

    attempts = tmp_path / "a.jsonl"
    attempts.write_bytes(b"".join(orjson.dumps({"task_id": "t", "domain": "retail", "attempt": a,
                                                "reward": a % 2, "status": "ok"}) + b"\n"
                                  for a in range(8)))
    blocked = ("import sys\nfor name in ('numpy', 'scipy'): sys.modules[name] = None  # import fails\n"
               "from endstate.bucket.cli import main\nsys.argv = ['bucket', '--all', sys.argv[1]]\n"
               "main()")
    done = subprocess.run([sys.executable, "-c", blocked, str(attempts)], capture_output=True)
    assert done.returncode == 0, done.stderr.decode()
    (record,) = map(orjson.loads, done.stdout.splitlines())
    post = stats.beta(4.5, 4.5)  # 4 of 8 under Jeffreys
    assert record["credible95"] == pytest.approx([post.ppf(0.025), post.ppf(0.975)], rel=1e-9)
    assert record["band"] == "medium"
