"""Long campaigns never die: a bad answer, a bad record or a bad task costs at most its episode or
its line, never the run, and no tool writes a record its own readers reject.

The endpoint is the project's OpenAI double (tests/openai_double.py), at the edge we do not own;
probe, rollout and grade run as subprocesses on real built-in tasks and a real SQLite domain."""

from __future__ import annotations

import asyncio
import os
import subprocess

import orjson
import pytest
from click.testing import CliRunner
from conftest import BIN, ROOT, run_tool
from openai_double import FakeEndpoint, Raw, gold_policy
from test_sandbox import make_domain

from endstate.core.env.domain import Domains
from endstate.core.episode.plan import done_keys
from endstate.core.episode.replays import replay
from endstate.core.errors import ConfigurationError, EndstateError, InputError
from endstate.core.grading.grader import Grader
from endstate.core.grading.judge import Judge, JudgeError
from endstate.core.records import schemas
from endstate.core.records.jsonl import checked_line

RETAIL = ROOT / "tasks" / "bench" / "retail.jsonl"


def retail_tasks(n: int) -> list[dict]:
    tasks = [orjson.loads(line) for line in RETAIL.read_bytes().splitlines() if line.strip()]
    return [t for t in tasks if all(c["kind"] != "judge" for c in t["checks"])][:n]


def write_jsonl(path, records) -> str:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return str(path)


def records(text: str | bytes) -> list[dict]:
    data = text.encode() if isinstance(text, str) else text
    return [orjson.loads(line) for line in data.splitlines() if line.strip()]


def valid(kind: str, rows: list[dict]) -> None:
    for row in rows:
        assert schemas.problem(kind, row) is None, schemas.problem(kind, row)


def chat(message: dict, usage: dict | None = None) -> Raw:
    return Raw({"choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": usage if usage is not None else {"prompt_tokens": 10, "completion_tokens": 2}})


def call(name, arguments) -> dict:
    return {"id": "x", "type": "function", "function": {"name": name, "arguments": arguments}}


# -- classes 1-3: malformed answers cost one episode, and every record reads back -------------------

FIRST_ANSWERS = {  # what the endpoint answers to each task's first model call
    "tool_call item is a string": chat({"role": "assistant", "content": None, "tool_calls": ["get_order"]}),
    "message is null": Raw({"choices": [{"index": 0, "message": None}]}),
    "usage is not a count": chat({"role": "assistant", "content": "Hi"}, {"completion_tokens": "many"}),
    "negative usage": chat({"role": "assistant", "content": "Hi"}, {"prompt_tokens": -5}),
    "arguments not JSON": chat({"role": "assistant", "content": None,
                                "tool_calls": [call("get_order", "{oops"), call("get_order", '{"order_id": "W1"}')]}),
    "arguments a list": chat({"role": "assistant", "content": None, "tool_calls": [call("get_order", [1])]}),
    "arguments an object": chat({"role": "assistant", "content": None,
                                 "tool_calls": [call("get_order", {"order_id": "W1"})]}),
    "no function name": chat({"role": "assistant", "content": None,
                              "tool_calls": [{"id": "x", "type": "function", "function": {"arguments": "{}"}}]}),
    "answer is a list": Raw([1, 2, 3]),
}


def test_malformed_chat_answers_cost_one_episode_each_and_the_run_exits_0(tmp_path):
    tasks = retail_tasks(len(FIRST_ANSWERS) + 1)
    by_opening = dict(zip((t["user"]["opening"] for t in tasks), FIRST_ANSWERS.values()))
    gold = gold_policy(tasks)

    def policy(body):
        messages = body["messages"]
        start = next((i for i, m in enumerate(messages) if m.get("content") in by_opening), None)
        if start is not None:
            first = not any(m["role"] == "assistant" for m in messages[start:])
            return by_opening[messages[start]["content"]] if first else "Done."
        return gold(body)  # the last task: a control that does the job

    episodes = tmp_path / "episodes.jsonl"
    with FakeEndpoint(policy=policy) as endpoint:
        p = run_tool("probe", write_jsonl(tmp_path / "t.jsonl", tasks), "--backend", "chat",
                     "--agent-url", endpoint.base_url, "--model", "double", "-n", "1", "-j", "4",
                     "--retries", "1", "--episodes", str(episodes))
    assert p.returncode == 0, p.stderr
    attempts = {a["task_id"]: a for a in records(p.stdout)}
    assert len(attempts) == len(tasks)
    valid("attempt", attempts.values())
    graded = {e["task_id"]: e for e in records(episodes.read_bytes())}
    valid("graded_episode", graded.values())
    by_case = dict(zip(FIRST_ANSWERS, (t["id"] for t in tasks)))

    for case in ("message is null", "usage is not a count", "negative usage", "answer is a list"):
        a = attempts[by_case[case]]
        assert (a["status"], a["reward"], a["error"]["kind"]) == ("system_error", None, "protocol"), case
    first_turn = {case: graded[by_case[case]]["messages"][2] for case in FIRST_ANSWERS
                  if graded[by_case[case]]["status"] == "ok"}
    assert "names no function" in first_turn["tool_call item is a string"]["parse_error"]
    assert "names no function" in first_turn["no function name"]["parse_error"]
    assert "unreadable arguments" in first_turn["arguments a list"]["parse_error"]
    bad_json = first_turn["arguments not JSON"]  # the readable call beside the bad one is kept
    assert "unreadable arguments for get_order" in bad_json["parse_error"]
    assert [c["function"]["arguments"] for c in bad_json["tool_calls"]] == ['{"order_id":"W1"}']
    assert orjson.loads(first_turn["arguments an object"]["tool_calls"][0]["function"]["arguments"]) == {
        "order_id": "W1"}
    assert attempts[tasks[-1]["id"]]["reward"] == 1
    # What the endpoint was shown next: tool results answer the ids of the calls it was shown.
    shown = [m for r in endpoint.requests for m in r.get("messages", [])]
    ids = {c["id"] for m in shown if m["role"] == "assistant" for c in m.get("tool_calls") or []}
    assert {m["tool_call_id"] for m in shown if m["role"] == "tool"} <= ids


def test_token_ids_outside_the_vocabulary_are_protocol_errors(tmp_path):
    tasks = retail_tasks(3)
    answers = iter([Raw({"choices": [{"token_ids": [-1], "logprobs": None}]}),
                    Raw({"choices": [{"token_ids": [10 ** 9]}]}),
                    Raw({"choices": [{"token_ids": [1, 2], "logprobs": {"token_logprobs": ["x"]}}]})])
    with FakeEndpoint(completions=lambda body: next(answers)) as endpoint:
        p = run_tool("rollout", "run", write_jsonl(tmp_path / "t.jsonl", tasks), "--backend",
                     "completions", "--agent-url", endpoint.base_url, "--model", "double",
                     "--tokenizer", "embedded", "-j", "1", "--retries", "1")
    assert p.returncode == 0, p.stderr
    episodes = records(p.stdout)
    valid("episode", episodes)
    assert [(e["status"], e["error"]["kind"]) for e in episodes] == [("system_error", "protocol")] * 3
    assert "not ids of this tokenizer's vocabulary" in episodes[0]["error"]["message"]


def test_the_writer_refuses_a_record_its_readers_would_reject():
    attempt = {"task_id": "t", "attempt": 0, "reward": 1, "status": "ok", "episode_id": "t#0",
               "usage": {"agent": {"prompt_tokens": -1, "completion_tokens": 0}}}
    with pytest.raises(EndstateError, match="refusing to write attempt t#0.*usage") as e:
        checked_line("attempt", attempt)
    assert e.value.exit_code == 70
    attempt["usage"]["agent"]["prompt_tokens"] = 1
    assert orjson.loads(checked_line("attempt", attempt)) == attempt


# -- class 4 and 9: checks are bounded and isolated ---------------------------------------------

COMMITS = '''
def commits(conn, messages):
    conn.set_authorizer(None)
    conn.execute("PRAGMA query_only = 0")
    conn.execute("UPDATE items SET qty = 1000")
    conn.execute("COMMIT")
    return True
'''
CHECKS = COMMITS + '''
def bad_params(conn, messages, wanted):
    return True

not_a_function = 3

def loops(conn, messages):
    while True:
        try:
            conn.execute("SELECT 1")
        except Exception:  # swallows what it can: the budget must still end it
            pass
'''

TOOLS_EXTRA = '''

@tool(writes=True)
def lock(db: Db) -> dict:
    """Sets a connection-level pragma."""
    db.run("PRAGMA query_only = 1")
    return {}
'''


@pytest.fixture
def shop(tmp_path, monkeypatch):
    monkeypatch.setenv("ENDSTATE_CACHE", str(tmp_path / "cache"))
    d = make_domain(tmp_path / "domains")
    (d / "checks.py").write_text(CHECKS)
    (d / "tools.py").write_text((d / "tools.py").read_text() + TOOLS_EXTRA)
    return Domains([str(d)])


def shop_task(*checks: dict) -> dict:
    return {"id": "s1", "domain": "shop", "user": {"instruction": "i", "opening": "o"},
            "checks": list(checks), "gold": [{"tool": "set_qty", "args": {"item_id": "I1", "qty": 5}}]}


QTY_IS_5 = {"kind": "row", "table": "items", "where": {"id": "I1"}, "expect": {"qty": 5}}
NEVER_ENDS = {"kind": "sql", "query": "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) "
                                      "SELECT count(*) FROM r", "expect": 1}


def test_a_check_that_never_ends_is_a_task_defect_not_a_zero(shop):
    from endstate.grade.validate import validate_task

    grader = Grader(shop, check_steps=2_000_000)
    task = shop_task(QTY_IS_5, NEVER_ENDS)
    graded = grader.grade(replay(shop["shop"], task, task["gold"]), task)
    assert (graded["status"], graded["reward"], graded["error"]["kind"]) == ("system_error", None, "task")
    assert "check 1:sql: ran past 2,000,000 SQLite steps" in graded["error"]["message"]
    verdict = validate_task(grader, task)
    assert not verdict["sound"] and "ran past" in verdict["problems"][0]
    task = shop_task(QTY_IS_5)  # the budget is per check, and the next one runs normally
    assert grader.grade(replay(shop["shop"], task, task["gold"]), task)["reward"] == 1


def test_nothing_a_tool_or_a_check_does_outlives_its_episode(shop):
    domain = shop["shop"]
    task = shop_task(QTY_IS_5)
    locked = replay(domain, task, [{"tool": "lock", "args": {}}, *task["gold"]])
    assert "not authorized" in next(m["content"] for m in locked["messages"] if m["role"] == "tool")  # denied
    assert Grader(shop).grade(locked, task)["reward"] == 1  # and the next write still works
    grader = Grader(shop)
    committing = shop_task({"kind": "python", "name": "commits"}, QTY_IS_5)
    graded = grader.grade(replay(domain, committing, committing["gold"]), committing)
    assert graded["error"]["kind"] == "task" and "ended the grading transaction" in graded["error"]["message"]
    after = shop_task({"kind": "row", "table": "items", "where": {"id": "I2"}, "expect": {"qty": 1000}})
    assert grader.grade(replay(domain, after, []), after)["reward"] == 0  # the commit did not persist


def test_a_python_check_that_never_ends_is_a_task_defect(shop, monkeypatch):
    import sys

    from endstate.core.grading import checks

    monkeypatch.setattr(checks, "PYTHON_LINES", 100_000)  # 20M in production: ~3 s traced
    task = shop_task({"kind": "python", "name": "loops"}, QTY_IS_5)
    tracer = sys.gettrace()
    graded = Grader(shop).grade(replay(shop["shop"], task, task["gold"]), task)
    assert (graded["status"], graded["reward"], graded["error"]["kind"]) == ("system_error", None, "task")
    assert "check 0:python: loops ran past 100,000 Python lines" in graded["error"]["message"]
    assert sys.gettrace() is tracer  # a debugger's or coverage's tracer is back
    task = shop_task(QTY_IS_5)  # the next task grades normally
    assert Grader(shop).grade(replay(shop["shop"], task, task["gold"]), task)["reward"] == 1

@pytest.mark.parametrize("check, message", [
    ({"kind": "python", "name": "bad_params"}, "bad_params(conn, messages, **{}) raised TypeError"),
    ({"kind": "python", "name": "not_a_function"}, "no python check function 'not_a_function'"),
])
def test_a_python_check_that_cannot_run_names_the_task_and_check(shop, check, message):
    task = shop_task(check)
    graded = Grader(shop).grade(replay(shop["shop"], task, task["gold"]), task)
    assert graded["error"]["kind"] == "task"
    assert graded["error"]["message"].startswith("task s1 check 0:python: ") and message in graded["error"]["message"]


# -- class 6: the documented resume recipe is safe -------------------------------------------------

@pytest.mark.parametrize("tail", [b'{"task_id": "ret', b"whole"])
def test_resume_appending_to_its_own_file_repairs_the_last_line(tmp_path, tail):
    tasks = retail_tasks(2)
    tasks_file = write_jsonl(tmp_path / "t.jsonl", tasks)
    attempts = tmp_path / "attempts.jsonl"
    with FakeEndpoint(policy=gold_policy(tasks)) as endpoint:
        args = [str(BIN / "probe"), tasks_file, "--backend", "chat", "--agent-url", endpoint.base_url,
                "--model", "double", "-n", "2", "-q"]
        first = subprocess.run(args, capture_output=True, env=os.environ, check=True).stdout.splitlines()
        kept = first[:2]
        if tail == b"whole":  # a complete record without its newline (hand-edited, or cut exactly there)
            attempts.write_bytes(b"\n".join(kept[:1]) + b"\n" + kept[1])
        else:
            attempts.write_bytes(b"\n".join(kept) + b"\n" + tail)
        with open(attempts, "ab") as out:  # probe ... --resume F >> F
            subprocess.run([*args, "--resume", str(attempts)], stdout=out, env=os.environ, check=True)
    rows = records(attempts.read_bytes())  # every line parses
    keys = [(a["task_id"], a["attempt"]) for a in rows]
    assert sorted(keys) == sorted({(t["id"], a) for t in tasks for a in range(2)})  # none lost, none twice


def test_a_garbage_line_inside_a_resume_file_is_a_bad_record_naming_its_line(tmp_path):
    # Only the last line may be cut (a killed run); garbage before it is not this tool's output.
    resume = tmp_path / "attempts.jsonl"
    resume.write_bytes(b'{"task_id": "a", "attempt": 0, "status": "ok"}\nnot json\n'
                       b'{"task_id": "a", "attempt": 1, "status": "ok"}\n')
    with pytest.raises(InputError, match=f"{resume}:2: not a record") as e:
        done_keys(str(resume))
    assert e.value.exit_code == 4


# -- class 7: preconditions before the first episode ----------------------------------------------

def test_tasks_that_cannot_run_are_found_before_any_episode(tmp_path):
    ok, judged = retail_tasks(1)[0], next(
        t for t in map(orjson.loads, RETAIL.read_bytes().splitlines()) if any(
            c["kind"] == "judge" for c in t["checks"]))
    elsewhere = {**ok, "id": "nowhere", "domain": "atlantis"}
    tasks_file = write_jsonl(tmp_path / "t.jsonl", [ok, judged, elsewhere])
    with FakeEndpoint(policy=gold_policy([ok])) as endpoint:
        common = [tasks_file, "--backend", "chat", "--agent-url", endpoint.base_url, "--model", "d", "-n", "1"]
        p = run_tool("probe", *common)
        assert p.returncode == 4 and f"{tasks_file}:2: task {judged['id']}: has a judge check" in p.stderr
        assert endpoint.requests == []  # nothing ran
        p = run_tool("rollout", "run", *common)  # rollout does not grade: only the domain matters
        assert p.returncode == 4 and f"{tasks_file}:3: task nowhere: unknown domain 'atlantis'" in p.stderr
        p = run_tool("probe", *common, "--skip-invalid")
    assert p.returncode == 0, p.stderr
    assert [a["task_id"] for a in records(p.stdout)] == [ok["id"]]
    assert "skipped 2 invalid line(s)" in p.stderr


# -- class 8: bad diffs and mismatched episodes are input errors with FILE:LINE ---------------------

def test_bad_episodes_are_named_by_line_and_the_rest_are_graded(tmp_path, domains, tasks):
    task = tasks.get("retail-cancel-pending")
    good = replay(domains["retail"], task, task["gold"])
    table = next(t for t, entry in good["changes"].items() if entry.get("updated"))
    updated = good["changes"][table]["updated"][0]
    unknown_column = orjson.loads(orjson.dumps(good))
    unknown_column["changes"][table]["updated"][0]["after"] = {"no_such_column": 1}
    wrong_key = orjson.loads(orjson.dumps(good))
    wrong_key["changes"][table]["updated"][0]["key"] = {"nope": updated["key"][next(iter(updated["key"]))]}
    other_domain = {**good, "domain": "bank"}
    path = write_jsonl(tmp_path / "e.jsonl", [unknown_column, wrong_key, other_domain, good])
    p = run_tool("grade", path)
    assert p.returncode == 4 and f"{path}:1:" in p.stderr and "no_such_column" in p.stderr, p.stderr
    p = run_tool("grade", path, "--skip-invalid")
    assert p.returncode == 0, p.stderr
    assert [g["reward"] for g in records(p.stdout)] == [1]
    assert f"{path}:2:" in p.stderr and "key must name the key column" in p.stderr
    assert f"{path}:3:" in p.stderr and "ran in domain 'bank'" in p.stderr


# -- class 10 and 15: flags and I/O ----------------------------------------------------------------

@pytest.mark.parametrize("args, flag", [
    (["-j", "0"], "--jobs"), (["--retries", "0"], "--retries"), (["--max-turns", "0"], "--max-turns"),
    (["-n", "-1"], "--repeats"), (["--timeout", "0"], "--timeout"), (["--top-p", "0"], "--top-p"),
    (["--temperature", "-1"], "--temperature"), (["--max-new-tokens", "0"], "--max-new-tokens"),
])
def test_numeric_flags_out_of_range_are_usage_errors_naming_the_flag(args, flag):
    from endstate.rollout.cli import cli

    result = CliRunner().invoke(cli, ["run", str(RETAIL), *args])
    assert result.exit_code == 2 and flag in result.output, result.output


def test_a_full_disk_is_an_io_error_naming_stdout():
    with open("/dev/full", "wb") as full:
        p = subprocess.run([str(BIN / "grade"), "tasks"], stdout=full, stderr=subprocess.PIPE, text=True)
    assert p.returncode == 5 and "I/O error (writing to stdout): No space left on device" in p.stderr
    assert "Traceback" not in p.stderr


# -- class 11: one rule for 4xx from any endpoint --------------------------------------------------

def test_a_judge_answering_401_stops_the_run_and_a_5xx_is_a_system_error(tmp_path):
    messages = [{"role": "user", "content": "hi"}]
    with FakeEndpoint([401, 503]) as endpoint:
        judge = Judge("m", endpoint.base_url, cache_path=tmp_path / "j.sqlite", retries=1)
        with pytest.raises(ConfigurationError, match="HTTP 401.*not retried: fix the URL, key"):
            asyncio.run(judge.ask(messages, "Did the agent greet?"))
        with pytest.raises(JudgeError, match=r"judge endpoint failed \(http_5xx\)"):
            asyncio.run(judge.ask(messages, "Did the agent greet?"))


def test_duplicate_json_keys_keep_the_last_value_as_documented():
    doc = (ROOT / "docs" / "cli.md").read_text()
    assert "Duplicate keys in one JSON object" in doc and orjson.loads(b'{"reward": 0, "reward": 1}') == {"reward": 1}


# -- class 14: the prefill counts toward the context ------------------------------------------------

def test_the_tool_prefill_counts_toward_max_context():
    import asyncio

    from transformers import AutoTokenizer

    from endstate.core.agent.local_model import resolve_model
    from endstate.core.agent.sampling import Sampling
    from endstate.core.agent.tokens import TokenSession
    from endstate.core.agent.trace import ChatTemplate
    from endstate.core.records.structs import SystemMessage, UserMessage
    from endstate.core.wire.endpoints import ContextOverflow

    template = ChatTemplate(AutoTokenizer.from_pretrained(resolve_model("embedded")))

    async def never(prompt, prefix_len=0):
        raise AssertionError("sampled past the context")

    def session(prefill: bool) -> TokenSession:
        s = TokenSession(template, never, Sampling(max_new_tokens=16), 0, [], "", [], tool_prefill=prefill)
        s.observe([SystemMessage("Be brief."), UserMessage("Hello")])
        s.max_context = s.trace.length + 16  # exactly fits without the prefill
        return s

    with pytest.raises(ContextOverflow, match="would exceed --max-context"):
        asyncio.run(session(True).act())
    with pytest.raises(AssertionError, match="sampled past"):  # without prefill it fits: it samples
        asyncio.run(session(False).act())



def test_a_diff_that_breaks_the_schema_is_bad_input_with_its_line(tmp_path, domains, tasks):
    task = tasks.get("retail-cancel-pending")
    episode = replay(domains["retail"], task, task["gold"])
    table = next(t for t, entry in episode["changes"].items() if entry.get("updated"))
    column = next(iter(episode["changes"][table]["updated"][0]["after"]))
    episode["changes"][table]["updated"][0]["after"][column] = None  # NOT NULL in the schema
    path = write_jsonl(tmp_path / "e.jsonl", [episode])
    p = run_tool("grade", path)
    assert p.returncode == 4 and f"{path}:1:" in p.stderr and "breaks the domain's schema" in p.stderr, p.stderr


# -- found by a hostile review ----------------------------------------------------------------------

def test_a_composite_key_reads_the_same_in_any_order(domains, tasks):
    task = tasks.get("retail-return-defective")
    episode = replay(domains["retail"], task, task["gold"])
    assert any(len(e["key"]) > 1 for entry in episode["changes"].values() for es in entry.values() for e in es)
    reordered = orjson.loads(orjson.dumps(episode, option=orjson.OPT_SORT_KEYS))
    for entry in reordered["changes"].values():
        for changes in entry.values():
            for e in changes:
                e["key"] = dict(reversed(list(e["key"].items())))
    grader = Grader(domains)
    assert grader.grade(reordered, task)["reward"] == grader.grade(episode, task)["reward"] == 1


def test_an_update_naming_a_key_column_is_not_an_endstate_diff(domains, tasks):
    task = tasks.get("retail-cancel-pending")
    episode = replay(domains["retail"], task, task["gold"])
    table = next(t for t, entry in episode["changes"].items() if entry.get("updated"))
    update = episode["changes"][table]["updated"][0]
    column = next(iter(update["key"]))
    update["before"][column], update["after"][column] = update["key"][column], "X999"
    with pytest.raises(EndstateError, match="an update names key column"):
        Grader(domains).grade(episode, task)


RETURNS = '''
def returns_list(conn, messages):
    return [False, "nope"]

def returns_text(conn, messages):
    return "False"

def returns_nothing(conn, messages):
    pass

def returns_bad_detail(conn, messages):
    return (False, 123)
'''


@pytest.mark.parametrize("name", ["returns_list", "returns_text", "returns_nothing", "returns_bad_detail"])
def test_a_python_check_must_return_a_bool(shop, name):
    checks = shop["shop"].path / "checks.py"
    checks.write_text(checks.read_text() + RETURNS)
    domains = Domains([str(shop["shop"].path)])
    task = shop_task({"kind": "python", "name": name})
    graded = Grader(domains).grade(replay(domains["shop"], task, task["gold"]), task)
    assert graded["reward"] is None and graded["error"]["kind"] == "task"
    assert f"{name} returned" in graded["error"]["message"]


def test_unwritable_answers_cost_their_call_or_their_episode():
    from endstate.core.agent.chat import native_calls
    from endstate.core.wire.endpoints import EndpointFailure, usage_of

    deep = '{"order_id": ' + "[" * 300 + "]" * 300 + "}"  # orjson reads 1024 levels, writes 255
    calls, errors = native_calls({"tool_calls": [call("get_order", deep), call("get_order", '{"order_id": "W1"}')]},
                                 {})
    assert [(c.name, c.args()) for c in calls] == [("get_order", {"order_id": "W1"})]
    assert "unreadable arguments for get_order" in errors[0]
    with pytest.raises(EndpointFailure, match="usage.prompt_tokens is 18446744073709551615"):
        usage_of({"usage": {"prompt_tokens": 2 ** 64 - 1}})
    with pytest.raises(EndstateError, match="refusing to write attempt t#0.*64-bit"):
        checked_line("attempt", {"task_id": "t", "episode_id": "t#0", "attempt": 2 ** 70,
                                 "reward": 1, "status": "ok"})


@pytest.mark.parametrize("content, message", [
    (b'{"prompting": {"few_shot": tr', "not a prompting record"),
    (b"[1, 2]", "not a prompting record"),
    (b'{"prompting": {"tool_format": "xml"}}', "prompting.tool_format is 'xml'; expected json or signatures"),
    (b'{"prompting": {"few_shot": "false"}}', "prompting.few_shot is 'false'; expected true or false"),
])
def test_a_bad_prompting_record_names_its_file(tmp_path, content, message):
    from endstate.core.agent.prompting import PROMPTING_FILE, recorded

    (tmp_path / PROMPTING_FILE).write_bytes(content)
    with pytest.raises(EndstateError, match=message) as e:
        recorded(tmp_path)
    assert str(tmp_path / PROMPTING_FILE) in e.value.message


def test_resume_reads_the_episodes_file_like_every_reader(tmp_path):
    tasks = retail_tasks(1)
    tasks_file = write_jsonl(tmp_path / "t.jsonl", tasks)
    episodes, attempts = tmp_path / "e.jsonl", tmp_path / "a.jsonl"
    with FakeEndpoint(policy=gold_policy(tasks)) as endpoint:
        args = [tasks_file, "--backend", "chat", "--agent-url", endpoint.base_url, "--model", "d",
                "-n", "2", "-q", "--episodes", str(episodes)]
        first = run_tool("probe", *args)
        attempts.write_text(first.stdout.splitlines()[0] + "\n")  # the second attempt's line was lost
        with open(episodes, "a") as fh:
            fh.write("\n")  # a blank line is no record
        again = run_tool("probe", *args, "--resume", str(attempts))
    assert again.returncode == 0, again.stderr
    assert [(a["task_id"], a["attempt"]) for a in records(again.stdout)] == [(tasks[0]["id"], 1)]


def test_grade_state_writes_only_a_new_file_where_it_says(tmp_path, tasks):
    (tmp_path / "target.db").write_text("keep me")
    (tmp_path / "link.db").symlink_to(tmp_path / "target.db")
    gold = ["grade", "state", "--gold", "--task", "retail-cancel-pending"]
    for out, message in (("-", "not stdout"), (str(tmp_path / "link.db"), "is a symlink"),
                         (str(tmp_path / "none" / "x.db"), "does not exist")):
        p = run_tool(*gold, "-o", out, "--force")
        assert p.returncode == 2 and message in p.stderr, p.stderr
    assert (tmp_path / "target.db").read_text() == "keep me"
    p = run_tool(*gold, "--attempt", "3", "-o", str(tmp_path / "g.db"))
    assert p.returncode == 2 and "do not apply" in p.stderr
