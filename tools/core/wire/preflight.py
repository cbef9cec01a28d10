"""Before a run's work starts, every endpoint it names answers one real request: a run whose
user or judge endpoint is down would otherwise turn every episode into a system error, for as
long as it runs (a grpo run trained on nothing and checkpointed the untrained model).

Per base URL of each role (agent, user, judge), in parallel: GET /models, which must list the
role's model when it answers with a list (a server without /models is let through), then the
role's own kind of request cut to one token (a chat completion; for a completions agent, token
ids in and out), under the role's key and retries, each call cut to PREFLIGHT_TIMEOUT_S. Any
failure stops the run (exit 2) naming the role, the endpoint, the model and what it answered;
`--no-preflight` skips all of it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from endstate.core.errors import ConfigurationError, EndstateError
from endstate.core.wire.endpoints import (
    ContextOverflow,
    EndpointFailure,
    Endpoints,
    chat_message,
    shown,
)

PREFLIGHT_TIMEOUT_S = 60.0  # a call: one token, so a server that answers at all answers by then
PROBE_MESSAGES = [{"role": "user", "content": "Reply with one word: ready?"}]


@dataclass
class Probe:
    """One role's endpoints and the request that proves one of them: `request(endpoints)` sends
    it to a one-URL copy (Endpoints.at) and raises what the run's requests would raise."""

    role: str
    endpoints: Endpoints
    model: str
    request: Callable[[Endpoints], Awaitable[Any]]
    key_env: str = ""  # where the role's key comes from: said with a 401 or 403


def chat_probe(role: str, endpoints: Endpoints, model: str, fields: dict[str, Any],
               key_env: str = "") -> Probe:
    """A role that speaks chat completions: `fields` are its own request's (sampling, seed)
    with max_tokens set to 1."""
    async def request(one: Endpoints) -> None:
        answer = await one.post("/chat/completions", {"model": model, "messages": PROBE_MESSAGES,
                                                      **fields, "max_tokens": 1})
        chat_message(answer)  # the contract checks of every chat answer
    return Probe(role, endpoints, model, request, key_env)


async def _check(probe: Probe, url: str) -> str | None:
    """What is wrong with one URL of a probe's role, or None."""
    one = probe.endpoints.at(url, PREFLIGHT_TIMEOUT_S)
    try:
        status, answer, problem = await one.ask("GET", url + "/models")
        if status is None:
            return f"GET {url}/models: {problem}"
        if status in (401, 403):
            return f"GET {url}/models: {problem}{_key_note(probe)}"
        cards = answer.get("data") if status == 200 and isinstance(answer, dict) else None
        if isinstance(cards, list):
            served = [c["id"] for c in cards if isinstance(c, dict) and isinstance(c.get("id"), str)]
            if probe.model not in served:
                return (f"{url}/models serves {shown(served[:8])}{' …' if len(served) > 8 else ''}, "
                        f"not model {probe.model!r}: pass the served name")
        await probe.request(one)
    except EndpointFailure as e:  # past its retries, or an answer that breaks the contract
        what = ("answered, but not as an OpenAI-compatible endpoint" if e.kind == "protocol"
                else f"did not answer after {e.attempts} call(s)")
        return f"{url} {what}: {e.kind}: {e.message}"
    except ContextOverflow as e:
        return f"{url} refused a one-token request as too long: {e}"
    except EndstateError as e:  # a 4xx: the URL, key, model name or request is wrong
        return f"{e.message}{_key_note(probe) if ' 401' in e.message or ' 403' in e.message else ''}"
    finally:
        one.close()
    return None


def _key_note(probe: Probe) -> str:
    if probe.endpoints.keyed:
        return f" (the key sent is ${probe.key_env}'s)" if probe.key_env else ""
    return (f"; no API key was sent: export {probe.key_env} (see --{probe.role}-key-env)"
            if probe.key_env else "; no API key was sent")


def preflight(probes: list[Probe], note: Callable[[str], None] | None = None) -> None:
    """Check every URL of every probe at once; refuse (ConfigurationError, exit 2) naming each
    that failed. `note` hears the one line said when all answered."""
    if not probes:
        return
    started = time.perf_counter()

    async def check_all() -> list[str | None]:
        return await asyncio.gather(*(_check(p, u) for p in probes for u in p.endpoints.urls))

    outcomes = asyncio.run(check_all())
    where = [(p, u) for p in probes for u in p.endpoints.urls]
    failed = [f"the {p.role} endpoint {u} (model {p.model!r}): {problem}"
              for (p, u), problem in zip(where, outcomes) if problem]
    if failed:
        lines = "\n  ".join(failed)
        raise ConfigurationError(f"preflight: {len(failed)} of {len(where)} endpoint(s) failed "
                                 f"before any work started:\n  {lines}\nStart or fix them (the "
                                 "URL, key or model name), or pass --no-preflight to run anyway")
    if note:
        roles = ", ".join(dict.fromkeys(p.role for p in probes))
        note(f"preflight: {len(where)} endpoint(s) answered ({roles}) in "
             f"{time.perf_counter() - started:.1f} s")
