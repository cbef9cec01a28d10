"""A grpo setting, declared once, and everything derived from the declarations.

A config field's name, type and default are the dataclass's; `setting` puts the rest in the
field's metadata: the help text, the click type holding its range or choices, the setting without
which it has no effect (`Needs`), and the metrics key that records the value in force. From them:
the flags (core.cli.options builds them from `help_texts` and `flag_types`), the YAML keys (the
field names) and the typed reading of their values (`read_yaml`), the range and choice checks a
YAML value meets (`check_values`), the refusal of a flag given without its partner
(`refuse_idle_flags`), the metrics that record settings (`recorded`) and the table of settings in
docs/grpo.md (`settings_table`; `make docs` rewrites it, a test fails when it is stale). The
episode settings grpo inherits (temperature ... device) are declared in core (core.cli.options'
HELP and FLAG_TYPES), shared with rollout and probe: `declarations` reads them there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from endstate.core.cli import options as flags
from endstate.core.cli.ranges import EndpointURL, KeyEnv
from endstate.core.errors import EndstateError


@dataclass(frozen=True)
class Needs:
    """The setting that gives another its effect: `holds(config)` is true when it is there,
    `other` names it in the refusal (`--eval-tasks`)."""

    holds: Callable[[Any], Any]
    other: str


@dataclass(frozen=True)
class Setting:
    help: str
    kind: click.ParamType | None = None  # the flag's type when the field's is not enough: range, choices
    needs: Needs | None = None
    metric: str | None = None  # the metrics.jsonl key recording the value in force each step
    in_force: Callable[[Any], Any] | None = None  # that value, where it is not the setting's (auto)


def setting(default: Any = dataclasses.MISSING, help: str = "", kind: click.ParamType | None = None, *,
            factory: Callable[[], Any] | None = None, needs: Needs | None = None,
            metric: str | None = None, in_force: Callable[[Any], Any] | None = None) -> Any:
    """A dataclass field declared with everything grpo derives from it (`factory`: a mutable default)."""
    declared = {"setting": Setting(help, kind, needs, metric, in_force)}
    if factory is not None:
        return field(default_factory=factory, metadata=declared)
    return field(default=default, metadata=declared)


def declarations(cls: type) -> dict[str, Setting]:
    """Every field's declaration, in field order: its own, or core's for an episode setting."""
    out = {}
    for f in dataclasses.fields(cls):
        if "setting" in f.metadata:
            out[f.name] = f.metadata["setting"]
        elif f.name in flags.HELP:
            out[f.name] = Setting(flags.HELP[f.name], flags.FLAG_TYPES.get(f.name))
        else:
            raise TypeError(f"{cls.__name__}.{f.name} is not declared: give it `= setting(...)`")
    return out


def help_texts(declared: dict[str, Setting]) -> dict[str, str]:
    return {name: s.help for name, s in declared.items()}


def flag_types(declared: dict[str, Setting]) -> dict[str, click.ParamType]:
    return {name: s.kind for name, s in declared.items() if s.kind is not None}


def flag(name: str, field_type: str) -> str:
    """The flag of a setting: `--batch-tasks`; a boolean's both spellings `--x/--no-x`."""
    spelled = "--" + name.replace("_", "-")
    return spelled + (f"/--no-{spelled[2:]}" if field_type in ("bool", "bool | None") else "")


# -- values from a YAML file: the field's type, then its flag's range or choices ------------------

# What a YAML value of each field type may be (bool is an int in Python: never a number here).
_KINDS = {"int": ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)),
          "float": ("a number", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)),
          "str": ("a string", lambda v: isinstance(v, str)),
          "bool": ("true or false", lambda v: isinstance(v, bool)),
          "dict": ("a mapping", lambda v: isinstance(v, dict)),
          "list[str]": ("a list of strings (or one comma-separated string)",
                        lambda v: isinstance(v, str) or isinstance(v, list) and all(isinstance(x, str) for x in v))}


def check_type(cls: type, key: str, value: Any, where: str = "") -> None:
    """A usage error naming the key and the expected type when `value` does not fit the field."""
    kind = {f.name: f.type for f in dataclasses.fields(cls)}[key]
    optional = kind.endswith(" | None")
    if optional and value is None:
        return
    expected, fits = _KINDS[kind.removesuffix(" | None")]
    if not fits(value):
        expected += " or null" if optional else ""
        raise EndstateError(f"{where}{key}: expected {expected}, got {value!r}")


def read_yaml(path: str | None, cls: type) -> dict[str, Any]:
    """The keys of a YAML config file, each a field of `cls` with a value of its type."""
    if not path:
        return {}
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_bytes().decode()) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise EndstateError(f"{path}: cannot read the config: {e}") from None
    except RecursionError:
        raise EndstateError(f"{path}: cannot read the config: nested too deep") from None
    if not isinstance(data, dict):
        raise EndstateError(f"{path}: a grpo config is a mapping of keys to values")
    known = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(data) - set(known), key=str)
    if unknown:
        raise EndstateError(f"{path}: unknown key(s) {', '.join(map(str, unknown))}; known: {', '.join(known)}")
    for key, value in data.items():
        check_type(cls, key, value, f"{path}: ")
    return data


CHECKED = (click.IntRange, click.FloatRange, click.Choice, EndpointURL, KeyEnv)


def check_values(config: Any, declared: dict[str, Setting]) -> None:
    """Each value held to its flag's range, choices or URL check: a YAML value skips click."""
    for name, s in declared.items():
        value = getattr(config, name)
        if value is None or not isinstance(s.kind, CHECKED):
            continue
        for one in value if isinstance(value, list) else [value]:
            if isinstance(s.kind, click.Choice):
                if one not in s.kind.choices:
                    raise EndstateError(f"{name} {one!r}: choose one of {', '.join(s.kind.choices)}")
                continue
            try:
                s.kind.convert(one, None, None)
            except click.BadParameter as e:
                raise EndstateError(f"{name}: {e.message}") from None


def refuse_idle_flags(config: Any, given: set[str], cls: type) -> None:
    """A flag that does nothing without another, given on the command line without it, is
    refused naming the other (a YAML file is a set of defaults for many runs: not checked)."""
    types = {f.name: f.type for f in dataclasses.fields(cls)}
    for name, s in declarations(cls).items():
        if s.needs and name in given and not s.needs.holds(config):
            spelled = flag(name, types[name])
            raise EndstateError(f"{spelled} has no effect without {s.needs.other}: add it, or drop {spelled}")


def recorded(config: Any) -> dict[str, Any]:
    """The settings each metrics line records: {metric key: the value in force}."""
    return {s.metric: s.in_force(config) if s.in_force else getattr(config, name)
            for name, s in declarations(type(config)).items() if s.metric}


# -- the docs table -----------------------------------------------------------------------------------

def settings_table(cls: type, declared: dict[str, Setting], command: click.Command) -> str:
    """The markdown table of every setting, in the order of `command`'s --help: YAML key, flag,
    default, the values it takes, what it does (and the setting it needs)."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    rows = ["| key | flag | default | values | meaning |", "|---|---|---|---|---|"]
    for name in [p.name for p in command.params if p.name in declared]:
        f, s = fields[name], declared[name]
        default = f.default_factory() if f.default is dataclasses.MISSING else f.default
        meaning = s.help + (f" Needs {s.needs.other}." if s.needs else "")
        meaning += f" Recorded as `{s.metric}` in metrics.jsonl." if s.metric else ""
        cells = [f"`{name}`", f"`{flag(name, f.type)}`", _shown(default), _values(s.kind, f.type), meaning]
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(rows) + "\n"


def _shown(default: Any) -> str:
    """A default as YAML writes it."""
    if default is None or default == "":
        return "unset"
    if isinstance(default, bool):
        return "true" if default else "false"
    if isinstance(default, (list, dict)):
        return "[" + ", ".join(default) + "]" if isinstance(default, list) else "{}"
    return f"`{default}`"


def _values(kind: click.ParamType | None, field_type: str) -> str:
    if isinstance(kind, click.Choice):
        return ", ".join(f"`{c}`" for c in kind.choices)
    if isinstance(kind, (click.IntRange, click.FloatRange)):
        low, high = (f"{end}" if isinstance(end, int) else f"{end:g}" for end in (kind.min, kind.max))
        return f"{low} {'<' if kind.min_open else '≤'} x {'<' if kind.max_open else '≤'} {high}"
    if isinstance(kind, click.ParamType) and not isinstance(kind, click.types.FuncParamType):
        return kind.name.lower() if kind.name else ""
    base = field_type.removesuffix(" | None")
    return {"bool": "true, false", "str": "text", "list[str]": "list of text", "int": "integer",
            "float": "real", "dict": "mapping"}.get(base, base)
