"""The endpoints a run names, as preflight probes (core.wire.preflight): the agent (chat or
completions), the LLM user and the judge, each probed with its own kind of request, key and
retries, before the first episode."""

from __future__ import annotations

import dataclasses
from typing import Any

from endstate.core.agent.tokens import completions_sampler
from endstate.core.console.progress import note
from endstate.core.episode.backends import agent_endpoints
from endstate.core.episode.config import RunConfig, user_endpoints
from endstate.core.wire.endpoints import Endpoints
from endstate.core.wire.preflight import Probe, chat_probe, preflight

PROBE_IDS = [0]  # a completions prompt: token 0 is an id of every vocabulary


def run_probes(cfg: RunConfig) -> list[Probe]:
    """The agent's endpoints (an endpoint backend) and the LLM user's."""
    probes = []
    if cfg.backend == "chat":
        fields = {**dataclasses.replace(cfg.sampling, max_new_tokens=1).request_fields(), "seed": cfg.seed}
        probes.append(chat_probe("agent", agent_endpoints(cfg), cfg.model, fields, cfg.agent_key_env))
    elif cfg.backend == "completions":
        sampling = dataclasses.replace(cfg.sampling, max_new_tokens=1)

        async def request(one: Endpoints) -> None:  # the run's own request and answer checks
            await completions_sampler(one, cfg.model, sampling, cfg.seed, eos_id=-1,
                                      vocab_size=2 ** 62)(PROBE_IDS)
        probes.append(Probe("agent", agent_endpoints(cfg), cfg.model, request, cfg.agent_key_env))
    if cfg.user == "llm":
        fields = {"temperature": 0.7, "seed": cfg.seed if cfg.user_seed else None}  # as LLMUser asks
        probes.append(chat_probe("user", user_endpoints(cfg), cfg.user_model, fields, cfg.user_key_env))
    return probes


def judge_probe(judge: Any) -> Probe:
    """A judge (core.grading.judge.Judge) asked as it asks: temperature 0, its seed."""
    return chat_probe("judge", judge.endpoints, judge.model, {"temperature": 0, "seed": judge.seed},
                      getattr(judge, "key_env", ""))


def needs_judge(tasks: list[dict[str, Any]]) -> bool:
    return any(check.get("kind") == "judge" for t in tasks for check in t.get("checks") or [])


def check_endpoints(cfg: RunConfig | None, judge: Any = None, *, quiet: bool = False,
                    enabled: bool = True) -> None:
    """Preflight the run's agent and user (`cfg`) and `judge` (None: no judge is needed); a
    refusal is exit 2 naming the endpoint (core.wire.preflight)."""
    if not enabled:
        return
    probes = [*(run_probes(cfg) if cfg is not None else []), *([judge_probe(judge)] if judge else [])]
    preflight(probes, None if quiet else note)
