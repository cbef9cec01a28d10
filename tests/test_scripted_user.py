"""The scripted user reacts: a reaction whose pattern the agent's last message matches comes first
(once, unless it repeats), then the script in order, then the default reply, then STOP. Unit tests
of ScriptedUser, and one real episode through `probe` on the retail domain, the agent played by the
project's OpenAI double."""

from __future__ import annotations

import asyncio
import copy

import orjson
import pytest
from conftest import run_tool
from openai_double import FakeEndpoint

from endstate.core.episode.users import STOP, ScriptedUser
from endstate.core.errors import ConfigurationError
from endstate.core.records.structs import AssistantMessage, Task, UserMessage


def scripted(id: str = "t", **user) -> ScriptedUser:
    """The scripted user of a task whose `user` object holds `user`."""
    return ScriptedUser.for_task(Task.of({
        "id": id, "domain": "retail", "checks": [{"kind": "said", "value": 1}],
        "user": {"instruction": "-", "opening": "Hi", **user}}))


def replies(user: ScriptedUser, agent_says: list[str]) -> list[str]:
    """The user's reply to each agent message in turn, the conversation growing as in the loop."""
    transcript = [UserMessage("opening")]
    out = []
    for text in agent_says:
        transcript.append(AssistantMessage(text))
        out.append(asyncio.run(user.reply(transcript)))
        transcript.append(UserMessage(out[-1]))
    return out


def test_reactions_come_first_then_the_script_then_the_default():
    user = scripted(script=["first", "second"],
                    reactions=[{"when": r"\b(can't|cannot)\b", "reply": "Please make an exception."},
                               {"when": "e-?mail", "reply": "ada@example.com", "repeat": True}],
                    default="Is it done?")
    assert replies(user, ["What is your EMAIL?", "I CANNOT do that.", "Okay.", "I can't, sorry.",
                          "Your e-mail again?", "Hm.", "Hm."]) == [
        "ada@example.com", "Please make an exception.", "first", "second",  # the refusal reaction was used
        "ada@example.com", "Is it done?", "Is it done?"]


def test_without_a_default_the_user_stops_when_the_script_is_used_up():
    user = scripted(script=["yes"], reactions=[{"when": "bye", "reply": STOP}])
    assert replies(user, ["Shall I?", "Done.", "Done."]) == ["yes", STOP, STOP]
    assert replies(ScriptedUser(["a"]), ["x", "y"]) == ["a", STOP]  # the plain script, as before
    stops = scripted(reactions=[{"when": "bye", "reply": STOP}])
    assert replies(stops, ["Bye now!"]) == [STOP]


def test_the_reply_reads_only_the_agent_s_last_message():
    user = scripted(default="default", reactions=[{"when": "refund", "reply": "Yes, refund it."}])
    messages = [UserMessage("Hi"), AssistantMessage("A refund?"), UserMessage("x"), AssistantMessage(None)]
    assert asyncio.run(user.reply(messages)) == "default"  # "refund" was said before, not last
    assert asyncio.run(user.reply(messages[:2])) == "Yes, refund it."


def test_a_bad_pattern_names_the_task_and_the_reaction(tmp_path):
    task = {"id": "bad-regex", "domain": "retail", "checks": [{"kind": "said", "value": 1}],
            "user": {"instruction": "-", "opening": "Hi", "reactions": [{"when": "(unclosed", "reply": "x"}]}}
    with pytest.raises(ConfigurationError, match=r"task bad-regex: user.reactions\[0\].when '\(unclosed' is "
                                                 "not a regular expression: missing \\)"):
        ScriptedUser.for_task(Task.of(task))
    path = tmp_path / "t.jsonl"
    path.write_bytes(orjson.dumps(task) + b"\n")
    p = run_tool("rollout", str(path), "--backend", "chat", "--agent-url", "http://127.0.0.1:9/v1",
                 "--model", "double")
    assert p.returncode == 4 and p.stdout == ""
    assert f"{path}:1: task bad-regex: user.reactions[0].when '(unclosed' is not a regular expression" in p.stderr


@pytest.mark.parametrize("pattern", [r"(a+)+$", r"(\w+\s?)*$", r"(?:x|(a{1,3})+)b", r"(.*)*"])
def test_a_pattern_that_can_backtrack_for_hours_is_refused_before_any_episode(tmp_path, pattern):
    """A repeat of a variable repeat takes minutes on a 30-character message that almost matches,
    holding the event loop of every episode in the process: refused like a broken pattern."""
    task = {"id": "redos", "domain": "retail", "checks": [{"kind": "said", "value": 1}],
            "user": {"instruction": "-", "opening": "Hi", "reactions": [{"when": pattern, "reply": "x"}]}}
    with pytest.raises(ConfigurationError, match=r"task redos: user.reactions\[0\].when .* repeats a "
                                                 r"group .* make the outer repeat possessive"):
        ScriptedUser.for_task(Task.of(task))
    path = tmp_path / "t.jsonl"
    path.write_bytes(orjson.dumps(task) + b"\n")
    p = run_tool("rollout", str(path), "--backend", "chat", "--agent-url", "http://127.0.0.1:9/v1",
                 "--model", "double")
    assert p.returncode == 4 and p.stdout == "" and f"{path}:1: task redos: user.reactions[0]" in p.stderr


def test_possessive_and_atomic_patterns_and_plain_ones_are_accepted():
    for pattern in (r"(a+)++$", r"(?>a+)+$", r"\b(can't|cannot)\b", r"e-?mail", r"(yes|no)+", r"\d+(\.\d+)?"):
        user = scripted(reactions=[{"when": pattern, "reply": "x"}])
        assert asyncio.run(user.reply([AssistantMessage("a" * 40 + "!")])) in ("x", STOP)


# -- one episode through probe: the agent refuses, the user insists, the conversation ends on cue ---

EMAIL = "mara.lindqvist@example.com"
INSIST = f"Please, I really need it cancelled. My email is {EMAIL}."


def agent_policy(body: dict):
    """The agent, as a function of the conversation: refuse first, then verify, confirm, cancel."""
    messages = body["messages"]
    last = messages[-1]
    tool_results = sum(m["role"] == "tool" for m in messages)
    if last["role"] == "user" and last["content"] == "Cancel my order W90001, please.":
        return "Sorry, I can't touch an order before you verify your email."
    if last["role"] == "user" and EMAIL in last["content"]:
        return [("find_customer", {"email": EMAIL})]
    if last["role"] == "tool" and tool_results == 1:
        return "Found you. Shall I cancel order W90001 because you no longer need it?"
    if last["role"] == "user" and last["content"] == "Yes, please cancel it.":
        return [("cancel_order", {"order_id": "W90001", "reason": "no_longer_needed"})]
    if last["role"] == "tool":
        return "One moment, I am wrapping up."
    return "Order W90001 is cancelled and the refund is on its way; I can't undo it. Anything else?"


def test_an_episode_where_the_user_insists_once_then_ends_on_cue(tmp_path, tasks):
    task = copy.deepcopy(tasks.get("retail-cancel-pending"))
    task["id"] = "retail-cancel-after-insisting"
    task["user"] = {
        "instruction": "Insist once if refused.", "opening": "Cancel my order W90001, please.",
        "script": ["Yes, please cancel it."],
        "reactions": [{"when": r"\b(can't|cannot)\b", "reply": INSIST},
                      {"when": r"anything else\?", "reply": STOP}],
        "default": "Is it done?"}
    path = tmp_path / "t.jsonl"
    path.write_bytes(orjson.dumps(task) + b"\n")
    episodes = tmp_path / "episodes.jsonl"
    with FakeEndpoint(policy=agent_policy) as endpoint:
        p = run_tool("probe", str(path), "--backend", "chat", "--agent-url", endpoint.base_url,
                     "--model", "double", "-n", "1", "--episodes", str(episodes))
    assert p.returncode == 0, p.stderr
    [episode] = [orjson.loads(line) for line in episodes.read_bytes().splitlines()]
    user_turns = [m["content"] for m in episode["messages"] if m["role"] == "user"]
    assert user_turns == ["Cancel my order W90001, please.", INSIST, "Yes, please cancel it.", "Is it done?"]
    assert episode["termination"] == "user_stop"
    assert (episode["status"], episode["reward"]) == ("ok", 1), episode["checks"]
