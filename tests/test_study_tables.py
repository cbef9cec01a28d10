"""Tables that cannot mislead a reader: pooled-over-policies rows, partial pricing and the
interval of every cost change, different repeat counts, the clustering recorded, ties at 0."""

from __future__ import annotations

import math
import random
from fractions import Fraction
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from endstate.evalstats import render as R
from endstate.evalstats.cli import cli


def run(args, input=None):
    return CliRunner().invoke(cli, args, input=input)


def attempts(task_id, rewards, *, model="m", domain="retail", cost=0.1, first=0):
    return [{"task_id": task_id, "domain": domain, "attempt": first + i, "model": model,
             "status": "ok", "reward": r, "cost_usd": cost if callable(cost) is False else cost(r)}
            for i, r in enumerate(rewards)]


def write(path: Path, records) -> str:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return str(path)


# --- pooled rows --------------------------------------------------------------------------------

def test_the_pooled_row_comes_after_the_policies_and_names_no_head(tmp_path):
    """Two policies of 2 and 4 attempts: `overall` pools them (a task's 6 attempts, no policy's)
    and headed the table, and its 6/6 named the k/k column. Now each policy comes first, the
    pooled row last with no k/k, and the head names the policies' own k where they differ."""
    records = [*attempts("A", [1, 1], model="a"), *attempts("B", [1, 0], model="a"),
               *attempts("A", [1, 1, 1, 1], model="b"), *attempts("B", [0, 0, 0, 0], model="b")]
    result = run(["--format", "table", write(tmp_path / "p.jsonl", records)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split()[-3:] == ["k/k", "$/success", "$/reliable"]
    assert [line.split()[0] for line in lines[1:]] == ["policy=a", "policy=b", "overall"]
    assert lines[3].startswith("overall (2 policies pooled)")
    cells = {line.split()[0]: line for line in lines[1:]}
    assert "1/2 (k=2)" in cells["policy=a"] and "1/2 (k=4)" in cells["policy=b"]
    # pooled: pass@1 = 7/12 successes, no pass@2, pass^2 or k/k
    pooled = lines[3].removeprefix("overall (2 policies pooled)").split()
    assert pooled[3] == "58.3" and pooled[6:9] == ["-", "-", "-"]


def test_the_cross_table_ranks_k_over_k_only_at_one_k(tmp_path):
    """Policy a ran 2 attempts per task, b 4: their k/k (2/2 against 4/4) was bolded as one
    column. Now its head says k/k, each cell names its k, and nothing in it is ranked."""
    records = [*attempts("A", [1, 1], model="a"), *attempts("B", [1, 1], model="a", domain="x"),
               *attempts("A", [1, 1, 1, 0], model="b"),
               *attempts("B", [1, 1, 1, 1], model="b", domain="x")]
    text = run(["--by", "policy", "--by", "domain", "--format", "markdown",
                write(tmp_path / "k.jsonl", records)]).stdout.split("\n\n")[0].splitlines()
    head = [c.strip() for c in text[0].strip("|").split("|")]
    assert head == ["policy", "retail pass@1%", "retail pass@2%", "retail k/k%", "x pass@1%",
                    "x pass@2%", "x k/k%", "all pass@1%", "all pass@2%", "all k/k%"]
    a = [c.strip() for c in text[2].strip("|").split("|")]
    assert a[3] == "100.0 (k=2)" and a[9] == "100.0 (k=2)"  # not **bold**
    assert a[1] == "**100.0**"  # pass@1 is one estimand at any k


def test_a_zero_is_never_marked_best():
    assert R.rank_marks([[0.0, 5.0], [0.0, 0.0], [0.0, 2.5]]) == [[0, 1], [0, 0], [0, 2]]
    assert R.rank_marks([[3.0], [3.0]]) == [[1], [1]]  # a tie above 0 shares the mark


# --- the clustering, recorded -------------------------------------------------------------------

def test_the_metrics_and_compare_objects_say_how_they_were_clustered(tmp_path):
    records = [*attempts("A", [1, 0]), *attempts("B", [1, 1], domain="x"),
               *attempts("C", [0, 0], domain="x")]
    path = write(tmp_path / "c.jsonl", records)
    plain = orjson.loads(run([path]).stdout)["overall"]
    clustered = orjson.loads(run(["--cluster", "domain", "--by", "domain", path]).stdout)
    assert (plain["cluster"], plain["clusters"]) == (None, None)
    assert (clustered["overall"]["cluster"], clustered["overall"]["clusters"]) == ("domain", 2)
    assert clustered["by_domain"]["x"]["clusters"] == 1  # below two: its intervals are null
    compared = orjson.loads(run(["compare", "--cluster", "domain", path, path]).stdout)
    assert (compared["cluster"], compared["clusters"]) == ("domain", 2)


# --- compare: partial pricing, cost intervals -----------------------------------------------------

@pytest.fixture
def priced(tmp_path):
    """10 tasks; NEW's failures have no cost (as when a failing run's usage was not recorded);
    BASE solved 1 task 4/4, NEW 4."""
    rng = random.Random(7)
    base, new = [], []
    for t in range(10):
        rb, rn = [int(rng.random() < 0.5) for _ in range(4)], [int(rng.random() < 0.7) for _ in range(4)]
        base += attempts(f"t{t}", rb, cost=0.02 + 0.001 * t)
        new += [{**r, "cost_usd": 0.015 if r["reward"] else None}
                for r in attempts(f"t{t}", rn, model="n")]
    return write(tmp_path / "base.jsonl", base), write(tmp_path / "new.jsonl", new), base, new


def test_compare_warns_on_partial_pricing_as_summary_does(priced):
    base, new, _, new_records = priced
    summary = run([new])
    result = run(["compare", "--format", "table", base, new])
    assert result.exit_code == 0, result.output
    priced_n = sum(r["cost_usd"] is not None for r in new_records)
    said = (f"only {priced_n} of 40 attempts have a cost (cost_usd, or --price for their model); "
            "total_usd covers those, the ratios are the priced attempts' (docs/evalstats.md)")
    assert summary.stderr == f"evalstats: {said}\n"
    assert result.stderr == f"evalstats: NEW ({new}): {said}\n"
    assert result.stdout.splitlines()[-1] == (
        f"NEW: only {priced_n} of 40 attempts have a cost: its ratios are the priced attempts' "
        "(docs/evalstats.md)")


def reference_bootstrap(base_records, new_records, tasks):
    """compare's cost changes and their intervals, recomputed from the records with exact
    fractions, over the same resamples (random.Random(SEED).choices of the task indices)."""
    from endstate.evalstats import cost_change as CC

    def side(records):
        per = {t: [r for r in records if r["task_id"] == t] for t in tasks}
        return [(sum((Fraction(r["cost_usd"]) for r in rs if r["cost_usd"] is not None), Fraction(0)),
                 sum(r["cost_usd"] is not None for r in rs), len(rs),
                 sum(r["reward"] for r in rs if r["cost_usd"] is not None),
                 int(all(r["reward"] for r in rs))) for rs in per.values()]

    def ratios(rows):
        total, priced, recorded, wins, reliable = (sum(c) for c in zip(*rows))
        return (total, total / wins if wins else None,
                total * recorded / priced / reliable if reliable else None)

    def change(b, n):
        if b is None:
            return math.nan if n is None else -100.0
        return math.inf if n is None else float(100 * (n - b) / b)

    b, n = side(base_records), side(new_records)
    point = [None if x is None or y is None else float(100 * (y - x) / x)
             for x, y in zip(ratios(b), ratios(n))]
    rng, draws = random.Random(CC.SEED), [[], [], []]
    for _ in range(CC.RESAMPLES):
        pick = rng.choices(range(len(tasks)), k=len(tasks))
        for j, x in enumerate(change(p, q) for p, q in zip(ratios([b[i] for i in pick]),
                                                            ratios([n[i] for i in pick]))):
            draws[j].append(x)
    lo, hi = int(0.025 * CC.RESAMPLES), math.ceil(0.975 * CC.RESAMPLES) - 1
    cis = [[sorted(-100.0 if math.isnan(x) else x for x in d)[lo],
            sorted(math.inf if math.isnan(x) else x for x in d)[hi]] for d in draws]
    return point, [[a, None if math.isinf(z) else z] for a, z in cis]


def test_every_cost_change_has_the_interval_of_a_paired_task_bootstrap(priced):
    base, new, base_records, new_records = priced
    cost = orjson.loads(run(["compare", base, new]).stdout)["cost"]
    point, cis = reference_bootstrap(base_records, new_records, [f"t{t}" for t in range(10)])
    for name, value, ci in zip(("total", "per_success", "per_reliable_task"), point, cis):
        # ours sums floats (fsum: correctly rounded) where the reference is exact: the sums of
        # ≤ 40 costs and a few quotients, ≤ 8 roundings, relative 1e-13 with room
        got = cost[f"{name}_change_ci95"]
        if value is None:
            assert cost[f"{name}_change_pct"] is None and got is None, name
            continue
        assert cost[f"{name}_change_pct"] == pytest.approx(value, rel=1e-13), name
        assert got[0] == pytest.approx(ci[0], rel=1e-13, abs=1e-12), name
        assert (got[1] is None) == (ci[1] is None) and (ci[1] is None or got[1] == pytest.approx(ci[1], rel=1e-13))
    table = run(["compare", "--format", "table", base, new]).stdout.split("\n\n")[1].splitlines()
    lo = cost["per_success_change_ci95"][0]
    assert f"{cost['per_success_change_pct']:+.1f}% [{lo:+.1f}, " in table[1]


def test_a_cost_change_without_an_interval_is_marked(tmp_path):
    """One task each, solved: the per-success change has an interval of one resample's value;
    with no success on either side there is no change, and no interval."""
    assert R.change_interval(None, None) == "-"
    assert R.change_interval(-62.3, None) == "-62.3% (no interval)"
    assert R.change_interval(-62.3, [-100.0, None]) == "-62.3% [-100.0, +inf]"


# --- compare: different repeat counts ---------------------------------------------------------------

def test_compare_counts_k_over_k_at_the_common_k(tmp_path):
    """BASE ran 2 attempts per task, NEW 4, at the same per-task rates: "k/k 2 → 1" compared 2/2
    with 4/4. Now at k = 2, NEW's as pass^2 over its 4 attempts, C(c, 2)/C(4, 2)."""
    base = [*attempts("A", [1, 1]), *attempts("B", [1, 0]), *attempts("C", [1, 1])]
    new = [*attempts("A", [1, 1, 1, 1], model="n"), *attempts("B", [1, 0, 1, 0], model="n"),
           *attempts("C", [1, 1, 1, 0], model="n")]
    paths = write(tmp_path / "b.jsonl", base), write(tmp_path / "n.jsonl", new)
    result = run(["compare", *paths])
    assert result.exit_code == 0, result.output
    obs = orjson.loads(result.stdout)["observed_all"]
    expected = sum(Fraction(math.comb(c, 2), math.comb(4, 2)) for c in (4, 2, 3))  # 1 + 1/6 + 1/2
    assert (obs["k"], obs["base"], obs["estimated"]) == (2, 2, ["new"])
    assert obs["new"] == pytest.approx(float(expected), rel=1e-15)  # 3 quotients summed
    assert result.stderr == ("evalstats compare: attempts per task differ (BASE 2, NEW 4): k/k "
                             "is compared at k = 2, NEW's as pass^2 over its attempts "
                             "(observed_all.estimated)\n")
    table = run(["compare", "--format", "table", *paths]).stdout.splitlines()
    assert "2/2" in table[0].split() and table[1].split()[9:12] == ["2", "1.7", "-0.3"]
    assert table[2] == ("k/k at k = 2: NEW ran more attempts per task; counted as pass^2 over "
                        "them (the expected tasks solved in 2 of its attempts)")
    lost = orjson.loads(result.stdout)["lost"]["observed_all"]
    assert lost == []  # C: 2/2 against pass^2 = 1/2, neither solved nor unsolved at k = 2
