"""grade: every check kind on real retail end states, the reward rule, re-grading stored episodes,
and FILE:LINE errors from the command line."""

import copy
import json

import orjson
import pytest
from conftest import ROOT, run_tool
from openai_double import FakeEndpoint

from endstate.core.episode.replays import replay
from endstate.core.errors import EndstateError
from endstate.core.grading.grader import Grader
from endstate.core.grading.judge import Judge

BENCH = ROOT / "tasks" / "bench" / "retail.jsonl"


@pytest.fixture(scope="module")
def grader(domains):
    return Grader(domains)


def task_with(tasks, task_id, checks):
    task = copy.deepcopy(tasks.get(task_id))
    task["checks"] = checks
    return task


def grade_steps(grader, task, steps):
    episode = replay(grader.domains[task["domain"]], task, steps)
    return grader.grade(episode, task)


def task_defect(graded, message):
    """A check that cannot be evaluated costs its episode (system_error, kind task), never a 0."""
    assert (graded["status"], graded["reward"], graded["error"]["kind"]) == ("system_error", None, "task")
    assert message in graded["error"]["message"], graded["error"]["message"]


def details(graded):
    return [c["detail"] for c in graded["checks"]]


# -- the reward rule and the declarative kinds ------------------------------------------------

def test_gold_scores_one_and_doing_nothing_scores_zero(grader, tasks):
    task = tasks.get("retail-cancel-pending")
    assert grade_steps(grader, task, task["gold"])["reward"] == 1
    nothing = grade_steps(grader, task, [])
    assert nothing["reward"] == 0
    assert details(nothing)[0] == "orders[W90001].status: expected 'cancelled', got 'pending'; " \
                                  "orders[W90001].cancel_reason: expected 'no_longer_needed', got None"


def test_row_check_needs_exactly_one_row_and_supports_operators(grader, tasks):
    gold = tasks.get("retail-cancel-pending")["gold"]
    row = lambda where, expect: {"kind": "row", "table": "orders", "where": where, "expect": expect}
    task = task_with(tasks, "retail-cancel-pending", [
        row({"id": "W90001"}, {"status": {"any_of": ["cancelled", "refunded"]},
                               "total": {"approx": 84.49, "tol": 0.02}, "shipped_at": {"is_null": True},
                               "cancel_reason": {"not": "ordered_by_mistake"}}),
        row({"id": "W0"}, {"status": "cancelled"}),
        row({"customer_id": "C0001"}, {"status": "cancelled"}),
    ])
    checks = grade_steps(grader, task, gold)["checks"]
    assert [c["passed"] for c in checks] == [True, False, False, True]  # the unrequested-change guard last
    assert checks[1]["detail"] == "orders where id='W0': expected one row, found no row"
    assert checks[2]["detail"].startswith("orders where customer_id='C0001': expected one row, found ")


def test_absent_and_count(grader, tasks):
    task = tasks.get("retail-refund-before-received-trap")
    forbidden = task["gold"][:2] + [{"tool": "issue_refund", "args": {"return_id": "RT90001"}}]
    graded = grade_steps(grader, task, forbidden)
    assert graded["reward"] == 0
    assert details(graded)[:2] == [
        "refunds where order_id='W90021': expected no row, found 1: refunds[RF00347]",
        "escalations where order_id='W90021', customer_id=one of 'C9002', None: expected 1 row(s), got 0"]


def test_sql_check_scalar_rows_and_read_only(grader, tasks):
    gold = tasks.get("retail-change-email-by-name")["gold"]
    sql = lambda q, expect: {"kind": "sql", "query": q, "expect": expect}
    task = task_with(tasks, "retail-change-email-by-name", [
        sql("SELECT email FROM customers WHERE id = 'C9005'", "ada.ok@newmail.example"),
        sql("SELECT id, zip FROM customers WHERE id = 'C9005'", [["C9005", "27601"]]),
        sql("SELECT count(*) FROM customers WHERE id = 'C9005'", 2)])
    checks = grade_steps(grader, task, gold)["checks"]
    assert [c["passed"] for c in checks] == [True, True, False, True]
    assert checks[2]["detail"] == "query returned 1, expected 2"
    writes = task_with(tasks, "retail-change-email-by-name", [sql("DELETE FROM customers", 0)])
    task_defect(grade_steps(grader, writes, gold), "check 0:sql: query failed: not authorized")


def test_one_extra_unrelated_change_scores_zero_and_names_the_row(grader, tasks):
    task = tasks.get("retail-cancel-pending")
    assert grade_steps(grader, task, task["gold"])["reward"] == 1
    extra = task["gold"] + [{"tool": "update_customer_email",
                             "args": {"customer_id": "C0005", "email": "someone@else.example"}}]
    graded = grade_steps(grader, task, extra)
    assert graded["reward"] == 0
    side_effects = next(c for c in graded["checks"] if c["kind"] == "only_changes")
    assert side_effects["detail"].startswith("unexpected change: customers[C0005] updated (email: '")
    assert side_effects["detail"].endswith("' → 'someone@else.example')")
    guard = next(c for c in graded["checks"] if c["kind"] == "footprint")  # the guard sees it too
    assert guard["detail"].startswith("unrequested change: customers[C0005] updated: email '")
    assert guard["detail"].endswith("' → 'someone@else.example' (a row the task leaves alone)")


def test_only_changes_counts_and_ignorable_columns(grader, tasks):
    task = tasks.get("retail-update-address")
    graded = grade_steps(grader, task, task["gold"])
    assert graded["reward"] == 1  # updated_at changed too, and is ignored
    strict = task_with(tasks, "retail-update-address", [
        {"kind": "only_changes", "allow": [{"table": "orders", "where": {"id": "W90031"}, "count": 2}]}])
    assert details(grade_steps(grader, strict, task["gold"])) == [
        "expected 2 change(s) in orders where id='W90031', found 1",
        "1 written row(s), all within the gold's footprint"]


def test_gold_state_compares_terminal_states(grader, tasks):
    task = tasks.get("retail-cancel-one-move-other")
    assert grade_steps(grader, task, task["gold"])["reward"] == 1
    wrong = copy.deepcopy(task["gold"])
    wrong[2]["args"]["address"] = "1 Wrong Way, Madison, WI 53703"
    graded = grade_steps(grader, task, wrong)
    assert graded["reward"] == 0
    assert details(graded)[0].startswith("terminal state differs from gold: orders[W90062]: gold leaves "
                                         "{'shipping_address': '400 Lake Shore Dr")


def test_said_normalizes_and_ignores_reasoning(grader, tasks):
    task = tasks.get("retail-latest-order-total")
    lookups = task["gold"][:2]
    for text, reward in [("It was $1,212.40.", 1), ("Your total: 1212.4 dollars", 1),
                         ("<think>it is 1212.40</think>I cannot tell you.", 0), ("About 1212.", 0)]:
        assert grade_steps(grader, task, lookups + [{"say": text}])["reward"] == reward, text
    episode = replay(grader.domains["retail"], task, lookups + [{"say": "Here you go."}])
    episode["messages"][-1]["reasoning"] = "the total is 1212.40"
    assert grader.grade(episode, task)["reward"] == 0
    assert details(grader.grade(episode, task))[0] == "the agent never told the user 1212.4"


def test_python_check(grader, tasks):
    task = tasks.get("retail-refund-received-return")
    assert grade_steps(grader, task, task["gold"])["checks"][0] == {
        "id": "refund-right", "kind": "python", "passed": True, "detail": "refunds[RF00347]: 59.98 to PM90002"}
    missing = task_with(tasks, "retail-refund-received-return", [{"kind": "python", "name": "nope"}])
    task_defect(grade_steps(grader, missing, []), "no python check function 'nope'")


def test_system_error_episodes_are_never_scored(grader, tasks):
    task = tasks.get("retail-cancel-pending")
    episode = replay(grader.domains["retail"], task, [])
    episode.update(status="system_error", error={"kind": "endpoint", "message": "HTTP 503"})
    graded = grader.grade(episode, task)
    assert graded["reward"] is None and graded["checks"] == []


def test_episode_from_another_seed_is_refused(grader, tasks):
    task = tasks.get("retail-cancel-pending")
    episode = replay(grader.domains["retail"], task, task["gold"])
    episode["seed_digest"] = "sha256:" + "0" * 64
    with pytest.raises(EndstateError, match="was recorded on seed sha256:0000"):
        grader.grade(episode, task)


# -- the judge ----------------------------------------------------------------------------------

def judged(tasks):
    return tasks.get("retail-cancel-with-confirmation")


def test_judge_yes_no_and_cached_verdicts(domains, tasks, tmp_path):
    task = judged(tasks)
    episode = replay(domains["retail"], task, task["gold"])
    with FakeEndpoint(["YES", "NO."]) as endpoint:
        judge = Judge("judge-model", endpoint.base_url, cache_path=tmp_path / "j.sqlite")
        graded = Grader(domains, judge).grade(episode, task)
        assert graded["reward"] == 1
        assert graded["checks"][2]["detail"].startswith("judge judge-model answered YES")
        assert graded["usage"]["judge"] == {"prompt_tokens": 100, "completion_tokens": 1, "calls": 1,
                                            "cache_hits": 0}
        assert "TOOL RESULT" in endpoint.requests[0]["messages"][1]["content"]
        again = Grader(domains, Judge("judge-model", endpoint.base_url, cache_path=tmp_path / "j.sqlite"))
        cached = again.grade(episode, task)
        assert cached["reward"] == 1 and cached["usage"]["judge"]["cache_hits"] == 1
        assert len(endpoint.requests) == 1  # the second verdict came from the cache
        other = replay(domains["retail"], task, task["gold"] + [{"say": "Done."}])
        assert again.grade(other, task)["reward"] == 0  # a new transcript asks again: "NO."


def test_judge_is_not_asked_when_another_check_failed(domains, tasks, tmp_path):
    task = judged(tasks)
    with FakeEndpoint(["YES"]) as endpoint:
        grader = Grader(domains, Judge("m", endpoint.base_url, cache_path=tmp_path / "j.sqlite"))
        graded = grader.grade(replay(domains["retail"], task, []), task)
        assert graded["reward"] == 0 and endpoint.requests == []
        assert graded["checks"][2]["passed"] is None


@pytest.mark.parametrize("answers, message", [
    ([500, 500], "judge endpoint failed (http_5xx): EndpointError: POST"),
    (["Maybe?", "It depends."], "judge gave no YES/NO after 2 tries: 'It depends.'"),
])
def test_a_judge_that_cannot_answer_is_a_system_error(domains, tasks, tmp_path, answers, message):
    task = judged(tasks)
    with FakeEndpoint(answers) as endpoint:
        judge = Judge("m", endpoint.base_url, cache_path=tmp_path / "j.sqlite", retries=2)
        graded = Grader(domains, judge).grade(replay(domains["retail"], task, task["gold"]), task)
    assert graded["status"] == "system_error" and graded["reward"] is None
    assert graded["error"]["kind"] == "judge" and graded["error"]["message"].startswith(message)


# -- the command line ---------------------------------------------------------------------------

@pytest.fixture
def stored(tmp_path, domains, tasks):
    """Episodes on disk, as rollout would have left them: gold replays of three tasks."""
    path = tmp_path / "episodes.jsonl"
    ids = ["retail-cancel-pending", "retail-update-address", "retail-return-defective"]
    path.write_bytes(b"".join(orjson.dumps(replay(domains["retail"], tasks.get(i), tasks.get(i)["gold"]))
                              + b"\n" for i in ids))
    return path


def rewards(stdout):
    return [(r["task_id"], r["reward"]) for r in map(json.loads, stdout.splitlines())]


def test_regrading_stored_episodes_with_a_changed_check(stored, tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(BENCH.read_text())
    first = run_tool("grade", "--tasks", str(tasks), str(stored))
    assert first.returncode == 0, first.stderr
    assert rewards(first.stdout) == [("retail-cancel-pending", 1), ("retail-update-address", 1),
                                     ("retail-return-defective", 1)]
    assert "graded 3: reward 1 ×3, 0 ×0, system_error ×0" in first.stderr
    episodes_before = stored.read_bytes()
    tasks.write_text(BENCH.read_text().replace('"shipping_address": "400 Lake Shore Dr, Madison, WI 53703", "status": "pending"',
                                               '"shipping_address": "500 Lake Shore Dr, Madison, WI 53703", "status": "pending"'))
    second = run_tool("grade", "score", "--tasks", str(tasks), "-", input=stored.read_text())
    assert rewards(second.stdout)[1] == ("retail-update-address", 0)
    graded = json.loads(second.stdout.splitlines()[1])
    assert graded["checks"][0]["detail"] == ("orders[W90031].shipping_address: expected '500 Lake Shore Dr, "
                                             "Madison, WI 53703', got '400 Lake Shore Dr, Madison, WI 53703'")
    assert stored.read_bytes() == episodes_before


@pytest.mark.parametrize("bad_line, message", [
    (b'{"episode_id": "x",\n', "not valid JSON"),
    (b'{"episode_id": "x"}\n', "episode record: 'task_id' is a required property"),
    (None, "unknown task id 'no-such-task' (not in the built-in suites); pass --tasks FILE that defines it"),
])
def test_bad_lines_stop_with_file_and_line_or_are_skipped(stored, tmp_path, bad_line, message):
    lines = stored.read_bytes().splitlines(keepends=True)
    if bad_line is None:
        episode = json.loads(lines[0])
        episode["task_id"] = "no-such-task"
        bad_line = orjson.dumps(episode) + b"\n"
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(lines[0] + bad_line + lines[1])
    p = run_tool("grade", str(path))
    assert p.returncode == 4
    assert p.stderr.startswith(f"{path}:2: {message}")
    assert len(p.stdout.splitlines()) == 1  # what was graded before the bad line is kept
    p = run_tool("grade", "--skip-invalid", str(path))
    assert p.returncode == 0
    assert len(p.stdout.splitlines()) == 2
    assert f"skipped 1 invalid line(s):\n  {path}:2: {message}" in p.stderr


def test_validate_builtin_tasks_are_sound():
    p = run_tool("grade", "validate")
    assert p.returncode == 0, p.stderr
    verdicts = [json.loads(line) for line in p.stdout.splitlines()]
    assert len(verdicts) >= 12 and all(v["sound"] for v in verdicts)


def test_validate_names_the_task_and_the_uncovered_call(tmp_path):
    tasks = [json.loads(line) for line in BENCH.read_text().splitlines()]
    target = next(t for t in tasks if t["id"] == "retail-cancel-with-confirmation")
    target["checks"] = [c for c in target["checks"] if c["id"] != "cancelled"]
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    p = run_tool("grade", "validate", str(path))
    assert p.returncode == 1
    bad = [json.loads(line) for line in p.stdout.splitlines() if not json.loads(line)["sound"]]
    assert [v["task_id"] for v in bad] == ["retail-cancel-with-confirmation"]
    assert bad[0]["uncovered_calls"] == [{"index": 3, "tool": "cancel_order",
                                          "args": {"order_id": "W90071", "reason": "no_longer_needed"}}]
    line = [t["id"] for t in tasks].index("retail-cancel-with-confirmation") + 1
    assert (f"{path}:{line}: task retail-cancel-with-confirmation is unsound: no check notices when "
            "gold call #3 cancel_order(order_id='W90071', reason='no_longer_needed') is left out") in p.stderr


def test_validate_reports_failing_gold_and_vacuous_checks(tmp_path, tasks):
    broken = copy.deepcopy(tasks.get("retail-cancel-pending"))
    broken["gold"][2]["args"]["order_id"] = "W99999"
    vacuous = copy.deepcopy(tasks.get("retail-cancel-pending"))
    vacuous["id"] = "vacuous"
    vacuous["checks"] = [{"kind": "absent", "table": "escalations", "where": {"order_id": "W90001"}}]
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(broken) + "\n" + json.dumps(vacuous) + "\n")
    p = run_tool("grade", "validate", str(path))
    assert p.returncode == 1
    first, second = map(json.loads, p.stdout.splitlines())
    assert any(p.startswith('gold call #2 cancel_order failed: {"error":"order W99999 not found"}')
               for p in first["problems"])
    marked = copy.deepcopy(broken)
    marked["gold"][2]["fails"] = True  # as tau2 keeps a gold call that fails: no longer a problem
    path.write_text(json.dumps(marked) + "\n")
    problems = json.loads(run_tool("grade", "validate", str(path)).stdout)["problems"]
    assert not any("#2 cancel_order failed" in p for p in problems), problems
    working = copy.deepcopy(tasks.get("retail-cancel-pending"))
    working["gold"][2]["fails"] = True
    path.write_text(json.dumps(working) + "\n")
    problems = json.loads(run_tool("grade", "validate", str(path)).stdout)["problems"]
    assert 'gold call #2 cancel_order is marked "fails" but succeeded' in problems
    assert "doing nothing passes every check: add a check on the intended outcome" in second["problems"]
