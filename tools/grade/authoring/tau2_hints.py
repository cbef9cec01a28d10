"""tau2's annotations, read as syntax (tau2_toolkit.py), as the type hints endstate's tools take
(core/env/tool_schema.py): str, int, float, bool, Any, `X | None`, list[X], dict[str, X],
Literal[...] and TypedDicts. `Optional`, `Union`, `List`, `Dict`, `Sequence`, `Annotated` and
string forward references are spelled the endstate way; a pydantic model becomes a TypedDict of
its fields (one with a default is NotRequired, a `Field(description=...)` describes it to the
agent); an Enum becomes the Literal of its values. A name neither the file nor a module beside it
defines is annotated `dict` (tau2 passes models as objects) and noted for the author to check.
"""

from __future__ import annotations

import ast
import math
from typing import Any

from endstate.grade.authoring.tau2_stubs import Records, docstring_text, python_name
from endstate.grade.authoring.tau2_toolkit import Names

MAX_DEPTH = 12  # annotations within annotations (aliases, models holding models)
SCALARS = ("str", "int", "float", "bool")
LISTS = ("list", "List", "Sequence", "MutableSequence", "Iterable", "Collection", "tuple", "Tuple",
         "set", "Set", "frozenset", "FrozenSet")
DICTS = ("dict", "Dict", "Mapping", "MutableMapping")
ENUMS = ("Enum", "StrEnum", "IntEnum")
UNPARSABLE = (ValueError, TypeError, SyntaxError, MemoryError, RecursionError)


def last_name(node: ast.AST | None) -> str | None:
    """`typing.List` -> List, `List` -> List."""
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else None


def json_value(value: Any) -> bool:
    """Whether a literal is JSON an agent can be shown (and repr() writes back as Python)."""
    if type(value) is float:
        return math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return all(map(json_value, value))
    if isinstance(value, dict):
        return all(isinstance(k, str) and json_value(v) for k, v in value.items())
    return value is None or type(value) in (str, int, bool)


def union(*members: tuple[str, ...]) -> tuple[str, ...]:
    """The members of `A | B`, each once, None last. Members stay whole: a Literal's text may hold
    " | " itself."""
    found = list(dict.fromkeys(m for ms in members for m in ms))
    return tuple([m for m in found if m != "None"] + ["None"] * ("None" in found))


def _short(node: ast.AST) -> str:
    try:
        text = ast.unparse(node)
    except UNPARSABLE:
        text = type(node).__name__
    return text if len(text) <= 60 else text[:57] + "..."


class Hints:
    """Annotation syntax -> hint text. TypedDicts go into `records`, the typing names the hints use
    into `typing`, and what the author should check into `notes` (`where` says for which tool)."""

    def __init__(self, records: Records, source: str):
        self.records, self.source = records, source
        self.typing: set[str] = set()
        self.notes: list[str] = []
        self.where = ""
        self._classes: dict[int, str] = {}  # id(class node) -> its hint: one TypedDict per class
        self._within: list[int] = []  # the classes being read (a model that holds itself)

    def note(self, text: str) -> None:
        line = f"{self.where}: {text}"
        if line not in self.notes:
            self.notes.append(line)

    def any(self, what: str) -> str:
        self.note(f"{what} has no endstate hint: annotated Any")
        self.typing.add("Any")
        return "Any"

    def of(self, node: ast.AST | None, names: Names, depth: int = 0) -> str:
        """The hint text of an annotation."""
        return " | ".join(self.members(node, names, depth))

    def members(self, node: ast.AST | None, names: Names, depth: int = 0) -> tuple[str, ...]:
        """The hints of an annotation's union members (one for a type that is no union)."""
        if node is None:
            return (self.any("a parameter without annotation"),)
        if depth > MAX_DEPTH:
            return (self.any(f"{_short(node)}, nested over {MAX_DEPTH} deep,"),)
        if isinstance(node, ast.Constant):
            if node.value is None:
                return ("None",)
            if isinstance(node.value, str):  # a forward reference, "Task"
                try:
                    return self.members(ast.parse(node.value, mode="eval").body, names, depth + 1)
                except UNPARSABLE:
                    return (self.any(f"annotation {node.value!r:.60}"),)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return union(self.members(node.left, names, depth + 1),
                         self.members(node.right, names, depth + 1))
        if isinstance(node, ast.Subscript):
            return self._generic(node, names, depth)
        return self._name(node, names, depth)

    def _name(self, node: ast.AST, names: Names, depth: int) -> tuple[str, ...]:
        name = last_name(node)
        if name in SCALARS:
            return (name,)
        if name in ("Any", "object"):
            self.typing.add("Any")
            return ("Any",)
        if name in DICTS or name in LISTS:
            return ("dict" if name in DICTS else "list",)
        if isinstance(node, ast.Name) and node.id in names:
            definition, where = names[node.id]
            if isinstance(definition, ast.ClassDef):
                return (self._class(definition, where, depth),)
            return self.members(definition, where, depth + 1)
        if name is None:
            return (self.any(f"annotation {_short(node)}"),)
        self.note(f"type {name} is defined neither in {self.source} nor in a module beside it: "
                  "annotated dict (tau2 passes models as objects)")
        return ("dict",)

    def _generic(self, node: ast.Subscript, names: Names, depth: int) -> tuple[str, ...]:
        head = last_name(node.value)
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if head in ("Optional", "Union"):
            return union(*(self.members(a, names, depth + 1) for a in args),
                         ("None",) * (head == "Optional"))
        if head == "Annotated":
            return self.members(args[0], names, depth + 1)
        if head == "Literal":
            return (self._literal(args),)
        if head in LISTS:
            fixed = head in ("tuple", "Tuple") and not (
                len(args) == 2 and isinstance(args[1], ast.Constant) and args[1].value is ...)
            return ("list" if fixed else f"list[{self.of(args[0], names, depth + 1)}]",)
        if head in DICTS and len(args) == 2:
            if self.of(args[0], names, depth + 1) == "str":
                return (f"dict[str, {self.of(args[1], names, depth + 1)}]",)
            return ("dict",)  # JSON object keys are strings
        return (self.any(f"annotation {_short(node)}"),)

    def _literal(self, args: list[ast.expr]) -> str:
        values = []
        for arg in args:
            try:
                value = ast.literal_eval(arg)
            except UNPARSABLE:
                value = ...
            if value is ... or isinstance(value, (list, tuple, dict)) or not json_value(value):
                return self.any(f"Literal member {_short(arg)}")
            values.append(value)
        if not values:
            return self.any("an empty Literal")
        self.typing.add("Literal")
        return f"Literal[{', '.join(map(repr, values))}]"

    def _class(self, cls: ast.ClassDef, names: Names, depth: int) -> str:
        if id(cls) in self._classes:
            return self._classes[id(cls)]
        if id(cls) in self._within:
            self.note(f"model {cls.name} holds itself: that field is annotated dict")
            return "dict"
        self._within.append(id(cls))
        try:
            if {last_name(b) for b in cls.bases} & set(ENUMS):
                hint = self._enum(cls)
            else:
                hint = self._model(cls, names, depth)
        finally:
            self._within.pop()
        self._classes[id(cls)] = hint
        return hint

    def _enum(self, cls: ast.ClassDef) -> str:
        members = [s.value for s in cls.body if isinstance(s, ast.Assign)]
        if not members:
            return self.any(f"enum {cls.name} without members")
        return self._literal(members)

    def _model(self, cls: ast.ClassDef, names: Names, depth: int) -> str:
        fields = model_fields(cls, names, set())
        # a TypedDict field is a Python name, and one starting __ would be name-mangled
        if not fields or not all(python_name(f) and not f.startswith("__") for f in fields):
            self.note(f"model {cls.name}: no fields a TypedDict can hold: annotated dict")
            return "dict"
        body, described = [], []
        for name, (annotation, optional, description) in fields.items():
            hint = self.of(annotation, names, depth + 1)
            body.append(f"    {name}: NotRequired[{hint}]" if optional else f"    {name}: {hint}")
            if description:
                described.append(f"        {name}: {docstring_text(description)}")
        if described:  # tool_schema reads `Attributes:` as the fields' descriptions
            body = [f'    """tau2\'s {cls.name}.', "", "    Attributes:", *described, '    """', "",
                    *body]
        return self.records.add(cls.name, body)


def model_fields(cls: ast.ClassDef, names: Names, seen: set[int]) -> dict[str, tuple]:
    """name -> (annotation, has a default, description) of a model's fields, its bases' first."""
    seen.add(id(cls))
    fields: dict[str, tuple] = {}
    for base in cls.bases:
        found = names.get(base.id) if isinstance(base, ast.Name) else None
        if found and isinstance(found[0], ast.ClassDef) and id(found[0]) not in seen:
            fields.update(model_fields(found[0], found[1], seen))
    for stmt in cls.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        name = stmt.target.id
        if name.startswith("_") or name == "model_config" or "ClassVar" in _short(stmt.annotation):
            continue  # private attributes and settings are no fields
        fields[name] = (stmt.annotation, _has_default(stmt.value), _description(stmt.value))
    return fields


def _has_default(value: ast.expr | None) -> bool:
    if value is None:
        return False
    if isinstance(value, ast.Call) and last_name(value.func) == "Field":
        if value.args:
            return not (isinstance(value.args[0], ast.Constant) and value.args[0].value is ...)
        return any(k.arg in ("default", "default_factory") for k in value.keywords)
    return True


def _description(value: ast.expr | None) -> str:
    """A `Field(description="...")`'s text on one line (at most 300 characters)."""
    if isinstance(value, ast.Call) and last_name(value.func) == "Field":
        for k in value.keywords:
            if k.arg == "description" and isinstance(k.value, ast.Constant) \
                    and isinstance(k.value.value, str):
                text = " ".join(k.value.value.split())
                return text if len(text) <= 300 else text[:297] + "..."
    return ""
