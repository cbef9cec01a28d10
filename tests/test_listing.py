"""grade tasks: listing lines, filters and the summary table as pure functions, then the command."""

import json
from collections import Counter

import pytest
from conftest import ROOT, run_tool

from endstate.grade.listing import count, listing, matches, summary_table

EXAMPLE = ROOT / "docs" / "example"
EXAMPLE_ARGS = ("--domains", str(EXAMPLE / "domains"), str(EXAMPLE / "tasks.jsonl"))

TASK = {"id": "t1", "domain": "retail", "split": "bench", "tags": ["refund", "template:refund-ok"],
        "user": {"instruction": "You are Ann.", "opening": "Refund please."},
        "checks": [{"kind": "row", "table": "refunds", "where": {"id": "R1"}, "expect": {"amount": 5}},
                   {"kind": "said", "value": 5}, {"kind": "row", "table": "orders",
                                                  "where": {"id": "W1"}, "expect": {"status": "x"}}],
        "gold": [{"tool": "find_customer", "args": {}}, {"say": "ok"},
                 {"tool": "refund", "args": {}}, {"tool": "note", "args": {}}]}


def test_listing_counts_checks_calls_and_writes():
    assert listing(TASK, {"refund", "note", "cancel"}) == {
        "id": "t1", "domain": "retail", "split": "bench", "tags": ["refund", "template:refund-ok"],
        "checks": 3, "check_kinds": ["row", "said"], "gold_calls": 3, "gold_writes": 2,
        "max_turns": 30, "opening": "Refund please."}


def test_listing_of_a_bare_task_uses_the_schema_defaults():
    bare = {"id": "t2", "domain": "bank", "user": {"instruction": "", "opening": "Hi"},
            "checks": [{"kind": "judge", "question": "Polite?"}], "max_turns": 5}
    line = listing(bare, set())
    assert (line["split"], line["tags"], line["gold_calls"], line["gold_writes"], line["max_turns"]) \
        == (None, [], 0, 0, 5)


@pytest.mark.parametrize("filters, expected", [
    ({}, True),
    ({"domains": ["bank", "retail"]}, True),
    ({"domains": ["bank"]}, False),
    ({"splits": ["train"]}, False),
    ({"splits": ["train", "bench"]}, True),
    ({"tags": ["template:*"]}, True),
    ({"tags": ["template"]}, False),
    ({"tags": ["cancel", "refund"]}, True),
    ({"domains": ["retail"], "splits": ["train"]}, False),  # filters combine with AND
])
def test_filters(filters, expected):
    assert matches(TASK, **filters) is expected


def test_summary_table_has_totals_and_a_column_per_split():
    counts = count([TASK, TASK, {**TASK, "split": "train"}, {**TASK, "domain": "bank", "split": None}])
    assert counts == Counter({("retail", "bench"): 2, ("retail", "train"): 1, ("bank", "-"): 1})
    assert summary_table(counts) == (
        "domain  -  bench  train  total\n"
        "bank    1      0      0      1\n"
        "retail  0      2      1      3\n"
        "total   1      2      1      4\n")


# -- the command --------------------------------------------------------------------------------

def test_default_lists_the_builtin_suites_one_line_per_task():
    p = run_tool("grade", "tasks")
    assert p.returncode == 0, p.stderr
    lines = [json.loads(line) for line in p.stdout.splitlines()]
    ids = [line["id"] for line in lines]
    assert len(ids) == len(set(ids)) >= 520
    assert {line["domain"] for line in lines} == {"retail", "travel", "support", "bank",
                                                  "insurance", "consulting"}
    assert {line["split"] for line in lines} == {"bench", "ood", "train"}
    assert all(line["checks"] >= 1 and line["gold_calls"] >= line["gold_writes"] for line in lines)
    assert p.stderr == ""


def test_filters_and_full_records():
    p = run_tool("grade", "tasks", "--domain", "support", "--split", "bench", "--tag", "policy-trap")
    assert p.returncode == 0, p.stderr
    lines = [json.loads(line) for line in p.stdout.splitlines()]
    assert lines and all(line["domain"] == "support" and line["split"] == "bench"
                         and "policy-trap" in line["tags"] for line in lines)
    full = run_tool("grade", "tasks", "--full", "--domain", "support", "--split", "bench",
                    "--tag", "policy-trap")
    records = [json.loads(line) for line in full.stdout.splitlines()]
    assert [r["id"] for r in records] == [line["id"] for line in lines]
    assert all("gold" in r and "checks" in r for r in records)


def test_example_listing_counts_writing_gold_calls():
    p = run_tool("grade", "tasks", *EXAMPLE_ARGS)
    assert p.returncode == 0, p.stderr
    by_id = {line["id"]: line for line in map(json.loads, p.stdout.splitlines())}
    trap = by_id["library-borrow-with-fines-trap"]
    assert (trap["gold_calls"], trap["gold_writes"], trap["check_kinds"]) == (1, 0, ["absent", "said"])
    assert by_id["library-return-late-then-borrow"]["gold_writes"] == 2


def test_summary_counts_domain_by_split():
    p = run_tool("grade", "tasks", "--summary", *EXAMPLE_ARGS)
    assert p.returncode == 0, p.stderr
    assert p.stdout == ("domain   example  total\n"
                        "library        3      3\n"
                        "total          3      3\n")


def test_summary_and_full_are_alternatives():
    p = run_tool("grade", "tasks", "--summary", "--full")
    assert p.returncode == 2
    assert "--summary and --full are alternatives" in p.stderr


def test_a_task_of_an_unknown_domain_is_named_by_file_and_line(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text((EXAMPLE / "tasks.jsonl").read_text())
    p = run_tool("grade", "tasks", str(path))  # the library domain is not visible without --domains
    assert p.returncode == 4
    assert p.stdout == ""
    assert p.stderr.startswith(f"{path}:1: unknown domain 'library'; known: ")
    assert "add yours with --domains DIR" in p.stderr


def test_a_bad_line_stops_with_file_and_line_or_is_skipped(tmp_path):
    path = tmp_path / "tasks.jsonl"
    good = (EXAMPLE / "tasks.jsonl").read_text().splitlines()
    path.write_text(good[0] + "\n" + '{"id": "x"}\n' + good[1] + "\n")
    p = run_tool("grade", "tasks", *EXAMPLE_ARGS[:2], str(path))
    assert p.returncode == 4
    assert p.stderr.startswith(f"{path}:2: ")
    p = run_tool("grade", "tasks", "--skip-invalid", *EXAMPLE_ARGS[:2], str(path))
    assert p.returncode == 0
    assert len(p.stdout.splitlines()) == 2
    assert f"skipped 1 invalid line(s):\n  {path}:2: " in p.stderr
