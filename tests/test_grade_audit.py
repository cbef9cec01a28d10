"""grade audit: successes whose end state differs from gold's, on the real retail domain, through
real `grade` and `grade audit` processes."""

import copy
import json
import subprocess

import orjson
import pytest
from conftest import BIN, ROOT, run_tool

from endstate.core.episode.replays import replay
from endstate.grade.audit import differing_rows

BENCH = ROOT / "tasks" / "bench" / "retail.jsonl"
OTHER_CUSTOMER = {"customer_id": "C0001", "email": "someone.else@example.com"}  # a seed customer
OTHER_SUMMARY = "Wants money back early."


def lines(records) -> str:
    return "".join(orjson.dumps(r).decode() + "\n" for r in records)


def records(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def with_summary(gold: list[dict], summary: str) -> list[dict]:
    return [{**s, "args": {**s["args"], "summary": summary}} if s.get("tool") == "transfer_to_human"
            else s for s in gold]


@pytest.fixture(scope="module")
def suite(tasks, tmp_path_factory):
    """A task file (the retail bench and two loose tasks written for this test) and episodes of
    it, one per case, graded by `grade`."""
    tmp = tmp_path_factory.mktemp("audit")
    cancel, too_late, trap = (tasks.get(i) for i in (
        "retail-cancel-pending", "retail-return-too-late", "retail-refund-before-received-trap"))
    # gold_state that ignores the escalation's summary: passes on any summary, and says so
    ignoring = {**copy.deepcopy(trap), "id": "audit-ignores-summary",
                "checks": [{"id": "like-gold", "kind": "gold_state",
                            "ignore_columns": ["escalations.summary"]}]}
    # the footprint guard fails a write to another customer: this copy frees the table, so that
    # such a write passes and the audit has an extra row to find
    freeing = {**copy.deepcopy(too_late), "id": "audit-frees-customers",
               "checks": [*too_late["checks"], {"id": "footprint", "kind": "footprint", "free": ["customers"]}]}
    # gold also changes an email that no check pins: an episode can leave it alone
    loose = {**copy.deepcopy(cancel), "id": "audit-email-unpinned",
             "gold": [*cancel["gold"], {"tool": "update_customer_email", "args": OTHER_CUSTOMER}],
             "checks": [c for c in cancel["checks"] if c["kind"] == "row"]}
    task_file = tmp / "tasks.jsonl"
    task_file.write_text(BENCH.read_text() + lines([ignoring, loose, freeing]))
    steps = {
        "gold": (cancel, cancel["gold"]),
        "nothing": (cancel, []),
        "extra": (freeing, [*too_late["gold"], {"tool": "update_customer_email", "args": OTHER_CUSTOMER}]),
        "different": (trap, with_summary(trap["gold"], OTHER_SUMMARY)),
        "ignored": (ignoring, with_summary(trap["gold"], OTHER_SUMMARY)),
        "missing": (loose, cancel["gold"]),
    }
    episodes = {case: replay(tasks.domains["retail"], task, s) for case, (task, s) in steps.items()}
    episodes["failed"] = {**episodes["gold"], "episode_id": "failed", "status": "system_error",
                          "error": {"kind": "timeout", "message": "no answer"}}
    episode_file = tmp / "episodes.jsonl"
    episode_file.write_text(lines(episodes.values()))
    graded = run_tool("grade", "--tasks", str(task_file), str(episode_file))
    assert graded.returncode == 0, graded.stderr
    by_case = dict(zip(episodes, records(graded.stdout)))
    assert {c: g["reward"] for c, g in by_case.items()} == {
        "gold": 1, "nothing": 0, "extra": 1, "different": 1, "ignored": 1, "missing": 1, "failed": None}
    return task_file, graded.stdout, by_case, episodes


@pytest.fixture(scope="module")
def audit(suite):
    task_file, graded, *_ = suite
    p = run_tool("grade", "audit", "--tasks", str(task_file), input=graded)
    assert p.returncode == 0, p.stderr
    return {r["task_id"]: r for r in records(p.stdout)}, p.stderr


def test_gold_is_not_flagged_and_failures_are_skipped_and_counted(audit):
    found, stderr = audit
    assert "retail-cancel-pending" not in found
    assert sorted(found) == ["audit-email-unpinned", "audit-frees-customers", "audit-ignores-summary",
                             "retail-refund-before-received-trap"]
    assert stderr.splitlines()[0] == (
        "audited 5 success(es) of 5 task(s): 4 got there another way (extra ×1, different ×2, "
        "missing ×1); skipped reward 0 ×1, system_error ×1")
    assert "  retail-cancel-pending: 1 audited, 0 another way\n" in stderr


def test_an_unnoticed_extra_write_is_flagged_with_the_row(audit, suite):
    record = audit[0]["audit-frees-customers"]
    episode = suite[2]["extra"]
    assert (record["episode_id"], record["domain"], record["kinds"]) == (episode["episode_id"], "retail", ["extra"])
    assert record["rows"] == [{"kind": "extra", "table": "customers", "key": {"id": "C0001"},
                               "gold": "unchanged", "episode": "updated",
                               "columns": {"email": {"gold": "pedro.kim1@example.com",
                                                     "episode": "someone.else@example.com"}}}]
    # both checks passed without reading customers: one reads returns, one the transcript; the
    # guard reads every changed row, but frees the customers table
    assert [(c["id"], c["kind"], c["sees"]) for c in record["checks"]] == [
        ("no-return", "absent", []), ("explained-window", "said", []), ("footprint", "footprint", ["customers"])]
    assert record["checks"][1]["detail"] == "the agent said '30 days'"


def test_other_values_in_an_unpinned_column_are_flagged_with_both_values(audit, tasks):
    record = audit[0]["retail-refund-before-received-trap"]
    gold_summary = next(s["args"]["summary"] for s in tasks.get(record["task_id"])["gold"]
                        if s.get("tool") == "transfer_to_human")
    assert record["kinds"] == ["different"]
    assert record["rows"] == [{"kind": "different", "table": "escalations", "key": {"id": "E00001"},
                               "gold": "inserted", "episode": "inserted",
                               "columns": {"summary": {"gold": gold_summary, "episode": OTHER_SUMMARY}}}]
    assert [(c["id"], c["sees"]) for c in record["checks"]] == [
        ("no-refund", []), ("escalated", ["escalations"]), ("only-escalation", ["escalations"]),
        ("footprint", ["escalations"])]
    assert "  retail-refund-before-received-trap: 1 audited, 1 another way (different ×1); passed " \
           "reading the differing tables: escalated ×1, footprint ×1, only-escalation ×1\n" in audit[1]


def test_gold_state_says_which_differing_columns_it_ignores(audit):
    record = audit[0]["audit-ignores-summary"]
    assert [r["columns"] for r in record["rows"]][0]["summary"]["episode"] == OTHER_SUMMARY
    assert record["checks"][0] == {"id": "like-gold", "kind": "gold_state",
                                   "detail": "terminal state equals gold (1 changed row(s))",
                                   "sees": ["escalations"], "ignores": ["escalations.summary"]}


def test_a_row_gold_changes_and_the_episode_leaves_is_missing(audit):
    record = audit[0]["audit-email-unpinned"]
    assert record["kinds"] == ["missing"]
    assert [(r["table"], r["key"], r["gold"], r["episode"], r["columns"]) for r in record["rows"]] == [
        ("customers", {"id": "C0001"}, "updated", "unchanged",
         {"email": {"gold": "someone.else@example.com", "episode": "pedro.kim1@example.com"}})]


def test_summary_is_a_table_instead_of_the_records(suite):
    task_file, graded, *_ = suite
    p = run_tool("grade", "audit", "--summary", "--tasks", str(task_file), input=graded)
    assert p.returncode == 0, p.stderr
    table = p.stdout.splitlines()
    assert table[0].split()[:4] == ["task", "audited", "another", "way"]
    assert table[-1].split() == ["total", "5", "4", "1", "2", "1"]
    row = next(line for line in table if line.startswith("retail-refund-before-received-trap"))
    assert row.split()[1:6] == ["1", "1", "0", "1", "0"]
    assert row.endswith("escalated ×1, footprint ×1, only-escalation ×1")
    assert p.stderr.startswith("audited 5 success(es)") and len(p.stderr.splitlines()) == 1


def test_grade_pipes_into_audit(suite, tmp_path):
    task_file, _, _, raw = suite
    episodes = tmp_path / "episodes.jsonl"
    episodes.write_text(lines([raw["different"], raw["gold"]]))
    pipe = subprocess.run(f"'{BIN}/grade' --tasks '{task_file}' '{episodes}' | "
                          f"'{BIN}/grade' audit --tasks '{task_file}' -q",
                          shell=True, capture_output=True, text=True, timeout=900)
    assert pipe.returncode == 0, pipe.stderr
    assert [r["task_id"] for r in records(pipe.stdout)] == ["retail-refund-before-received-trap"]
    assert pipe.stderr.splitlines() == ["graded 2: reward 1 ×2, 0 ×0, system_error ×0"]


@pytest.mark.parametrize("bad, message", [
    (b'{"episode_id": "x",\n', "not valid JSON"),
    ("unknown", "unknown task id 'no-such-task' (not in {tasks}); pass --tasks FILE that defines it"),
    ("ungraded", "graded_episode record: 'reward' is a required property (schema: "
                 "schemas/graded_episode.schema.json); the record is an episode (rollout's output, "
                 "not graded yet): pipe the episodes through `grade` first"),
    ("stale", "customers[C0001] was {'email': 'wrong@example.com'} when the episode was recorded but "
              "is {'email': 'pedro.kim1@example.com'} in seed + init now"),
    # graded, with a reward that is no reward: said so, not "not graded yet"
    ("reward 7", ("graded_episode record.reward: 7 is not one of [0, 1, None] (schema: "
                  "schemas/graded_episode.schema.json)\n")),
])
def test_bad_lines_stop_with_file_and_line_or_are_skipped(suite, tmp_path, bad, message):
    task_file, _, by_case, raw = suite
    if bad == "unknown":
        bad = orjson.dumps({**by_case["different"], "task_id": "no-such-task"}) + b"\n"
    elif bad == "ungraded":
        bad = orjson.dumps(raw["extra"]) + b"\n"
    elif bad == "reward 7":
        bad = orjson.dumps({**by_case["extra"], "episode_id": "seven", "reward": 7}) + b"\n"
    elif bad == "stale":  # a diff that no longer applies to seed + init: grade refuses it too
        stale = copy.deepcopy(by_case["extra"])
        stale["changes"]["customers"]["updated"][0]["before"]["email"] = "wrong@example.com"
        stale["episode_id"] = "stale"  # another episode, not the first line's again
        bad = orjson.dumps(stale) + b"\n"
    message = message.replace("{tasks}", str(task_file))
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(orjson.dumps(by_case["extra"]) + b"\n" + bad + orjson.dumps(by_case["missing"]) + b"\n")
    p = run_tool("grade", "audit", "--tasks", str(task_file), str(path))
    assert p.returncode == 4
    assert p.stderr.startswith(f"{path}:2: {message}"), p.stderr
    assert [r["task_id"] for r in records(p.stdout)] == ["audit-frees-customers"]  # before the bad line
    p = run_tool("grade", "audit", "--skip-invalid", "--tasks", str(task_file), str(path))
    assert p.returncode == 0, p.stderr
    assert [r["task_id"] for r in records(p.stdout)] == ["audit-frees-customers", "audit-email-unpinned"]
    assert f"skipped 1 invalid line(s):\n  {path}:2: {message}" in p.stderr


def test_an_episode_given_twice_is_audited_once_or_refused(suite, tmp_path):
    task_file, _, by_case, _ = suite
    path = tmp_path / "twice.jsonl"
    path.write_bytes(orjson.dumps(by_case["extra"]) + b"\n" + orjson.dumps(by_case["missing"]) + b"\n"
                     + orjson.dumps(by_case["extra"]) + b"\n")
    p = run_tool("grade", "audit", "--tasks", str(task_file), str(path))
    assert p.returncode == 4, p.stderr
    assert p.stderr.startswith(f"{path}:3: duplicate graded episode: episode_id "
                               f"{by_case['extra']['episode_id']!r} is already at {path}:1"), p.stderr
    for mode in ("first", "last"):
        p = run_tool("grade", "audit", "--duplicates", mode, "--tasks", str(task_file), str(path))
        assert p.returncode == 0, p.stderr
        found = [r["task_id"] for r in records(p.stdout)]
        assert sorted(found) == ["audit-email-unpinned", "audit-frees-customers"], found
        assert p.stderr.startswith("audited 2 success(es) of 2 task(s)") and "duplicate ×1" in p.stderr


def test_differing_rows_compares_deletes_and_updates_column_by_column(domains):
    tables = domains["retail"].tables
    key = {"id": "W1"}
    before = {"id": "W1", "status": "pending", "cancel_reason": None, "total": 10.0}
    cancelled = {"orders": {"updated": [{"key": key, "before": {"status": "pending", "cancel_reason": None},
                                         "after": {"status": "cancelled", "cancel_reason": "x"}}]}}
    moved = {"orders": {"updated": [{"key": key, "before": {"status": "pending"},
                                     "after": {"status": "cancelled"}}]}}
    deleted = {"orders": {"deleted": [{"key": key, "row": before}]}}
    assert differing_rows(tables, cancelled, cancelled) == []
    assert differing_rows(tables, moved, cancelled) == [
        {"kind": "different", "table": "orders", "key": key, "gold": "updated", "episode": "updated",
         "columns": {"cancel_reason": {"gold": "x", "episode": None}}}]
    # a deleted row is absent from that end state: every column it had differs
    assert differing_rows(tables, deleted, moved)[0]["columns"] == {
        "id": {"gold": "W1", "episode": None}, "status": {"gold": "cancelled", "episode": None},
        "total": {"gold": 10.0, "episode": None}}
    assert differing_rows(tables, deleted, {})[0]["kind"] == "extra"
