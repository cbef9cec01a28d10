"""The episode settings as click flags, the same in every tool: help text (HELP), the flag types
with their ranges (FLAG_TYPES), and `options`, which turns any dataclass inheriting
EpisodeSettings (RunConfig, grpo's TrainConfig) into flags with their defaults shown."""

from __future__ import annotations

import dataclasses
from typing import Any

import click
import orjson

from endstate.core.agent.interpret import TOOL_LISTINGS
from endstate.core.cli.ranges import FiniteFloatRange, count, number  # noqa: F401 - FiniteFloatRange: re-exported
from endstate.core.episode.settings import EpisodeSettings

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


# click types beyond the field's: choices, and the range of every number (a usage error naming the
# flag, never a hang at -j 0 or a silent default at --max-turns 0)
FLAG_TYPES: dict[str, Any] = {
    "tool_format": TOOL_LISTINGS.choice(),
    "temperature": number(0, 100), "top_p": number(0, 1, min_open=True),
    "top_k": count(1, 2**31 - 1), "min_p": number(0, 1),
    "presence_penalty": number(-2, 2), "frequency_penalty": number(-2, 2),
    "repetition_penalty": number(0, 100, min_open=True), "extra_body": JsonObject(),
    "max_new_tokens": count(1, 2**20), "max_context": count(1, 2**24),
    "max_turns": count(1, 10_000), "jobs": count(1, 100_000),
}
SHORT = {"jobs": "-j"}
TYPES = {"int": int, "float": float, "str": str, "int | None": int, "float | None": float,
         "str | None": str}


def options(cls: type, help: dict[str, str], kinds: dict[str, Any] = FLAG_TYPES,
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

