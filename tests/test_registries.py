"""Extension points are open registries: an agent backend, a check kind, a tool listing and a loss
aggregation are each added from this module, outside core, with the registry's decorator, and used
by the real code paths (the episode runtime, the grader, the system prompt, the GRPO loss). A name
registered twice is refused, naming both places."""

from __future__ import annotations

import asyncio
import copy
from contextlib import contextmanager

import msgspec
import orjson
import pytest

from endstate.core.agent.interpret import TOOL_LISTINGS, Parsed, render_system
from endstate.core.agent.session import Turn
from endstate.core.episode.backends import BACKENDS, Backend, build_backend
from endstate.core.episode.config import RunConfig
from endstate.core.episode.replays import replay
from endstate.core.episode.runtime import run_all
from endstate.core.grading.checks import CHECK_KINDS
from endstate.core.grading.grader import Grader
from endstate.core.records.structs import ToolCall, Usage
from endstate.core.registry import Registry


@contextmanager
def registered(registry: Registry, name: str, entry):
    """`entry` under `name` for the duration, as a plugin module would register it."""
    registry.register(name)(entry)
    try:
        yield entry
    finally:
        registry.unregister(name)


def test_a_name_registered_twice_is_refused_naming_both():
    registry: Registry = Registry("thing")

    @registry.register("a")
    def first():
        pass

    with pytest.raises(ValueError, match=r"thing 'a' is registered twice: .*first and .*second"):
        @registry.register("a")
        def second():
            pass
    with pytest.raises(KeyError, match="no thing 'b'; registered: a"):
        registry["b"]


class ScriptedSession:
    """A backend's session that calls one tool, then says it is done: no model at all."""

    system = "You are a test."

    def __init__(self):
        self.turn = 0
        self.told = []  # every message the session was told of, in order

    async def act(self) -> Turn:
        self.turn += 1
        if self.turn == 1:
            call = ToolCall.of("get_order", {"order_id": "W90001"})
            return Turn(Parsed("", tool_calls=[call]), None, Usage(10, 3))
        return Turn(Parsed(""), None, Usage(20, 0))

    def observe(self, new):
        assert new
        self.told += new


class ScriptedBackend:
    def __init__(self):
        self.sessions = []

    def open(self, domain, tool_specs):
        self.sessions.append(ScriptedSession())
        return self.sessions[-1]

    def close(self):
        """No connections to close."""


def test_a_backend_added_outside_core_runs_episodes_through_the_runtime(domains, tasks):
    task = tasks.get("retail-cancel-pending")
    built = ScriptedBackend()
    with registered(BACKENDS, "scripted-test", Backend(lambda cfg, live=None: built, "a script",
                                                         endpoint=False)):
        cfg = RunConfig(backend="scripted-test", model="none")
        backend = build_backend(cfg)
        episodes = []

        async def run():
            from endstate.core.console.progress import Progress

            await run_all([(task, 0), (task, 1)], cfg, domains, backend,
                          lambda t, e: episodes.append(e), Progress(2, "", quiet=True))

        asyncio.run(run())
    assert sorted(e.attempt for e in episodes) == [0, 1]
    for e in episodes:
        record = e.record()
        assert record["termination"] == "agent_done" and record["policy"]["backend"] == "scripted-test"
        assert [m["role"] for m in record["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
        assert record["usage"]["agent"] == {"prompt_tokens": 30, "completion_tokens": 3}
    # the loop's list is the only transcript: each session was told of every message, in order
    told = sorted(orjson.dumps(msgspec.to_builtins(s.told)) for s in built.sessions)
    assert told == sorted(orjson.dumps(e.record()["messages"]) for e in episodes)
    assert "scripted-test" not in BACKENDS


def test_a_check_kind_added_outside_core_grades_and_an_unknown_one_is_refused(domains, tasks):
    def status_is(check, ctx):
        (status,) = ctx.conn.execute("SELECT status FROM orders WHERE id = ?", (check["order"],)).fetchone()
        return status == check["status"], f"orders[{check['order']}].status is {status!r}"

    grader = Grader(domains)
    task = copy.deepcopy(tasks.get("retail-cancel-pending"))
    order = next(s["args"]["order_id"] for s in task["gold"] if s.get("tool") == "cancel_order")
    task["checks"] = [{"kind": "status_is", "order": order, "status": "cancelled"}]
    assert grader.task_problem(task).startswith("has check kind(s) ['status_is'] that no module registers")
    with registered(CHECK_KINDS, "status_is", status_is):
        assert grader.task_problem(task) is None
        domain = domains[task["domain"]]
        assert grader.grade(replay(domain, task, task["gold"]), task)["reward"] == 1
        assert grader.grade(replay(domain, task, []), task)["reward"] == 0
    graded = grader.grade(replay(domains[task["domain"]], task, task["gold"]), task)
    assert (graded["status"], graded["error"]["kind"]) == ("system_error", "task")  # never a 0
    assert "no check kind 'status_is'" in graded["error"]["message"]


def test_a_tool_listing_added_outside_core_renders_the_system_prompt(domains):
    from endstate.core.agent.interpret import ToolListing

    specs = [t.schema for t in domains["retail"].tools.values()]
    with registered(TOOL_LISTINGS, "names", ToolListing("The tools, by name:", lambda s: s["function"]["name"])):
        system = render_system("Be kind.", specs, "names")
    assert "The tools, by name:\n<tools>\nfind_customer\nget_customer" in system
    assert '"parameters"' not in system


def test_a_loss_aggregation_added_outside_grpo_is_used_by_the_loss():
    torch = pytest.importorskip("torch")
    from endstate.grpo.algorithm import LOSS_AGGREGATIONS, LossAgg, aggregate

    loss, mask = torch.tensor([[1.0, 2.0, 4.0]]), torch.tensor([[1.0, 1.0, 0.0]])
    with registered(LOSS_AGGREGATIONS, "max-token", LossAgg(lambda l, m: (l * m).max(), lambda n, t: 1.0)):
        assert aggregate(loss, mask, "max-token", 1.0).item() == 2.0
    with pytest.raises(ValueError, match="no loss aggregation 'max-token'"):
        aggregate(loss, mask, "max-token", 1.0)


def test_a_user_kind_added_outside_core_plays_episodes_and_says_what_it_cannot_play(domains, tasks):
    from endstate.core.episode.plan import refuse_unplayable, unplayable
    from endstate.core.episode.users import SIMULATED_USERS, STOP, UserKind
    from endstate.core.errors import EndstateError

    class Echo:
        def __init__(self, task):
            self.usage, self.said = Usage(), [task.user.opening]

        async def reply(self, transcript):
            return STOP if len(self.said) > 1 else self.said.pop()

        def close(self):
            pass

    class Asking(ScriptedSession):
        async def act(self) -> Turn:
            self.turn += 1
            return Turn(Parsed("Anything else?" if self.turn == 1 else ""), None, Usage(1, 1))

    class AskingBackend(ScriptedBackend):
        def open(self, domain, tool_specs):
            return Asking()

    task = tasks.get("retail-cancel-pending")
    kind = UserKind(lambda t, endpoint: Echo(t), "repeats the opening once",
                    plays=lambda t: t["id"] != "retail-cancel-pending",
                    refusal=("are not echoed", "run them with another --user"))
    with registered(SIMULATED_USERS, "echo-test", kind), \
            registered(BACKENDS, "scripted-test", Backend(lambda cfg, live=None: AskingBackend(),
                                                          "a script", endpoint=False)):
        cfg = RunConfig(backend="scripted-test", model="none", user="echo-test")
        assert cfg.roles()[1].urls == []  # no endpoint: no key to look for
        assert unplayable([task, tasks.get("retail-return-defective")], "echo-test") == [task["id"]]
        with pytest.raises(EndstateError, match="1 task.s. are not echoed: retail-cancel-pending; "
                                                "run them with another --user"):
            refuse_unplayable([task], "echo-test")
        episodes = []

        async def run():
            from endstate.core.console.progress import Progress

            await run_all([(task, 0)], cfg, domains, build_backend(cfg),
                          lambda t, e: episodes.append(e), Progress(1, "", quiet=True))

        asyncio.run(run())
    messages = episodes[0].record()["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant"]
    assert messages[3]["content"] == task["user"]["opening"]  # the echo user's reply
    assert episodes[0].termination == "agent_done"
    assert "echo-test" not in SIMULATED_USERS
    with pytest.raises(EndstateError, match="--user echo-test: no simulated user 'echo-test'; "
                                            "registered: scripted, llm"):
        RunConfig(user="echo-test")
