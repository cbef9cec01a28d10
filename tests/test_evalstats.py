"""evalstats: estimators against exact enumeration, hand-computed metrics, every CLI flag."""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import combinations
from pathlib import Path

import msgspec
import orjson
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from endstate.core.schemas import Attempt, problem
from endstate.evalstats import estimators as E
from endstate.evalstats import metrics as M
from endstate.evalstats.cli import cli
from endstate.evalstats.compare import compare


def enumerate_pass(n, c, k):
    """Exact, over every k-subset of n attempts of which c succeed: (P(any), P(all))."""
    subsets = list(combinations(range(n), k))
    anyone = sum(1 for s in subsets if any(i < c for i in s))
    everyone = sum(1 for s in subsets if all(i < c for i in s))
    return Fraction(anyone, len(subsets)), Fraction(everyone, len(subsets))


small = st.integers(1, 10).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n),
                                                       st.integers(0, n)))


@settings(max_examples=300, deadline=None)
@given(small)
def test_estimators_equal_exact_enumeration(nck):
    n, c, k = nck
    anyone, everyone = enumerate_pass(n, c, k)
    assert math.isclose(E.pass_at_k(n, c, k), anyone, abs_tol=1e-12)
    assert math.isclose(E.pass_hat_k(n, c, k), everyone, abs_tol=1e-12)


def test_estimator_edge_cases():
    assert E.pass_at_k(1, 1, 1) == 1.0 and E.pass_at_k(1, 0, 1) == 0.0
    assert E.pass_hat_k(1, 1, 1) == 1.0 and E.pass_hat_k(1, 0, 1) == 0.0
    assert E.pass_at_k(5, 3, 0) == 0.0 and E.pass_hat_k(5, 3, 0) == 1.0  # k = 0
    assert E.pass_at_k(5, 1, 5) == 1.0 and E.pass_at_k(5, 0, 5) == 0.0  # k = n
    assert E.pass_hat_k(5, 5, 5) == 1.0 and E.pass_hat_k(5, 4, 5) == 0.0
    assert E.pass_hat_k(4, 3, 2) == 0.5 and E.pass_at_k(4, 1, 2) == 0.5
    with pytest.raises(ValueError, match="0 <= k <= n"):
        E.pass_at_k(3, 1, 4)
    with pytest.raises(ValueError, match="0 <= k <= n"):
        E.pass_hat_k(3, 1, 4)
    assert E.pass_at_k(200, 3, 100) == pytest.approx(1 - math.comb(197, 100) / math.comb(200, 100))


def test_standard_errors_by_hand():
    assert E.se_over_tasks([0.75, 1.0, 0.25]) == pytest.approx(math.sqrt(0.291666666 / 2 / 3))
    assert E.se_over_tasks([0.5]) is None
    se = E.se_clustered([0.75, 1.0, 0.25], ["r", "t", "t"])
    assert se == pytest.approx(math.sqrt(2 * (1 / 12) ** 2) / 3)
    assert E.se_clustered([0.1, 0.9], ["g", "g"]) is None
    assert E.ci95(0.5, 0.1) == pytest.approx([0.5 - 0.196, 0.5 + 0.196], abs=1e-4)
    assert E.ci95(0.95, 0.1) == [pytest.approx(0.754, abs=1e-3), 1.0]
    assert E.prob_positive(0.25, 0.25 / math.sqrt(3)) == pytest.approx(0.958368, abs=1e-6)
    assert E.prob_positive(0.0, 0.0) == 0.5 and E.prob_positive(-0.1, 0.0) == 0.0


# --- data -----------------------------------------------------------------------------------------

def rows(task_id, rewards, domain, cost=0.10, model="m", first=0):
    return [{"task_id": task_id, "domain": domain, "attempt": first + i, "model": model,
             "status": "ok" if r is not None else "system_error", "reward": r,
             "usage": {"agent": {"prompt_tokens": 100, "completion_tokens": 50}},
             "cost_usd": cost if r is not None else 0.05} for i, r in enumerate(rewards)]


# A 3/4 (+ a system error, $0.05), B 4/4, C 1/4; every clean attempt costs $0.10.
HAND = [*rows("A", [1, 1, 1, 0, None], "retail"), *rows("B", [1, 1, 1, 1], "travel"),
        *rows("C", [0, 0, 0, 1], "travel")]


def write(path, records):
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return str(path)


def task(task_id):
    return {"id": task_id, "domain": "retail", "user": {"instruction": "x", "opening": "hi"},
            "checks": [{"kind": "said", "value": "done"}]}


def run(args, input=None):
    return CliRunner().invoke(cli, args, input=input)


@pytest.fixture
def hand(tmp_path):
    return write(tmp_path / "hand.jsonl", HAND)


def test_hand_computed_metrics(hand):
    result = run([hand])
    assert result.exit_code == 0, result.output
    report = orjson.loads(result.stdout)
    assert problem("metrics", report) is None
    g = report["overall"]
    assert (g["tasks"], g["attempts"], g["system_errors"], g["successes"]) == (3, 12, 1, 8)
    assert g["pass_at_1"] == pytest.approx(8 / 12) and g["pass_at_1_task_mean"] == pytest.approx(2 / 3)
    assert g["pass_at_k"] == pytest.approx({"1": 2 / 3, "4": 1.0})  # default k: 1 and n = 4
    assert g["pass_hat_k"] == pytest.approx({"1": 2 / 3, "4": 1 / 3})
    assert g["observed_all"] == {"k": 4, "count": 1, "fraction": pytest.approx(1 / 3)}
    assert g["pass_at_1_se"] == pytest.approx(0.2204793, abs=1e-7)
    assert g["pass_at_1_ci95"] == pytest.approx([2 / 3 - 1.959964 * 0.2204793, 1.0], abs=1e-6)
    assert g["cost"] == {"total_usd": pytest.approx(1.25), "per_success_usd": pytest.approx(0.15625),
                         "per_reliable_task_usd": pytest.approx(1.25), "priced_attempts": 13}


def test_hand_computed_k_by_and_cluster(hand):
    report = orjson.loads(run(["--k", "2", "--by", "domain", "--cluster", "domain", hand]).stdout)
    g = report["overall"]
    assert g["pass_at_k"] == pytest.approx({"2": 2.5 / 3})  # A 1, B 1, C 1 - 3/6
    assert g["pass_hat_k"] == pytest.approx({"2": 0.5})  # A 3/6, B 1, C 0
    assert g["pass_at_1_se"] == pytest.approx(math.sqrt(2) / 12 / 3)  # clusters {A}, {B, C}
    retail, travel = report["by_domain"]["retail"], report["by_domain"]["travel"]
    assert (retail["tasks"], retail["system_errors"], retail["pass_at_1"]) == (1, 1, 0.75)
    assert retail["cost"] == {"total_usd": pytest.approx(0.45), "per_success_usd": pytest.approx(0.15),
                              "per_reliable_task_usd": None, "priced_attempts": 5}
    assert travel["pass_at_1"] == 0.625 and travel["observed_all"]["count"] == 1
    assert travel["cost"]["per_reliable_task_usd"] == pytest.approx(0.8)
    assert list(report) == ["overall", "by_domain"]


def test_price_overrides_cost_usd(hand):
    report = orjson.loads(run(["--price", "m=1000,2000", hand]).stdout)
    # each attempt: (100 * 1000 + 50 * 2000) / 1e6 = $0.20; 13 attempts
    assert report["overall"]["cost"]["total_usd"] == pytest.approx(2.6)
    assert report["overall"]["cost"]["per_reliable_task_usd"] == pytest.approx(2.6)
    other = orjson.loads(run(["--price", "other=1,1", hand]).stdout)
    assert other["overall"]["cost"]["total_usd"] == pytest.approx(1.25)


def test_partial_costs_are_flagged(tmp_path):
    data = [*rows("A", [1, 0], "r"), *rows("B", [1], "r", cost=None)]
    result = run([write(tmp_path / "p.jsonl", data)])
    assert orjson.loads(result.stdout)["overall"]["cost"]["total_usd"] == pytest.approx(0.2)
    assert result.stderr == ("evalstats: only 2 of 3 attempts have a cost (cost_usd, or --price for "
                             "their model); the costs cover those only\n")


def test_no_costs_is_null(tmp_path):
    report = orjson.loads(run([write(tmp_path / "p.jsonl", rows("A", [1, 0], "r", cost=None))]).stdout)
    assert report["overall"]["cost"] == {"total_usd": None, "per_success_usd": None,
                                         "per_reliable_task_usd": None, "priced_attempts": 0}


def test_default_ks_and_k_too_large(tmp_path, hand):
    assert M.default_ks(20) == [1, 5, 20] and M.default_ks(4) == [1, 4] and M.default_ks(0) == []
    result = run(["--k", "1,5", hand])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == ("--k 5: task 'A' has only 4 clean attempt(s); use k <= 4, or re-run "
                             "its missing attempts\n")
    result = run(["--k", "0", hand])
    assert result.exit_code == 2 and "k values must be >= 1" in result.stderr


def test_formats(hand):
    table = run(["--format", "table", "--by", "domain", hand]).stdout.splitlines()
    assert table[0].split() == ["group", "tasks", "attempts", "sys_err", "pass@1", "%", "±se",
                                "pass@1", "%", "pass@4", "%", "pass^1", "%", "pass^4", "%", "k/k",
                                "$/success", "$/reliable"]
    assert table[1].split() == ["overall", "3", "12", "1", "66.7", "22.0", "66.7", "100.0", "66.7",
                                "33.3", "1/3", "0.1562", "1.25"]
    assert table[2].split()[0] == "domain=retail"
    md = run(["--format", "markdown", hand]).stdout.splitlines()
    assert md[0].startswith("| group | tasks |") and md[1].startswith("|---|---:|")


def test_plot(tmp_path, hand):
    png = tmp_path / "m.png"
    result = run(["--plot", str(png), hand])
    assert result.exit_code == 0 and png.read_bytes()[:4] == b"\x89PNG"
    assert "by_model" not in orjson.loads(result.stdout)


def test_pareto():
    from endstate.evalstats.render import pareto
    assert pareto([(0.5, 1.0), (0.6, 2.0), (0.4, 1.5), (0.6, 3.0)]) == [0, 1]


# --- coverage gate --------------------------------------------------------------------------------

@pytest.fixture
def gate(tmp_path):
    data = [*rows("X", [1, 0], "r"), *rows("Y", [1], "r"), *rows("Y", [0, None], "r"),
            *rows("W", [1], "r")]
    return {"att": write(tmp_path / "g.jsonl", data),
            "tasks": write(tmp_path / "t.jsonl", [task("X"), task("Y"), task("Z")])}


def test_coverage_gate_lists_keys_and_exits_3(gate):
    result = run(["--expect-tasks", gate["tasks"], "--expect-repeats", "2", gate["att"]])
    assert result.exit_code == 3 and result.stdout == ""
    assert result.stderr.splitlines() == [
        ("coverage: 4 of 6 task × attempt keys are not exactly one clean record (missing 2, "
         "duplicate 1, system_error 1); re-run them:"),
        ("coverage: 1 recorded key(s) are not expected (task not in the expected tasks, or "
         "attempt >= 2):"),
        "duplicate\tY\t0\t2 records",
        "system_error\tY\t1",
        "missing\tZ\t0",
        "missing\tZ\t1",
        "unexpected\tW\t0",
        ("coverage gate failed: 4 key(s) to re-run (listed above); pass --allow-incomplete to "
         "report anyway"),
    ]


def test_coverage_gate_allow_incomplete_and_pass(gate, tmp_path):
    result = run(["--expect-tasks", gate["tasks"], "--expect-repeats", "2", "--allow-incomplete",
                  gate["att"]])
    assert result.exit_code == 0 and orjson.loads(result.stdout)["overall"]["tasks"] == 3
    assert "missing\tZ\t0" in result.stderr
    ok = write(tmp_path / "ok.jsonl", [*rows("X", [1, 0], "r"), *rows("Y", [1, 1], "r"),
                                       *rows("Z", [0, 0], "r")])
    result = run(["--expect-tasks", gate["tasks"], "--expect-repeats", "2", ok])
    assert result.exit_code == 0 and result.stderr == ""
    result = run(["--expect-repeats", "2", ok])
    assert result.exit_code == 2 and "--expect-tasks and --expect-repeats go together" in result.stderr


def test_bad_input_and_skip_invalid(tmp_path, hand):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(Path(hand).read_text() + '{"task_id": "Q", "attempt": 0, "status": "ok", "reward": 2}\n')
    result = run([str(bad)])
    assert result.exit_code == 4
    assert result.stderr == (f"{bad}:14: attempt record.reward: 2 is not one of [0, 1, None] "
                             "(schema: schemas/attempt.schema.json)\n")
    result = run(["--skip-invalid", str(bad)])
    assert result.exit_code == 0 and orjson.loads(result.stdout)["overall"]["tasks"] == 3
    assert result.stderr.startswith(f"skipped 1 invalid line(s):\n  {bad}:14:")


def test_stdin_workers_and_help(hand):
    with open(hand) as fh:
        assert run(["-"], input=fh.read()).stdout == run([hand]).stdout
    assert run(["--procs", "2", hand]).stdout == run([hand]).stdout
    assert "evalstats --format table schemas/examples/attempt.json" in run(["--help"]).stdout
    assert "evalstats --expect-tasks" in run(["summary", "--help"]).stdout
    assert "evalstats compare schemas/examples/attempt.json" in run(["compare", "--help"]).stdout


# --- compare --------------------------------------------------------------------------------------

BASE = [*rows("A", [1, 1, 0, 0], "retail"), *rows("B", [0, 0, 0, 0], "travel"),
        *rows("C", [1, 1, 1, 1], "travel")]
NEW = [*rows("A", [1, 1, 1, 1], "retail"), *rows("B", [1, 0, 0, 0], "travel"),
       *rows("C", [1, 1, 1, 1], "travel"), *rows("D", [1, 1, 1, 1], "travel")]


def test_compare_by_hand(tmp_path):
    base, new = write(tmp_path / "b.jsonl", BASE), write(tmp_path / "n.jsonl", NEW)
    result = run(["compare", "--by", "domain", base, new])
    assert result.exit_code == 0, result.output
    r = orjson.loads(result.stdout)
    assert (r["tasks"], r["only_base"], r["only_new"]) == (3, 0, 1)
    se = 0.25 / math.sqrt(3)
    ci95 = r["pass_at_1"].pop("ci95")
    assert r["pass_at_1"] == pytest.approx({"base": 0.5, "new": 0.75, "delta": 0.25, "se": se})
    assert ci95 == pytest.approx([0.25 - 1.959964 * se, 0.25 + 1.959964 * se])
    assert r["pass_at_k"] == pytest.approx({"k": 4, "base": 2 / 3, "new": 1.0, "delta": 1 / 3})
    assert r["observed_all"] == pytest.approx({"base": 1, "new": 2, "delta": 1, "base_fraction": 1 / 3,
                                               "new_fraction": 2 / 3, "delta_fraction": 1 / 3})
    assert r["correlation"] == pytest.approx(math.sqrt(3) / 2)
    assert r["p_new_better"] == pytest.approx(E.normal_cdf(math.sqrt(3)))
    assert r["gained"] == {"pass_at_k": ["B"], "observed_all": ["A"]}
    assert r["lost"] == {"pass_at_k": [], "observed_all": []}
    travel = r["by_domain"]["travel"]
    assert travel["tasks"] == 2 and travel["pass_at_1"]["delta"] == pytest.approx(0.125)
    base = [msgspec.convert(r, Attempt) for r in BASE]
    assert compare(M.group_tasks(M.tally_fn([], {}, False)(base))["overall"],
                   M.group_tasks(M.tally_fn([], {}, False)(base))["overall"])["p_new_better"] == 0.5


def test_compare_k_format_plot_and_errors(tmp_path):
    base, new = write(tmp_path / "b.jsonl", BASE), write(tmp_path / "n.jsonl", NEW)
    r = orjson.loads(run(["compare", "--k", "2", base, new]).stdout)
    assert r["pass_at_k"]["k"] == 2 and r["pass_at_k"]["base"] == pytest.approx((5 / 6 + 0 + 1) / 3)
    result = run(["compare", "--k", "5", base, new])
    assert result.exit_code == 2
    assert result.stderr == ("--k 5: task 'A' has only 4 clean attempt(s) in one of the runs; use "
                             "k <= 4\n")
    table = run(["compare", "--format", "table", "--by", "domain", base, new]).stdout.splitlines()
    assert table[1].split() == ["overall", "3", "50.0", "75.0", "25.0", "14.4", "66.7", "100.0",
                                "33.3", "1", "2", "+1", "0.958"]
    assert [line.split()[0] for line in table[2:]] == ["domain=retail", "domain=travel"]
    png = tmp_path / "d.png"
    assert run(["compare", "--by", "domain", "--plot", str(png), base, new]).exit_code == 0
    assert png.read_bytes()[:4] == b"\x89PNG"
    result = run(["compare", "-", "-"])
    assert result.exit_code == 2 and "only one of BASE and NEW can be stdin" in result.stderr
