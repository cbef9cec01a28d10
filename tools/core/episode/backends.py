"""The agent backends by name (--backend): each builds, from a RunConfig, what an episode opens its
agent session on (core.agent.chat, core.agent.tokens), and says what it needs from the run: an
endpoint or not, the preflight request, the folder that records its prompting. A module or an
installed package adds one (docs/api.md)."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from endstate.core.agent.chat import ChatBackend
from endstate.core.agent.local_model import (
    EMBEDDED,
    Generation,
    LocalGenerator,
    load,
    resolve_model,
)
from endstate.core.agent.served import check_served_tokenizer
from endstate.core.agent.session import AgentBackend
from endstate.core.agent.tokens import TokenBackend, completions_sampler
from endstate.core.agent.trace import ChatTemplate
from endstate.core.errors import EndstateError
from endstate.core.registry import Registry, instance_of
from endstate.core.wire.endpoints import Endpoints, RetryPolicy
from endstate.core.wire.preflight import Probe, chat_probe

if TYPE_CHECKING:  # config.py reads the registry: the builders only read a config's fields
    from endstate.core.episode.config import RunConfig


@dataclass
class LiveSampler:
    """A token sampler someone else runs (grpo's lockstep sampler over its live policy): the
    local backend then samples through it instead of loading --model itself."""

    template: ChatTemplate
    sample: Callable[[list[int], int], Awaitable[Generation]]


def _no_check(cfg: RunConfig) -> None:
    """Every setting of the shared flags is one this backend can run."""


def _no_folder(cfg: RunConfig) -> str | None:
    return None


@dataclass(frozen=True)
class Backend:
    """An agent backend, by name (--backend NAME). `build(cfg, live)` makes what the run's
    episodes open sessions on (`live`: grpo's sampler, for backends that can use one).
    `endpoint`: it sends requests to --agent-url (so --procs may fork, and preflight sends
    `probe(cfg)` first); else it runs in this process. `check(cfg)` refuses settings it cannot
    run (raise EndstateError naming the fix). `prompting_folder(cfg)`: the model folder whose
    endstate.json records how the model is prompted (core.agent.prompting), if any. `tokenizer`:
    it reads --tokenizer."""

    build: Callable[[RunConfig, LiveSampler | None], AgentBackend]
    help: str
    endpoint: bool = True
    probe: Callable[[RunConfig], Probe] | None = None
    check: Callable[[RunConfig], None] = _no_check
    prompting_folder: Callable[[RunConfig], str | None] = _no_folder
    tokenizer: bool = False


BACKENDS: Registry[Backend] = Registry("agent backend", accept=instance_of(Backend))


def agent_endpoints(cfg: RunConfig) -> Endpoints:
    if not cfg.agent_urls:
        raise EndstateError(f"--backend {cfg.backend} needs --agent-url (or ENDSTATE_AGENT_URLS)")
    return Endpoints(cfg.agent_urls, cfg.agent_key, cfg.timeout, RetryPolicy(attempts=cfg.retries))


def endpoint_backends() -> str:
    """The names of the backends that send requests to --agent-url, for messages."""
    return " or ".join(name for name, b in BACKENDS.items() if b.endpoint)


def build_backend(cfg: RunConfig, live: LiveSampler | None = None) -> AgentBackend:
    """The agent backend `cfg.backend` names."""
    return BACKENDS[cfg.backend].build(cfg, live)


# -- the built-in backends ------------------------------------------------------------------------

def chat_backend(cfg: RunConfig, live: LiveSampler | None = None) -> AgentBackend:
    """Chat completions with native tools: the endpoint renders and parses."""
    return ChatBackend(agent_endpoints(cfg), cfg.model, cfg.sampling, cfg.seed, cfg.prompting.few_shot,
                       cfg.max_context)


def chat_agent_probe(cfg: RunConfig) -> Probe:
    """One chat request with the run's sampling fields and seed, one new token."""
    fields = {**dataclasses.replace(cfg.sampling, max_new_tokens=1).request_fields(), "seed": cfg.seed}
    return chat_probe("agent", agent_endpoints(cfg), cfg.model, fields, cfg.agent_key_env)


BACKENDS.register("chat", origin=f"{__name__}.chat_backend")(Backend(
    chat_backend, "chat completions with native tools (hosted models, vLLM with a tool parser)",
    probe=chat_agent_probe))


def completions_backend(cfg: RunConfig, live: LiveSampler | None = None) -> AgentBackend:
    """Token-in/token-out against an endpoint: endstate renders and interprets."""
    from transformers import AutoTokenizer

    endpoints = agent_endpoints(cfg)
    tokenizer = AutoTokenizer.from_pretrained(resolve_model(cfg.tokenizer or EMBEDDED))
    template = ChatTemplate(tokenizer)
    check_served_tokenizer(endpoints, cfg.model, cfg.max_context, template, cfg.tokenizer or EMBEDDED)
    sample = completions_sampler(endpoints, cfg.model, cfg.sampling, cfg.seed, tokenizer.eos_token_id,
                                 len(tokenizer))
    return TokenBackend(template, sample, cfg.sampling, cfg.max_context, cfg.prompting, endpoints)


PROBE_IDS = [0]  # a completions prompt: token 0 is an id of every vocabulary


def completions_probe(cfg: RunConfig) -> Probe:
    """The run's own completions request and answer checks, on one token."""
    sampling = dataclasses.replace(cfg.sampling, max_new_tokens=1)

    async def request(one: Endpoints) -> None:
        await completions_sampler(one, cfg.model, sampling, cfg.seed, eos_id=-1,
                                  vocab_size=2 ** 62)(PROBE_IDS)
    return Probe("agent", agent_endpoints(cfg), cfg.model, request, cfg.agent_key_env)


def completions_check(cfg: RunConfig) -> None:
    if cfg.tokenizer is None and cfg.model != EMBEDDED:
        raise EndstateError(
            f"--backend {cfg.backend} --model {cfg.model} needs --tokenizer: a local folder with "
            "the served model's tokenizer files (the folder the server was started with, or "
            "the tokenizer*.json files of its hub repo); endstate renders and tokenizes the "
            f"prompts itself. (--tokenizer {EMBEDDED} if the server runs the embedded SmolLM2.)")


BACKENDS.register("completions", origin=f"{__name__}.completions_backend")(Backend(
    completions_backend, "token-in/token-out against a completions endpoint (vLLM): endstate "
    "renders and interprets", probe=completions_probe, check=completions_check,
    prompting_folder=lambda cfg: resolve_model(cfg.tokenizer) if cfg.tokenizer else None,
    tokenizer=True))


def local_backend(cfg: RunConfig, live: LiveSampler | None = None) -> AgentBackend:
    """In-process transformers: --model loaded here, or the `live` sampler grpo runs."""
    if live is None:
        model, tokenizer = load(resolve_model(cfg.model), cfg.device)
        generator = LocalGenerator(model, tokenizer, cfg.sampling, seed=cfg.seed or 0, max_batch=cfg.jobs)
        live = LiveSampler(ChatTemplate(tokenizer), generator.submit)
    return TokenBackend(live.template, live.sample, cfg.sampling, cfg.max_context, cfg.prompting)


BACKENDS.register("local", origin=f"{__name__}.local_backend")(Backend(
    local_backend, "in-process transformers, episodes batched in this process", endpoint=False,
    prompting_folder=lambda cfg: resolve_model(cfg.model)))
