"""The endpoints a run names, as preflight probes (core.wire.preflight): the agent (a backend that
talks to an endpoint), the simulated user (a kind that does) and the judge, each probed with its
own kind of request, key and retries, before the first episode."""

from __future__ import annotations

from typing import Any

from endstate.core.console.progress import note
from endstate.core.episode.config import RunConfig, user_endpoint
from endstate.core.wire.preflight import Probe, chat_probe, preflight


def run_probes(cfg: RunConfig) -> list[Probe]:
    """The agent's endpoints and the user's, each as its backend or user kind asks."""
    probes = []
    backend, user = cfg.agent_backend, cfg.user_kind
    if backend.endpoint and backend.probe is not None:
        probes.append(backend.probe(cfg))
    if user.endpoint and user.probe is not None:
        probes.append(user.probe(user_endpoint(cfg)))
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
