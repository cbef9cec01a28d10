"""A tool's JSON Schema from its type hints, and its JSON arguments back as those types.

    str, int, float, bool, Any      {"type": ...} ({} for Any)
    Literal["a", 1]                 {"enum": [...], "type": [...]}, mixed types allowed
    X | None, Optional[X]           {"anyOf": [X, {"type": "null"}]}
    list[X], tuple[X, ...]          {"type": "array", "items": X}
    dict[str, X]                    {"type": "object", "additionalProperties": X}
    a TypedDict or a dataclass      {"type": "object", "properties", "required",
                                     "additionalProperties": false}

A TypedDict's keys are required as `__required_keys__` says (`total=False`, `NotRequired`); a
dataclass field is required unless it has a default. Field descriptions come from the class
docstring's Google-style `Attributes:` section, as a tool's argument descriptions come from its
`Args:`. `to_python` turns validated arguments into what the hints say: a dataclass parameter
receives an instance (a list of them, a list of instances); a TypedDict stays a dict.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import types
import typing
from collections.abc import Callable
from typing import Any, Literal

_JSON_TYPES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean",
                               dict: "object", list: "array", type(None): "null"}
_SECTIONS = "Args|Arguments|Attributes|Returns|Raises|Yields|Examples?"
_HEADER = re.compile(rf"^(?:{_SECTIONS}):[ \t]*$", re.M)  # where the description ends
_NEXT_SECTION = re.compile(rf"^(?:{_SECTIONS}):", re.M)  # where a section's entries end


def docstring_parts(doc: str | None, section: str = "Args") -> tuple[str, dict[str, str]]:
    """(description, {name: description}) from a Google-style docstring: the text before its first
    section header, and the entries of `section` (`Args` for a tool, `Attributes` for a class)."""
    doc = inspect.cleandoc(doc or "")
    described: dict[str, str] = {}
    found = re.search(rf"^{section}:[ \t]*$", doc, re.M)
    if found:
        current = None
        for line in _NEXT_SECTION.split(doc[found.end():])[0].splitlines():
            m = re.match(r"\s{2,}(\w+)(?:\s*\([^)]*\))?:\s*(.*)", line)
            if m and (len(line) - len(line.lstrip())) <= 4:
                current = m.group(1)
                described[current] = m.group(2).strip()
            elif current and line.strip():
                described[current] += " " + line.strip()
    return " ".join(_HEADER.split(doc)[0].split()), described


def is_record_type(annotation: Any) -> bool:
    """A TypedDict or a dataclass class: a JSON object with named fields."""
    return isinstance(annotation, type) and (typing.is_typeddict(annotation)
                                             or dataclasses.is_dataclass(annotation))


def json_schema_of(annotation: Any) -> dict[str, Any]:
    """JSON Schema for a type hint (the module docstring lists what is supported)."""
    return _schema(annotation, ())


def _schema(annotation: Any, within: tuple[type, ...]) -> dict[str, Any]:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is Any:
        return {}
    if annotation in _JSON_TYPES:
        return {"type": _JSON_TYPES[annotation]}
    if origin is Literal:
        if any(type(v) not in _JSON_TYPES for v in args):  # an Enum member, bytes
            raise TypeError(f"unsupported tool argument type {annotation!r}: Literal values must be "
                            "str, int, float, bool or None (an agent writes JSON)")
        kinds = list(dict.fromkeys(_JSON_TYPES[type(v)] for v in args))
        return {"type": kinds[0] if len(kinds) == 1 else kinds, "enum": list(args)}
    if origin in (list, tuple):
        if origin is tuple and args and (len(args) != 2 or args[1] is not Ellipsis):
            raise TypeError(f"unsupported tool argument type {annotation!r}; use tuple[X, ...] or list[X]")
        return {"type": "array", "items": _schema(args[0], within)} if args else {"type": "array"}
    if origin is dict:
        if args and args[0] is not str:
            raise TypeError(f"unsupported tool argument type {annotation!r}: JSON object keys are strings")
        value = _schema(args[1], within) if args else {}
        return {"type": "object", "additionalProperties": value} if value else {"type": "object"}
    if origin in (typing.Union, types.UnionType):
        options = [_schema(a, within) for a in args if a is not type(None)]
        schema = options[0] if len(options) == 1 else {"anyOf": options}
        return {"anyOf": [schema, {"type": "null"}]} if type(None) in args else schema
    if is_record_type(annotation):
        if annotation in within:
            raise TypeError(f"tool argument type {annotation.__name__} refers to itself; "
                            "recursive types are not supported (pass schema= to @tool)")
        return _object_schema(annotation, within + (annotation,))
    raise TypeError(f"unsupported tool argument type {annotation!r}; use str, int, float, bool, "
                    "list[...], dict[str, ...], Literal[...], X | None, a TypedDict or a dataclass")


def _object_schema(cls: type, within: tuple[type, ...]) -> dict[str, Any]:
    try:
        hints = typing.get_type_hints(cls)
    except NameError as e:  # a hint naming a class defined inside a function
        raise TypeError(f"cannot read the type hints of {cls.__name__}: {e}; define the types "
                        "it names at module level") from None
    _, described = docstring_parts(cls.__doc__, "Attributes")
    if typing.is_typeddict(cls):
        names, required, defaults = list(hints), set(cls.__required_keys__), {}
    else:
        fields = [f for f in dataclasses.fields(cls) if f.init]
        names = [f.name for f in fields]
        required = {f.name for f in fields
                    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
        defaults = {f.name: f.default for f in fields if f.default is not dataclasses.MISSING}
    properties = {}
    for name in names:
        prop = _schema(hints[name], within)
        if name in described:
            prop["description"] = described[name]
        properties[name] = with_default(prop, defaults.get(name, dataclasses.MISSING))
    return {"type": "object", "properties": properties,
            "required": [n for n in names if n in required], "additionalProperties": False}


def with_default(prop: dict[str, Any], default: Any) -> dict[str, Any]:
    """`prop` with its `default`, when the default is a JSON value (an agent can be shown it)."""
    if isinstance(default, (str, int, float, bool, type(None), list, dict)):
        prop["default"] = default
    return prop


def holds_dataclass(annotation: Any) -> bool:
    """Whether JSON read for this hint must be converted (it mentions a dataclass somewhere)."""
    if is_record_type(annotation):
        return dataclasses.is_dataclass(annotation) or any(
            holds_dataclass(h) for h in typing.get_type_hints(annotation).values())
    return any(holds_dataclass(a) for a in typing.get_args(annotation))


def to_python(value: Any, annotation: Any) -> Any:
    """A validated JSON value as `annotation` asks: dataclasses built as instances, at any depth;
    everything else as it was read. Call it only where `holds_dataclass(annotation)`."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if value is None:
        return None
    if is_record_type(annotation):
        hints = typing.get_type_hints(annotation)
        fields = {k: to_python(v, hints[k]) if k in hints else v for k, v in value.items()}
        return annotation(**fields) if dataclasses.is_dataclass(annotation) else fields
    if origin in (list, tuple) and args:
        return [to_python(v, args[0]) for v in value]
    if origin is dict and args:
        return {k: to_python(v, args[1]) for k, v in value.items()}
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        for option in options:  # the first that the value is valid for, as anyOf would read it
            if len(options) == 1 or _validator(json_schema_of(option)).is_valid(value):
                return to_python(value, option)
    return value


def check_parameters_schema(name: str, schema: Any, parameters: list[inspect.Parameter]) -> None:
    """A `schema=` given to @tool: a valid Draft 2020-12 object schema whose properties are the
    function's parameters, requiring those without defaults. Else TypeError naming the tool."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as e:
        raise TypeError(f"tool {name}: schema= is not a valid JSON Schema (Draft 2020-12): "
                        f"{e.message}") from None
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise TypeError(f'tool {name}: schema= describes the arguments object: give it "type": "object"')
    names = {p.name for p in parameters}
    takes_any = any(p.kind is p.VAR_KEYWORD for p in parameters)
    unknown = sorted(set(schema.get("properties", {})) - names)
    if unknown and not takes_any:
        raise TypeError(f"tool {name}: schema= has properties {unknown} that are not parameters "
                        f"of the function; its parameters: {sorted(names)}")
    needed = sorted(p.name for p in parameters if p.default is p.empty
                    and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
    missing = [n for n in needed if n not in schema.get("required", [])]
    if missing:
        raise TypeError(f"tool {name}: parameters {missing} have no default, so schema= must list "
                        'them under "required"')


# -- a fast path for argument validation -------------------------------------------------------

_PY_TYPES = {"string": (str,), "number": (int, float), "integer": (int,), "boolean": (bool,),
             "null": (type(None),)}
_INERT = {"description", "title", "default", "examples"}  # keywords that never reject a value


def fast_accept(schema: dict[str, Any]) -> Callable[[Any], bool] | None:
    """A plain-Python check that accepts a subset of what `schema` accepts (False: ask jsonschema,
    which gives the verdict and the message), for the schemas typed signatures produce: an object
    of scalar properties, optional ones as anyOf with null, string enums, no extra keys. None for
    any schema using more (the validator is then the only check). Accepting less than JSON Schema
    does (1.0 as an integer, say) costs only the slow path."""
    if set(schema) - {"type", "properties", "required", "additionalProperties", *_INERT} \
            or schema.get("type") != "object" or schema.get("additionalProperties") is not False:
        return None
    properties = {}
    for name, prop in schema.get("properties", {}).items():
        accept = _value_accept(prop)
        if accept is None:
            return None
        properties[name] = accept
    required = frozenset(schema.get("required", ()))

    def accept(args: Any) -> bool:
        if type(args) is not dict or not required <= args.keys():
            return False
        for key, value in args.items():
            check = properties.get(key)
            if check is None or not check(value):
                return False
        return True

    return accept


def _value_accept(prop: Any) -> Callable[[Any], bool] | None:
    if not isinstance(prop, dict):
        return None
    if "anyOf" in prop:
        branches = [_value_accept(b) for b in prop["anyOf"]] if isinstance(prop["anyOf"], list) else [None]
        if set(prop) - {"anyOf", *_INERT} or None in branches:
            return None
        return lambda v: any(branch(v) for branch in branches)
    kind = prop.get("type")
    if set(prop) - {"type", "enum", *_INERT} or not isinstance(kind, str) or kind not in _PY_TYPES:
        return None
    if "enum" in prop:
        allowed = prop["enum"]
        if kind != "string" or not isinstance(allowed, list) or any(type(x) is not str for x in allowed):
            return None
        members = frozenset(allowed)
        return lambda v: type(v) is str and v in members
    exact = _PY_TYPES[kind]
    return lambda v: type(v) in exact


def _validator(schema: dict[str, Any]):
    from jsonschema import Draft202012Validator  # imported when first needed (CLI start time)

    return Draft202012Validator(schema)
