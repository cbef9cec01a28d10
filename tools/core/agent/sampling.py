"""How each model call samples, declared once (`Sampling`), and the rules that apply it to
logits, written to match vLLM's sampler: one definition for the endpoint backends' request bodies,
the local generator and grpo's trainer. torch is imported where the logits rules run, not here."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from endstate.core.errors import EndstateError

# What --extra-body may not set: what endstate writes into every request itself, and what a flag
# sets (one way to say each thing, and every setting recorded under its own name).
ENDSTATE_SETS = ("model", "messages", "prompt", "tools", "stream", "n", "echo", "logprobs",
                 "return_token_ids", "skip_special_tokens")
OPTIONAL_SAMPLING = ("top_k", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty")
FLAGGED = {"max_tokens": "--max-new-tokens", "max_completion_tokens": "--max-new-tokens",
           "seed": "--seed", **{k: "--" + k.replace("_", "-") for k in
                                ("temperature", "top_p", *OPTIONAL_SAMPLING, "stop")}}


@dataclass(kw_only=True)
class Sampling:
    """How each model call samples: the sampling part of the episode settings, read alike by the
    endpoint backends (`request_fields`), the local generator and grpo's engines, and recorded in
    every episode's `policy.sampling` (`recorded`). Unset (None) settings are not sent and are
    off locally."""

    temperature: float = 1.0
    top_p: float = 1.0
    # None: not sent, the server's default (vLLM: the model's generation_config.json); locally off
    top_k: int | None = None
    min_p: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repetition_penalty: float | None = None
    stop: list[str] = field(default_factory=list)
    extra_body: dict | None = None  # merged into every agent request body (endpoint backends)
    max_new_tokens: int = 256

    def __post_init__(self) -> None:
        self.stop = list(self.stop or ())
        if not all(isinstance(s, str) and s for s in self.stop):
            raise EndstateError(f"--stop {list(self.stop)}: stop strings are non-empty text")
        for key in self.extra_body or {}:
            if key in ENDSTATE_SETS:
                raise EndstateError(f"--extra-body: {key!r} is set by endstate itself in every "
                                    "request; leave it out")
            if key in FLAGGED:
                raise EndstateError(f"--extra-body: {key!r} has its own flag, {FLAGGED[key]} "
                                    "(so it is recorded in policy.sampling): use that")

    @classmethod
    def of(cls, settings: Any) -> Sampling:
        """The sampling part alone of any config that inherits EpisodeSettings."""
        return cls(**{f.name: getattr(settings, f.name) for f in dataclasses.fields(cls)})

    def request_fields(self) -> dict[str, Any]:
        """The sampling fields of an OpenAI-compatible request body, --extra-body merged last.
        vLLM reads top_k, min_p and repetition_penalty as extra body parameters; unset ones are
        left out, so a hosted API that does not know them never sees them."""
        body: dict[str, Any] = {"max_tokens": self.max_new_tokens, "temperature": self.temperature,
                                "top_p": self.top_p}
        body.update({k: getattr(self, k) for k in OPTIONAL_SAMPLING if getattr(self, k) is not None})
        if self.stop:
            body["stop"] = list(self.stop)
        return {**body, **(self.extra_body or {})}

    def recorded(self) -> dict[str, Any]:
        """policy.sampling: every setting that was given (an absent one was not sent, or off)."""
        out: dict[str, Any] = {"temperature": self.temperature, "top_p": self.top_p,
                               "max_new_tokens": self.max_new_tokens}
        out.update({k: getattr(self, k) for k in OPTIONAL_SAMPLING if getattr(self, k) is not None})
        if self.stop:
            out["stop"] = list(self.stop)
        if self.extra_body:
            out["extra_body"] = self.extra_body
        return out


# -- the rules that apply a Sampling to logits: one definition for the local generator and grpo's
# trainer, written to match vLLM's sampler (torch is imported where they run, not here)

FILTERED = -1e30  # the logit of a token top-k/top-p filtered out: probability exactly 0, entropy finite


def processed_logits(logits, temperature: float, top_k: int | None, top_p: float):
    """The logits a sampler draws from, processed as transformers' and vLLM's samplers process
    them, in their order: / temperature (0, greedy, counts as 1); top-k (ties with the k-th token
    kept); top-p (sorted ascending, tokens whose cumulative probability is ≤ 1 − top_p dropped, the
    most likely always kept). logits (..., V), float32; returns the same shape."""
    import torch

    if temperature and temperature != 1.0:
        logits = logits / temperature
    if top_k and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]  # (..., 1)
        logits = logits.masked_fill(logits < kth, FILTERED)
    if top_p < 1.0:
        ascending, order = torch.sort(logits, dim=-1)
        drop = ascending.softmax(-1).cumsum(-1) <= 1 - top_p
        drop[..., -1] = False
        logits = logits.masked_fill(drop.scatter(-1, order, drop), FILTERED)
    return logits


class Penalties:
    """vLLM's penalties as a transformers logits processor, applied before temperature:
    repetition over the tokens of the prompt (pads excluded) and of the completion so far
    (positive logits divided by it, negative multiplied); presence and frequency (OpenAI's)
    subtracted over the completion's tokens only. prompt_mask (B, P): the real prompt tokens of
    the left-padded batch; what follows them in input_ids is the completion."""

    def __init__(self, prompt_mask, sampling: Sampling):
        self.prompt_mask = prompt_mask
        self.repetition = sampling.repetition_penalty or 1.0
        self.presence = sampling.presence_penalty or 0.0
        self.frequency = sampling.frequency_penalty or 0.0

    def __call__(self, input_ids, scores):
        import torch

        width = self.prompt_mask.shape[1]
        generated = input_ids[:, width:]  # (B, n)
        counts = torch.zeros_like(scores).scatter_add_(
            -1, generated, torch.ones_like(generated, dtype=scores.dtype))  # (B, V)
        if self.repetition != 1.0:
            in_prompt = torch.zeros_like(scores).scatter_add_(
                -1, input_ids[:, :width], self.prompt_mask.to(scores))  # (B, V)
            seen = (in_prompt > 0) | (counts > 0)
            penalised = torch.where(scores > 0, scores / self.repetition, scores * self.repetition)
            scores = torch.where(seen, penalised, scores)
        return scores - self.frequency * counts - self.presence * (counts > 0).to(scores.dtype)


class StopStrings:
    """A transformers stopping criterion: a row is done once the text of its last tokens holds a
    stop string. Only an early exit (stop_end then finds exactly where the completion ends), so
    it looks at a window of tokens, as many as the longest stop string has characters, plus 2."""

    def __init__(self, tokenizer, stops: tuple[str, ...], start: int):
        self.tokenizer, self.stops, self.start = tokenizer, stops, start
        self.window = max(map(len, stops)) + 2

    def __call__(self, input_ids, scores, **kwargs):
        import torch

        tails = input_ids[:, max(self.start, input_ids.shape[1] - self.window):].tolist()
        texts = self.tokenizer.batch_decode(tails, skip_special_tokens=False)
        return torch.tensor([any(s in t for s in self.stops) for t in texts], device=input_ids.device)


def stop_end(tokenizer, ids: list[int], stops: tuple[str, ...]) -> int | None:
    """The length of the shortest prefix of `ids` whose text holds a stop string, or None: the
    completion ends with the token that completes it, as vLLM ends one (text kept, as the
    completions backend reads it from the token ids). Binary search: O(log n) decodes."""
    def holds(n: int) -> bool:
        text = tokenizer.decode(ids[:n], skip_special_tokens=False)
        return any(s in text for s in stops)

    if not stops or not ids or not holds(len(ids)):
        return None
    low, high = 1, len(ids)
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if holds(mid) else (mid + 1, high)
    return low


