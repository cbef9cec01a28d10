"""evalstats' statistics at k are one registry (statistics.STATISTICS): a statistic registered in
a program reaches the metrics JSON, summary's table, compare's object and table, with values
checked against exact fractions; the metrics object survives JSON and back."""

from __future__ import annotations

import math
from fractions import Fraction

import orjson
import pytest
from click.testing import CliRunner
from numerics import approx
from study import study, write

from endstate.core.records.schemas import validator
from endstate.evalstats.cli import cli
from endstate.evalstats.metrics_object import decode
from endstate.evalstats.statistics import STATISTICS, Statistic, logit_slope

NAME = "fail_all_k"  # P(all k fresh attempts fail) = C(n − c, k)/C(n, k) = 1 − pass@k


def fail_all_k(n: int, c: int, k: int) -> float:
    return 1.0 - STATISTICS["pass_at_k"].estimator(n, c, k)


def slope(ns, cs, k, mult=None) -> float:
    return -logit_slope("at")(ns, cs, k, mult)  # 1 − x moves opposite to x


@pytest.fixture
def registered():
    STATISTICS.register(NAME, origin="tests/test_statistics.py")(
        Statistic("fail^", fail_all_k, slope, headline=True))
    yield
    STATISTICS.unregister(NAME)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("statistics")
    base, trained, _ = study()
    return base, trained, write(tmp / "b.jsonl", base), write(tmp / "t.jsonl", trained)


def run(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def exact(records, k: int) -> float:
    """The task mean of C(n − c, k)/C(n, k), in fractions."""
    counts: dict[str, list[int]] = {}
    for r in records:
        counts.setdefault(r["task_id"], []).append(r["reward"])
    return float(sum(Fraction(math.comb(len(v) - sum(v), k), math.comb(len(v), k))
                     for v in counts.values()) / len(counts))


def close(expected: float, k: int):
    """Per task k factors 1 − k/j (two roundings each), 1 − their product, 1 − that; then the
    mean of 20 tasks (a sum, a quotient); every value ≤ 1, and the two subtractions cancel, so
    the bound is absolute (magnitude 1)."""
    return approx(expected, dtype=float, terms=2 * k + 2 + 20 + 1, magnitude=1.0)


def test_a_registered_statistic_is_in_the_json_the_table_and_compare(files, registered):
    base, trained, b, t = files
    report = orjson.loads(run("--by", "domain", b))
    assert validator("metrics").is_valid(report)
    for k in (1, 5, 8):
        got = report["overall"][NAME][str(k)]
        assert got == close(exact(base, k), k)
        lo, hi = report["overall"][f"{NAME}_ci95"][str(k)]
        assert lo <= got <= hi
    assert all(NAME in g for g in report["by_domain"].values())
    assert decode(report).to_builtins() == report

    table = run("--format", "table", "--by", "domain", b).splitlines()
    assert ["fail^5%", "fail^8%"] == [h for h in table[0].split() if h.startswith("fail^")]
    overall = table[1].split()
    assert overall[table[0].split().index("fail^8%")] == f"{100 * exact(base, 8):.1f}"

    compared = orjson.loads(run("compare", b, t))
    assert compared[NAME]["k"] == 8
    assert compared[NAME]["base"] == close(exact(base, 8), 8)
    assert compared[NAME]["new"] == close(exact(trained, 8), 8)
    assert "fail^8 base" in run("compare", "--format", "table", b, t)


def test_without_the_declaration_no_output_names_it(files):
    _, _, b, t = files
    assert NAME not in run("--by", "domain", b) and "fail^" not in run("--format", "table", b)
    assert NAME not in run("compare", b, t)


def test_the_metrics_object_reads_back_from_its_json(files):
    """decode() is the boundary: what summary writes, read back, writes the same JSON, nested
    groups (two --by fields) and the groups that pool several policies included."""
    _, _, b, t = files
    for args in (["--by", "policy", "--by", "domain", b, t], ["--k", "1,3", b, t], [b]):
        report = orjson.loads(run(*args))
        assert decode(report).to_builtins() == report
