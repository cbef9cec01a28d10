"""How a model is prompted travels with the model: `endstate.json` beside its `config.json`.

The prompting settings (few-shot turns, the `<tool_call>` prefill, how the tools are listed, and
the interpreter that reads the answers) are resolved once per run, in this order:

  1. a flag given on the command line (or a grpo YAML key);
  2. what the model folder records in endstate.json (the embedded model's conversion writes its
     defaults there; every grpo checkpoint and export writes the settings it was trained with);
  3. the generic defaults: few-shot on, no prefill, JSON tool specs.

A flag that overrides a recorded setting is said on stderr: the model is then prompted unlike the
way it was trained. Every episode records the result in its `policy`.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import msgspec
import orjson

from endstate.core.agent.interpret import INTERPRETER_VERSION, TOOL_LISTINGS
from endstate.core.errors import EndstateError
from endstate.core.records.episode import PROMPTING
from endstate.core.records.structs import Prompting

PROMPTING_FILE = "endstate.json"
SETTINGS = ("few_shot", "tool_prefill", "tool_format")
GENERIC = {"few_shot": True, "tool_prefill": False, "tool_format": "json"}
# SmolLM2-135M calls tools far more reliably with the prefill, and its 8k context holds the bench's
# tools as one-line signatures in about half the tokens (docs/rollout.md).
EMBEDDED_PROMPTING = Prompting(few_shot=True, tool_prefill=True, tool_format="signatures",
                               interpreter=INTERPRETER_VERSION)

log = logging.getLogger("endstate")


def recorded(folder: Path | None) -> dict[str, Any]:
    """The prompting settings a model folder records ({} when it records none); a file that is
    not what `record` writes is a usage error naming it and the fix."""
    path = folder / PROMPTING_FILE if folder else None
    if path is None or not path.exists():
        return {}
    try:
        prompting = orjson.loads(path.read_bytes()).get("prompting") or {}
        if not isinstance(prompting, dict):
            raise TypeError
    except (orjson.JSONDecodeError, AttributeError, TypeError):
        raise EndstateError(f"{path}: not a prompting record (expected {{\"prompting\": {{...}}}}); "
                            "fix or delete it") from None
    settings = {k: prompting[k] for k in SETTINGS if k in prompting}
    for k, v in settings.items():
        if not (v in TOOL_LISTINGS if k == "tool_format" else type(v) is bool):
            expected = " or ".join(TOOL_LISTINGS) if k == "tool_format" else "true or false"
            raise EndstateError(f"{path}: prompting.{k} is {v!r}; expected {expected}")
    return settings


def record(folder: Path, prompting: Prompting) -> None:
    """Write `prompting` into `folder`/endstate.json (atomically: jobs may share the folder)."""
    body = {"prompting": msgspec.structs.asdict(prompting)}
    tmp = folder / f".{PROMPTING_FILE}.{os.getpid()}"
    tmp.write_bytes(orjson.dumps(body, option=orjson.OPT_INDENT_2) + b"\n")
    os.replace(tmp, folder / PROMPTING_FILE)


def resolve(flags: dict[str, Any], folder: Path | None, what: str) -> Prompting:
    """The settings a run uses: `flags` (None: not given) over what `folder` records over the
    generic defaults. `what` names the model in the warning about an overridden setting."""
    saved = recorded(folder)
    resolved = {**GENERIC, **saved, **{k: v for k, v in flags.items() if v is not None}}
    overridden = [f"{k}: {saved[k]!r} -> {resolved[k]!r}" for k in saved if resolved[k] != saved[k]]
    if overridden:
        log.warning("%s was trained/recorded with other prompting (%s); the flags win, so it is "
                    "prompted unlike its record", what, "; ".join(overridden))
    return Prompting(**resolved, interpreter=INTERPRETER_VERSION)


def differences(promptings: list[dict[str, Any] | None]) -> dict[str, set]:
    """Prompting settings that differ across these policies or attempts' `prompting`:
    {setting: the values seen, as JSON}. Records without any are left out."""
    seen: dict[str, set] = {}
    for p in filter(None, promptings):
        for k in PROMPTING:
            seen.setdefault(k, set()).add(orjson.dumps(p.get(k)).decode())
    return {k: v for k, v in seen.items() if len(v) > 1}
