"""What `rollout serve-openenv` and its clients exchange: the action, the observation and the
state (OpenEnv's pydantic types), and the OpenEnv client that speaks them.

    from endstate.rollout.openenv_types import EndstateAction, EndstateEnvClient

    with EndstateEnvClient(base_url="http://127.0.0.1:8000").sync() as env:
        first = env.reset(task_id="retail-cancel-pending")      # or env.reset(): the next task
        result = env.step(EndstateAction(tool="get_order", arguments={"order_id": "W90001"}))
        result = env.step(EndstateAction(message="Your order is cancelled."))
        result = env.step(EndstateAction())                      # nothing more to say: it ends
        result.reward, result.observation.checks

One action is one agent turn: a tool call (`tool`, `arguments`), a message to the user (`message`),
or neither (the agent is done, as an empty turn ends a rollout episode). docs/openenv.md has the
fields. Needs the openenv extra: pip install 'endstate[openenv]'.
"""

from __future__ import annotations

from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field


class EndstateAction(Action):
    """One agent turn: a tool call, a message to the user, or neither (the agent is done)."""

    tool: str | None = Field(default=None, description="The tool to call (one the reset listed).")
    arguments: Any = Field(default=None, description="The tool's arguments, a JSON object.")
    message: str | None = Field(default=None, description="What the agent says to the user.")


class EndstateObservation(Observation):
    """What the agent sees after a reset or a step; the last one of an episode (done) carries
    endstate's grade: reward 1/0, or None with status system_error."""

    kind: str = Field(default="opening", description="opening | tool_result | user_reply | "
                                                     "error | episode_end")
    content: str = Field(default="", description="The user's opening, the tool's result, the "
                                                 "user's reply, or what was wrong with the action.")
    ok: bool = Field(default=True, description="False when the tool call or the action failed.")
    task_id: str | None = None
    domain: str | None = None
    episode_id: str | None = None
    system: str | None = Field(default=None, description="At reset: the domain's policy.")
    tools: list[dict[str, Any]] = Field(default_factory=list, description="At reset: the task's "
                                        "tools, as the chat backend lists them (OpenAI format).")
    max_turns: int | None = Field(default=None, description="At reset: the steps the episode "
                                                            "may take.")
    termination: str | None = Field(default=None, description="At the end: agent_done | "
                                                              "user_stop | max_turns.")
    status: str | None = Field(default=None, description="At the end: ok | system_error.")
    error: dict[str, Any] | None = Field(default=None, description="At the end of a "
                                         "system_error: its kind and message.")
    checks: list[dict[str, Any]] = Field(default_factory=list, description="At the end: each "
                                         "check graded (id, kind, passed, detail).")


class EndstateState(State):
    task_id: str | None = None
    attempt: int | None = None
    done: bool = False


class EndstateEnvClient(EnvClient[EndstateAction, EndstateObservation, EndstateState]):
    """OpenEnv's WebSocket client, typed for endstate's environment: one connection, one session,
    one sandbox at a time."""

    def _step_payload(self, action: EndstateAction) -> dict[str, Any]:
        return action.model_dump(exclude_none=True, exclude={"metadata"})

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[EndstateObservation]:
        observation = EndstateObservation(**payload.get("observation", {}),
                                          reward=payload.get("reward"),
                                          done=payload.get("done", False))
        return StepResult(observation, observation.reward, observation.done)

    def _parse_state(self, payload: dict[str, Any]) -> EndstateState:
        return EndstateState(**payload)
