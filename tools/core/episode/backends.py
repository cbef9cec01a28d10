"""The agent backends by name: each builds, from a RunConfig, what an episode opens its agent
session on (core.agent.chat, core.agent.tokens)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from endstate.core.agent.backends import AgentBackend
from endstate.core.agent.chat import ChatBackend
from endstate.core.agent.local_model import (
    EMBEDDED,
    Generation,
    LocalGenerator,
    load,
    resolve_model,
)
from endstate.core.agent.served import check_served_tokenizer
from endstate.core.agent.tokens import TokenBackend, completions_sampler
from endstate.core.agent.trace import ChatTemplate
from endstate.core.episode.config import RunConfig
from endstate.core.errors import EndstateError
from endstate.core.registry import Registry
from endstate.core.wire.endpoints import Endpoints, RetryPolicy


def agent_endpoints(cfg: RunConfig) -> Endpoints:
    if not cfg.agent_urls:
        raise EndstateError(f"--backend {cfg.backend} needs --agent-url (or ENDSTATE_AGENT_URLS)")
    return Endpoints(cfg.agent_urls, cfg.agent_key, cfg.timeout, RetryPolicy(attempts=cfg.retries))


BACKENDS: Registry[Callable[..., AgentBackend]] = Registry("agent backend")


@dataclass
class LiveSampler:
    """A token sampler someone else runs (grpo's lockstep sampler over its live policy): the
    local backend then samples through it instead of loading --model itself."""

    template: ChatTemplate
    sample: Callable[[list[int], int], Awaitable[Generation]]


@BACKENDS.register("chat")
def chat_backend(cfg: RunConfig, live: LiveSampler | None = None) -> AgentBackend:
    """Chat completions with native tools: the endpoint renders and parses."""
    return ChatBackend(agent_endpoints(cfg), cfg.model, cfg.sampling, cfg.seed, cfg.prompting.few_shot,
                       cfg.max_context)


@BACKENDS.register("completions")
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


@BACKENDS.register("local")
def local_backend(cfg: RunConfig, live: LiveSampler | None = None) -> AgentBackend:
    """In-process transformers: --model loaded here, or the `live` sampler grpo runs."""
    if live is None:
        model, tokenizer = load(resolve_model(cfg.model), cfg.device)
        generator = LocalGenerator(model, tokenizer, cfg.sampling, seed=cfg.seed or 0, max_batch=cfg.jobs)
        live = LiveSampler(ChatTemplate(tokenizer), generator.submit)
    return TokenBackend(live.template, live.sample, cfg.sampling, cfg.max_context, cfg.prompting)


def build_backend(cfg: RunConfig, live: LiveSampler | None = None) -> AgentBackend:
    """The agent backend `cfg.backend` names."""
    return BACKENDS[cfg.backend](cfg, live)
