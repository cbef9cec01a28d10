"""The settings of an episode that rollout, probe and grpo share, declared once: name, type and
default in `Sampling` and `EpisodeSettings` (the sampling settings, plus the rest), help text in
HELP. RunConfig and grpo's TrainConfig inherit the fields, and `options` turns any such dataclass
into the same click flags in every tool, defaults shown. Every backend and engine reads the
sampling part as a `Sampling`, and the functions at the end apply it to logits alike in the
local generator and grpo's trainer, by vLLM's rules."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import click
import orjson

from endstate.core.errors import EndstateError
from endstate.core.interpret import TOOL_FORMATS

HELP = {
    "temperature": "Sampling temperature (0: greedy).",
    "top_p": "Nucleus sampling: sample from the smallest set of tokens holding this much mass.",
    "top_k": "Sample from the K most likely tokens [default: unset: off locally, the server's "
             "default at an endpoint].",
    "min_p": "Drop tokens less likely than MIN_P × the most likely one [default: unset].",
    "presence_penalty": "Subtract this from the logit of every token already generated in the "
                        "call (OpenAI's; -2..2) [default: unset].",
    "frequency_penalty": "Subtract this × its count from the logit of every token generated in "
                         "the call (OpenAI's; -2..2) [default: unset].",
    "repetition_penalty": "Divide (multiply, if negative) the logits of tokens in the prompt or "
                          "the completion by this (vLLM's and transformers'; 1: off) [default: unset].",
    "stop": "End the completion where this text appears (repeatable).",
    "extra_body": "A JSON object merged into every agent request body (endpoint backends), e.g. "
                  "'{\"chat_template_kwargs\": {\"enable_thinking\": false}}'; keys endstate "
                  "sets itself are refused.",
    "max_new_tokens": "Tokens per model call.",
    "max_context": "End the episode (context_overflow) rather than exceed this many tokens.",
    "max_turns": "Agent calls per episode [default: the task's max_turns, else 30].",
    "jobs": "Episodes in flight (the local backend generates up to this many prompts per batch).",
    "few_shot": "Show the domain's example turns [default: as the model folder's endstate.json "
                "records, else on].",
    "tool_prefill": "Token-level backends: start the agent's turn after each user message with "
                    "<tool_call> (prompt, not sampled) [default: as the model folder records "
                    "(on for the embedded model), else off].",
    "tool_format": "Token-level backends: list the tools in the system prompt as JSON specs, or as "
                   "one-line signatures without argument descriptions (~half the tokens) "
                   "[default: as the model folder records (signatures for the embedded model), "
                   "else json].",
    "device": "local backend: cpu, cuda, cuda:1...",
}
# click types beyond the field's: choices, and the range of every number (a usage error naming the
# flag, never a hang at -j 0 or a silent default at --max-turns 0)
class JsonObject(click.ParamType):
    """A JSON object given as text on the command line (YAML gives a mapping)."""

    name = "JSON"

    def convert(self, value, param, ctx):
        if isinstance(value, dict):
            return value
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError as e:
            self.fail(f"{value!r} is not JSON ({e}); quote it for the shell: '{{\"key\": 1}}'", param, ctx)
        if not isinstance(parsed, dict):
            self.fail(f"{value!r} is not a JSON object ({{...}})", param, ctx)
        return parsed


class FiniteFloatRange(click.FloatRange):
    """click's FloatRange without nan and inf: nan passes every range check, and orjson writes
    both as null, so `--temperature nan` would send the server's default and record null."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{number} is not a finite number", param, ctx)
        return number


KINDS: dict[str, Any] = {
    "tool_format": click.Choice(TOOL_FORMATS),
    "temperature": FiniteFloatRange(min=0), "top_p": FiniteFloatRange(0, 1, min_open=True),
    "top_k": click.IntRange(min=1), "min_p": FiniteFloatRange(0, 1),
    "presence_penalty": FiniteFloatRange(-2, 2), "frequency_penalty": FiniteFloatRange(-2, 2),
    "repetition_penalty": FiniteFloatRange(min=0, min_open=True), "extra_body": JsonObject(),
    "max_new_tokens": click.IntRange(min=1), "max_context": click.IntRange(min=1),
    "max_turns": click.IntRange(min=1), "jobs": click.IntRange(min=1),
}
SHORT = {"jobs": "-j"}
TYPES = {"int": int, "float": float, "str": str, "int | None": int, "float | None": float,
         "str | None": str}


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


@dataclass
class EpisodeSettings(Sampling):
    """The sampling settings, and the episode's limits, concurrency and prompting."""

    max_context: int = 8192
    max_turns: int | None = None  # None: the task's max_turns, else DEFAULT_MAX_TURNS
    jobs: int = 8
    # prompting: None = what the model folder records, else the generic default (core.prompting)
    few_shot: bool | None = None
    tool_prefill: bool | None = None
    tool_format: str | None = None
    device: str = "cpu"


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


def episode_values(config: Any) -> dict[str, Any]:
    """The EpisodeSettings fields of any config that inherits them."""
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(EpisodeSettings)}


def options(cls: type, help: dict[str, str], kinds: dict[str, Any] = KINDS,
            layered: bool = False):
    """A decorator adding one flag per field of the dataclass `cls` (`--max-new-tokens`; booleans
    as `--x/--no-x`), each shown with its default. `layered`: every flag defaults to None, so that
    a value from a config file applies unless the flag is given (grpo's YAML)."""
    shared = {f.name for f in dataclasses.fields(EpisodeSettings)}
    fields = sorted(dataclasses.fields(cls), key=lambda f: f.name in shared)  # a tool's own first

    def decorate(fn):
        for f in reversed(fields):
            fn = _option(f, help[f.name], kinds.get(f.name), layered)(fn)
        return fn

    return decorate


def _option(f: dataclasses.Field, help: str, kind: Any, layered: bool):
    default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
    flag = "--" + f.name.replace("_", "-")
    names = [SHORT[f.name], flag] if f.name in SHORT else [flag]
    if layered and _shown(default):  # the default is the dataclass's, not the flag's
        help = f"{help}  [default: {_shown(default)}]"
    shown = {"default": None} if layered else {"default": default, "show_default": default is not None}
    if f.type in ("bool", "bool | None"):
        return click.option(f"{flag}/--no-{flag[2:]}", f.name, help=help, **shown)
    if f.type == "list[str]":
        return click.option(*names, f.name, multiple=True, type=kind, help=help, default=None)
    return click.option(*names, f.name, type=kind or TYPES[f.type], help=help, **shown)


def _shown(default: Any) -> str:
    if default is None or default in ([], ""):
        return ""
    if isinstance(default, bool):
        return "on" if default else "off"
    return ",".join(default) if isinstance(default, list) else str(default)
