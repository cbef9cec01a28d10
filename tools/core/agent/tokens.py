"""Token-level backends (local and completions): endstate renders the prompt with the model's chat
template, appends only each new observation's tokens (core.agent.trace), samples token ids and
parses the raw text itself, so the trainer sees exactly the ids the sampler produced."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from endstate.core.agent.interpret import parse, render_system
from endstate.core.agent.local_model import Generation
from endstate.core.agent.sampling import Sampling
from endstate.core.agent.session import FewShot, Turn, few_shot_of, parameters
from endstate.core.agent.trace import ChatTemplate, TokenTrace
from endstate.core.env.domain import Domain
from endstate.core.records.structs import (
    AssistantMessage,
    Message,
    Prompting,
    Usage,
    UserMessage,
    as_dicts,
)
from endstate.core.wire.endpoints import (
    ContextOverflow,
    EndpointFailure,
    Endpoints,
    protocol_failure,
    shown,
)

TOOL_PREFILL = "<tool_call>\n"


@dataclass
class TokenSession:
    template: ChatTemplate
    sample: Callable[[list[int], int], Awaitable[Generation]]
    sampling: Sampling
    max_context: int
    tool_specs: list[dict[str, Any]]
    system: str
    examples: list[FewShot]
    tool_prefill: bool = False
    trace: TokenTrace = field(default_factory=TokenTrace)
    prefix_len: int = 0  # leading tokens every episode of this domain shares (KV-cache reuse)
    _started: bool = False  # told of the start yet
    _last_finished: bool = True
    _after_user: bool = True

    async def act(self) -> Turn:
        # Small models call tools far more reliably when their turn after a user message starts
        # with `<tool_call>`; those tokens are prompt (masked), not sampled.
        prefill = TOOL_PREFILL if self.tool_prefill and self._after_user else ""
        prefill_ids = self.template.encode(prefill) if prefill else []
        prompt_len = self.trace.length + len(prefill_ids)
        if prompt_len + self.sampling.max_new_tokens > self.max_context:
            raise ContextOverflow(f"{prompt_len} prompt tokens + {self.sampling.max_new_tokens} "
                                  f"new would exceed --max-context {self.max_context}")
        if prefill:
            self.trace.append_prompt(prefill_ids)
        prompt = self.trace.next_prompt()
        generation = await self.sample(prompt, self.prefix_len)
        self.trace.append_completion(generation.ids, generation.logprobs)
        self._last_finished = generation.finished
        text = prefill + self.template.tokenizer.decode(generation.ids, skip_special_tokens=True)
        return Turn(parse(text, parameters(self.tool_specs)), text,
                    Usage(len(prompt), len(generation.ids)), self.trace.turns[-1])

    def observe(self, new: list[Message]) -> None:
        """Append what the transcript gained as prompt tokens: at the start [system, opening]
        with the few-shot examples rendered between them, then each observation as a delta of
        the chat template. The session's own turns are in the trace already (sampled ids)."""
        if not self._started:
            self._started = True
            static = as_dicts([new[0], *(m for i, e in enumerate(self.examples) for m in e.messages(i))])
            ids = self.template.first_prompt([*static, *as_dicts(new[1:])])
            self.prefix_len = self.template.shared_prefix_len(static, ids)
            self.trace.append_prompt(ids)
            return
        new = [m for m in new if not isinstance(m, AssistantMessage)]
        if new:
            self._after_user = isinstance(new[-1], UserMessage)
            self.trace.append_prompt(self.template.delta(as_dicts(new), self._last_finished))


def completions_sampler(endpoints: Endpoints, model: str, sampling: Sampling, seed: int | None,
                        eos_id: int, vocab_size: int) -> Callable[[list[int], int], Awaitable[Generation]]:
    """Token ids in, token ids and logprobs out, from a vLLM-style completions endpoint (which
    caches shared prefixes itself)."""
    fields = sampling.request_fields()

    async def sample(prompt: list[int], prefix_len: int = 0) -> Generation:
        response = await endpoints.post("/completions", {
            "model": model, "prompt": prompt, **fields, "seed": seed,
            "logprobs": 1, "return_token_ids": True, "skip_special_tokens": False})
        choices = response.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
        ids = choice.get("token_ids")
        if ids is None:
            raise EndpointFailure("protocol", "the completions endpoint returned no token_ids; "
                                  "endstate needs vLLM's return_token_ids", 1)
        if not isinstance(ids, list) or not all(type(t) is int and 0 <= t < vocab_size for t in ids):
            raise protocol_failure(f"token_ids {shown(ids)} are not ids of this tokenizer's "
                                   f"vocabulary (0..{vocab_size - 1}): is --tokenizer the served model's?")
        logprobs = choice.get("logprobs")
        logprobs = logprobs.get("token_logprobs") if isinstance(logprobs, dict) else None
        if logprobs is not None and not (
                isinstance(logprobs, list) and len(logprobs) == len(ids)
                and all(type(x) in (int, float) for x in logprobs)):
            raise protocol_failure(f"logprobs.token_logprobs {shown(logprobs)} are not one "
                                   f"number per token id ({len(ids)})")
        # Without the end-of-turn token the next delta supplies it, masked: it was not sampled.
        return Generation(ids, logprobs, finished=bool(ids) and ids[-1] == eos_id)

    return sample


@dataclass
class TokenBackend:
    """local and completions: the same session, a different sampler."""

    template: ChatTemplate
    sample: Callable[[list[int], int], Awaitable[Generation]]
    sampling: Sampling
    max_context: int
    prompting: Prompting
    endpoints: Endpoints | None = None  # completions: where `sample` sends its requests

    def close(self) -> None:
        if self.endpoints is not None:
            self.endpoints.close()

    def open(self, domain: Domain, tool_specs: list[dict[str, Any]]) -> TokenSession:
        p = self.prompting
        return TokenSession(self.template, self.sample, self.sampling, self.max_context, tool_specs,
                            render_system(domain.policy, tool_specs, p.tool_format),
                            few_shot_of(domain) if p.few_shot else [], p.tool_prefill)
