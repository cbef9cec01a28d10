"""grade show: transcripts for people, on episodes made here by the real tools.

The Markdown snapshot is one real pipeline, `rollout | grade | grade show - --format markdown`,
with the test double's policy doing a built-in task's gold calls with two mistakes. When the output
changes on purpose (a policy.md edit, a new layout), rewrite the snapshot and review its diff:

    ENDSTATE_UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest -q -p no:xdist tests/test_show.py
    git diff tests/snapshots/
"""

from __future__ import annotations

import copy
import os
import re
import subprocess

import orjson
import pytest
from conftest import BIN, ROOT, run_tool
from openai_double import FakeEndpoint, gold_policy

from endstate.core.episode.replays import replay
from endstate.core.grading.grader import Grader

RETAIL = ROOT / "tasks" / "bench" / "retail.jsonl"
SNAPSHOT = ROOT / "tests" / "snapshots" / "show_retail_cancel_all_open_orders.md"
TASK_ID = "retail-cancel-all-open-orders"


def retail_task(task_id: str) -> dict:
    return next(t for t in map(orjson.loads, RETAIL.read_bytes().splitlines()) if t["id"] == task_id)


def show(*args: str, input: str | None = None):
    return run_tool("grade", "show", *args, input=input)


@pytest.fixture(scope="module")
def graded_pipeline(tmp_path_factory) -> tuple[str, str]:
    """(graded episode line, `grade show --format markdown` of it), both from one shell pipeline.
    The agent forgets to say that the third order shipped and gives the first cancel a wrong
    reason; the second cancel is right, so the failed row check belongs to the first one."""
    task = retail_task(TASK_ID)
    flawed = copy.deepcopy(task)
    flawed["gold"][2]["say"] = "W90241 (pending) and W90242 (processing) can be cancelled. Shall I cancel them?"
    flawed["gold"][3]["args"]["reason"] = "ordered_by_mistake"
    folder = tmp_path_factory.mktemp("show")
    tasks, graded = folder / "task.jsonl", folder / "graded.jsonl"
    tasks.write_bytes(orjson.dumps(task) + b"\n")
    with FakeEndpoint(policy=gold_policy([flawed])) as endpoint:
        pipeline = (f"set -o pipefail; {BIN}/rollout run {tasks} --backend chat --agent-url {endpoint.base_url}"
                    f" --model double -q | {BIN}/grade - | tee {graded} | {BIN}/grade show - --format markdown"
                    " --max-chars 200")
        p = subprocess.run(["bash", "-c", pipeline], capture_output=True, text=True, env=os.environ, timeout=300)
    assert p.returncode == 0, p.stderr
    return graded.read_text(), p.stdout


def test_markdown_of_a_real_graded_episode_matches_the_snapshot(graded_pipeline):
    _, markdown = graded_pipeline
    markdown = re.sub(rf"{TASK_ID}/0/[0-9a-f]{{8}}", f"{TASK_ID}/0/<random>", markdown)  # episode_id
    if os.environ.get("ENDSTATE_UPDATE_SNAPSHOTS"):
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(markdown)
    assert markdown == SNAPSHOT.read_text(), "rerun with ENDSTATE_UPDATE_SNAPSHOTS=1 if this change is meant"


def test_each_failed_check_is_shown_at_the_turn_it_concerns(graded_pipeline):
    _, markdown = graded_pipeline
    blocks = markdown.split("\n\n")
    row = next(i for i, b in enumerate(blocks) if "check `pending-cancelled` (row) failed" in b)
    said = next(i for i, b in enumerate(blocks) if "check `told-shipped` (said) failed" in b)
    assert '"order_id":"W90241","status":"cancelled"' in blocks[row - 1]  # the cancel it got wrong,
    assert "W90242" in "".join(blocks[row:row + 4])  # not the later one that also changed `orders`
    assert blocks[said - 1] == "> Done." and blocks[said - 2] == "**assistant**"  # the agent's last word
    assert not any("failed:**" in b for b in blocks[said + 1:] if not b.startswith("|"))
    assert "**reward 0 · 4 of 6 checks passed**" in markdown  # the guard passes: nothing unrequested


def test_terminal_output_in_a_pipe_is_plain_text_and_reads_stdin(graded_pipeline):
    graded, _ = graded_pipeline
    p = show("-", "--max-chars", "0", input=graded)
    assert p.returncode == 0, p.stderr
    assert "\x1b[" not in p.stdout and not any(line != line.rstrip() for line in p.stdout.splitlines())
    lines = p.stdout.splitlines()
    cancel = lines.index('  → cancel_order(order_id="W90241", reason="ordered_by_mistake")')
    assert lines[cancel + 1:cancel + 3] == [
        "tool · cancel_order",
        '  {"order_id":"W90241","status":"cancelled","refund_id":"RF00347","refunded":48.0}']
    assert lines[cancel + 3].startswith("  ✗ check pending-cancelled (row) failed: orders[W90241]")
    assert lines[-2:] == ["reward 0 · 4 of 6 checks passed", ""]  # a blank line between episodes
    assert "Okay, understood." in p.stdout and "[+" not in p.stdout  # --max-chars 0 cuts nothing


def test_checks_go_to_the_end_when_the_calls_do_not_replay_to_the_recorded_diff(graded_pipeline):
    episode = orjson.loads(graded_pipeline[0])
    call = next(c for m in episode["messages"] for c in m.get("tool_calls", [])
                if c["function"]["name"] == "cancel_order")
    call["function"]["arguments"] = orjson.dumps({"order_id": "W90243", "reason": "no_longer_needed"}).decode()
    p = show("-", "--format", "markdown", input=orjson.dumps(episode).decode())
    assert p.returncode == 0, p.stderr
    assert "the calls run again do not end in the recorded diff" in p.stdout
    tail = p.stdout.split("**✗ check `told-shipped`")[1]  # after the agent's last word: the row check
    assert "**✗ check `pending-cancelled` (row) failed:**" in tail
    p = show("-", "--format", "markdown", "--tasks", str(ROOT / "tasks" / "bench" / "bank.jsonl"),
             input=graded_pipeline[0])
    assert f"task {TASK_ID} is not in" in p.stdout and "pass --tasks FILE" in p.stdout


def test_html_is_one_escaped_page_and_plain_episodes_show_without_verdicts(domains):
    task = retail_task("retail-cancel-pending")
    hostile = "<script>alert('x')</script> & </pre> ``` | done"
    episode = replay(domains["retail"], task, [*task["gold"], {"say": hostile}])
    graded = Grader(domains).grade(episode, task)
    lines = "".join(orjson.dumps(e).decode() + "\n" for e in (graded, episode))
    p = show("--format", "html", input=lines)
    assert p.returncode == 0, p.stderr
    page = p.stdout
    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")
    assert "<script" not in page and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; &lt;/pre&gt;" in page
    assert not re.search(r"(src|href)=", page)  # nothing fetched: styles are inline
    assert page.count("<section>") == 2 and "reward 1 · 4 of 4 checks passed" in page
    assert "not graded (pipe the episodes through `grade`" in page
    p = show("--format", "markdown", input=lines)
    assert "> <script>alert('x')</script> & </pre> ``` | done" in p.stdout  # message text as written


def test_control_characters_from_a_model_are_shown_never_sent_to_the_terminal(domains):
    """ESC sequences in what the agent said would recolour, retitle or clear the reader's terminal
    (or write its clipboard): every format shows them as escapes."""
    task = retail_task("retail-cancel-pending")
    episode = replay(domains["retail"], task, [*task["gold"], {"say": "done\x1b]0;pwned\x07\x1b[2J\r!"}])
    graded = Grader(domains).grade(episode, task)
    graded["checks"][0]["detail"] += "\x1b[31m"
    for fmt in ("terminal", "markdown", "html"):
        p = show("--format", fmt, input=orjson.dumps(graded).decode())
        assert p.returncode == 0, p.stderr
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", p.stdout), fmt
        assert "done\\x1b]0;pwned\\x07\\x1b[2J\\x0d!" in p.stdout and "\\x1b[31m" in p.stdout


def test_a_plain_episode_s_stray_checks_field_is_no_verdict(domains):
    task = retail_task("retail-cancel-pending")
    episode = {**replay(domains["retail"], task, task["gold"]), "checks": [1, {"id": "x"}]}
    p = show("--format", "markdown", input=orjson.dumps(episode).decode())
    assert p.returncode == 0, p.stderr
    assert "not graded" in p.stdout and "| verdict |" not in p.stdout


def test_task_filter_picks_episodes_and_an_empty_pick_is_an_error(graded_pipeline):
    graded, _ = graded_pipeline
    p = show("--task", "retail-*-orders", "--format", "markdown", input=graded)
    assert p.returncode == 0 and p.stdout.startswith(f"## {TASK_ID} · attempt 0 · reward 0")
    p = show("--task", "bank-*", input=graded)
    assert p.returncode == 2 and p.stdout == ""
    assert "--task 'bank-*' selects no episode in stdin" in p.stderr
