"""The settings of an episode that rollout, probe and grpo share, declared once: name, type and
default here, help text beside them. RunConfig and grpo's TrainConfig inherit the fields, and
`options` turns any such dataclass into the same click flags in every tool, defaults shown."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import click

from endstate.core.interpret import TOOL_FORMATS


@dataclass
class EpisodeSettings:
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    max_context: int = 8192
    max_turns: int | None = None  # None: the task's max_turns, else DEFAULT_MAX_TURNS
    jobs: int = 8
    # prompting: None = what the model folder records, else the generic default (core.prompting)
    few_shot: bool | None = None
    tool_prefill: bool | None = None
    tool_format: str | None = None
    device: str = "cpu"


HELP = {
    "temperature": "Sampling temperature (0: greedy).",
    "top_p": "Nucleus sampling: sample from the smallest set of tokens holding this much mass.",
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
KINDS: dict[str, Any] = {
    "tool_format": click.Choice(TOOL_FORMATS),
    "temperature": click.FloatRange(min=0), "top_p": click.FloatRange(0, 1, min_open=True),
    "max_new_tokens": click.IntRange(min=1), "max_context": click.IntRange(min=1),
    "max_turns": click.IntRange(min=1), "jobs": click.IntRange(min=1),
}
SHORT = {"jobs": "-j"}
TYPES = {"int": int, "float": float, "str": str, "int | None": int, "str | None": str}


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
