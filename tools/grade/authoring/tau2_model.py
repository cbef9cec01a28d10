"""`grade import tau2 --data-model FILE`: a tau2 data_model.py read as text (Python's ast; the file is
never imported or run), giving the shape of a document that holds every field the model declares.
The import infers its tables from the data and this shape together, so a field no record holds yet
(a cancel reason, an exchange's items) still gets a typed column for the tools to write.

What is read, as --tools-from reads it (tau2_toolkit.module_names, tau2_hints.model_fields): pydantic
classes and their fields (bases included; private attributes, model_config and ClassVars are no
fields), `class X(str, Enum)` enums, `Name = Literal[...]` aliases, the same from a module beside
the file that it imports from, and the one class based on tau2's `DB`: the document. Annotations: str, int, float, bool, dates and times (ISO text),
Optional / Union / `X | None`, Literal, Annotated, List / Set / Tuple / Sequence, Dict, Any, and
the file's own models; anything else is a field of unknown shape, which constrains nothing.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from endstate.core.errors import FileError, InputError
from endstate.core.records.files import read_bounded
from endstate.grade.authoring.nested_tables import SHAPE_KEY
from endstate.grade.authoring.tau2_hints import (
    DICTS,
    ENUMS,
    LISTS,
    UNPARSABLE,
    last_name,
    model_fields,
)
from endstate.grade.authoring.tau2_toolkit import MAX_BYTES, Names, module_names

SAMPLE = "__endstate_model__"  # every text value of the shape
_SCALARS = {"str": SAMPLE, "int": 0, "float": 0.0, "bool": False, "datetime": SAMPLE,
            "date": SAMPLE, "time": SAMPLE, "timedelta": SAMPLE, "Decimal": 0.0, "UUID": SAMPLE,
            "EmailStr": SAMPLE, "AnyUrl": SAMPLE, "HttpUrl": SAMPLE}
_OPTIONAL = {"Optional", "Union", "Annotated"}
UNKNOWN = object()  # a field whose shape the file does not say: left out of the shape


@dataclass
class DataModel:
    path: Path
    db_class: str
    shape: dict[str, Any]  # a document with every declared field
    fields: list[str]  # each declared field's path in the document, `/`-joined, `*` per entry


def read_data_model(path: Path) -> DataModel:
    try:
        tree = ast.parse(read_bounded(path, MAX_BYTES), filename=str(path))
    except OSError as e:  # a FIFO or a device too, and a file past MAX_BYTES read
        raise FileError(f"{path}: cannot read ({e.strerror}; --data-model: tau2's "
                        "data_model.py)") from None
    except UNPARSABLE as e:
        raise InputError(f"{path}: not Python that can be read ({type(e).__name__}: {e}); "
                         "--data-model reads the tau2 domain's data_model.py as text") from None
    names = module_names(path, tree, {path: {}}, [])  # models imported from beside it too
    roots = [n for n in tree.body if isinstance(n, ast.ClassDef)
             and any(last_name(b) == "DB" for b in n.bases)]
    if len(roots) != 1:
        found = f"{len(roots)}: {', '.join(n.name for n in roots)}" if roots else "none"
        raise InputError(f"{path}: expected one class based on tau2's DB (the database), found "
                         f"{found}")
    fields: list[str] = []
    try:
        shape = _Reader().model(roots[0], names, "", fields, ())
    except RecursionError:
        raise InputError(f"{path}: annotations nested too deep to read") from None
    return DataModel(path, roots[0].name, shape, list(dict.fromkeys(fields)))


class _Reader:
    """Shapes of annotations; a name is looked up in the `names` of the module that uses it
    (tau2_toolkit.module_names), a model's fields read as tau2_hints.model_fields reads them."""

    def model(self, cls: ast.ClassDef, names: Names, at: str, fields: list[str],
              seen: tuple[int, ...]) -> Any:
        """The shape of model `cls`: each field, its own fields included (a model that holds
        itself, directly or not, stops there: its shape is unknown below)."""
        if id(cls) in seen:
            return UNKNOWN
        out: dict[str, Any] = {}
        for field, (annotation, _, _) in model_fields(cls, names, set()).items():
            fields.append(f"{at}/{field}")
            value = self.shape(annotation, names, f"{at}/{field}", fields, (*seen, id(cls)))
            if value is not UNKNOWN:
                out[field] = value
        return out

    def shape(self, node: ast.expr, names: Names, at: str, fields: list[str],
              seen: tuple[int, ...]) -> Any:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):  # "Model": a forward ref
            try:
                node = ast.parse(node.value, mode="eval").body
            except UNPARSABLE:  # a NUL in it: ValueError before Python 3.11.4
                return UNKNOWN
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # X | None
            return self._union([node.left, node.right], names, at, fields, seen)
        if isinstance(node, ast.Subscript):
            return self._generic(_name(node.value), _arguments(node.slice), names, at, fields,
                                 seen)
        name = _name(node)
        if name in _SCALARS:
            return _SCALARS[name]
        definition, where = names.get(name, (None, names))
        if isinstance(definition, ast.ClassDef):
            if {last_name(b) for b in definition.bases} & set(ENUMS):
                values = [s.value.value for s in definition.body if isinstance(s, ast.Assign)
                          and isinstance(s.value, ast.Constant)]
                return values[0] if values else SAMPLE
            return self.model(definition, where, at, fields, seen)
        if isinstance(definition, ast.expr) and id(definition) not in seen:  # an alias
            return self.shape(definition, where, at, fields, (*seen, id(definition)))
        if name in LISTS:
            return []
        if name in DICTS:
            return {}
        return UNKNOWN

    def _generic(self, name: str, args: list[ast.expr], names: Names, at: str, fields: list[str],
                 seen: tuple[int, ...]) -> Any:
        if name in _OPTIONAL:
            return self._union(args[:1] if name == "Annotated" else args, names, at, fields, seen)
        if name == "Literal":
            first = args[0] if args else None
            return first.value if isinstance(first, ast.Constant) else UNKNOWN
        if name in LISTS:
            item = self.shape(args[0], names, f"{at}/*", fields, seen) if args else UNKNOWN
            return [item] if _says_something(item) else []
        if name in DICTS:
            item = self.shape(args[-1], names, f"{at}/*", fields, seen) if args else UNKNOWN
            return {SHAPE_KEY: item} if _says_something(item) else {}
        return UNKNOWN

    def _union(self, options: list[ast.expr], names: Names, at: str, fields: list[str],
               seen: tuple[int, ...]) -> Any:
        """Optional[X] and X | None: X's shape. A union of models (a payment method that is a
        card or a gift card, a flight date that is available or landed): every member's fields,
        so each variant's get a column. A union of other types says nothing."""
        known = [o for o in options if not (isinstance(o, ast.Constant) and o.value is None)
                 and _name(o) != "None"]
        shapes = [self.shape(o, names, at, fields, seen) for o in known]
        if len(shapes) == 1:
            return shapes[0]
        if not shapes or not all(isinstance(x, dict) for x in shapes):
            return UNKNOWN
        merged: dict[str, Any] = {}
        for x in shapes:
            for key, value in x.items():
                merged.setdefault(key, value)
        return merged


def _says_something(item: Any) -> bool:
    """An item worth putting in a container's shape: one of no known field would only mark every
    field of the real items as sometimes absent."""
    return item is not UNKNOWN and item is not None and item != {}


def _name(node: ast.expr) -> str:
    """`List`, `typing.List`, `datetime.date` and `List[int]` by their last name."""
    return last_name(node.value if isinstance(node, ast.Subscript) else node) or ""


def _arguments(node: ast.expr) -> list[ast.expr]:
    return list(node.elts) if isinstance(node, ast.Tuple) else [node]


def unseen_fields(model: DataModel, document: dict[str, Any]) -> list[str]:
    """The declared fields no record of `document` holds (what gets no column without the model)."""
    return [f for f in model.fields if not _held(document, f.strip("/").split("/"))]


def _held(value: Any, steps: list[str]) -> bool:
    if not steps:
        return True
    head, rest = steps[0], steps[1:]
    if head == "*":
        items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
        return any(_held(v, rest) for v in items)
    return isinstance(value, dict) and head in value and _held(value[head], rest)


def model_warnings(source_folder: Path, document: dict[str, Any], model: DataModel | None) -> list[str]:
    """Without --data-model, which declared fields get no column (reading the data_model.py found
    beside the data, if any); with it, what it added."""
    if model is not None:
        added = unseen_fields(model, document)
        return [f"{model.path}: {len(added)} field(s) the data model declares and no record holds "
                f"got a column: {_listed(added)}"] if added else []
    found = next((f for f in (source_folder / "data_model.py", source_folder / "src" /
                              "data_model.py") if f.is_file()), None)
    if found is None:
        return ["no --data-model: a field the domain declares but no record holds gets no column "
                "(a tool cannot store it, and the DB check cannot see it); pass --data-model "
                "PATH/data_model.py"]
    try:
        unseen = unseen_fields(read_data_model(found), document)
    except (InputError, FileError) as e:
        return [f"{found}: not read ({e.message}); pass --data-model to use a data model"]
    if not unseen:
        return []
    return [f"{found} declares {len(unseen)} field(s) no record holds, which got no column: "
            f"{_listed(unseen)}; pass --data-model {found} to give them columns"]


def _listed(fields: list[str], most: int = 12) -> str:
    more = f" and {len(fields) - most} more" if len(fields) > most else ""
    return ", ".join(fields[:most]) + more
