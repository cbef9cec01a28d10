"""`grade import tau2 --tools-from PATH[:CLASS]`: the tools a tau2 toolkit declares, read from its
tools.py as a syntax tree. The file is never imported or run (it is code from elsewhere, and
imports tau2): a tool is a method of the toolkit class decorated `@is_tool(ToolType.KIND)`, whose
name, parameters, annotations, defaults and docstring tau2_declared.py turns into a stub. Type
names the file imports from a module beside it (`from tau2.domains.x.data_model import Task`
finds data_model.py in the same folder) are read the same way, so a pydantic model can become a
TypedDict and a Literal alias stays a Literal.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from endstate.core.errors import FileError, InputError
from endstate.core.records.files import TooLarge, read_bounded

MAX_BYTES = 10_000_000  # tau2's largest tools.py is ~200 kB
KINDS = ("READ", "WRITE", "GENERIC", "THINK")
TOOL_DECORATOR, HIDDEN_DECORATOR = "is_tool", "is_discoverable_tool"

# name -> (its definition: a class, or an alias's value; the names of the module defining it)
Names = dict[str, tuple[ast.AST, dict]]


@dataclass
class DeclaredTool:
    name: str
    node: ast.FunctionDef | ast.AsyncFunctionDef
    kind: str  # READ, WRITE, GENERIC or THINK
    writes: bool  # WRITE, or mutates_state=True


@dataclass
class Toolkit:
    path: Path
    cls: str
    tools: list[DeclaredTool]
    names: Names  # what annotations in the file can name
    discoverable: list[str] = field(default_factory=list)  # @is_discoverable_tool: not offered
    notes: list[str] = field(default_factory=list)  # what the author should check

    @property
    def by_name(self) -> dict[str, DeclaredTool]:
        return {t.name: t for t in self.tools}


def read_toolkit(spec: str) -> Toolkit:
    """The toolkit of `spec`: PATH, or PATH:CLASS when the file declares more than one."""
    path, wanted = _split(spec)
    notes: list[str] = []
    tree = _parse(path, notes, required=True)
    names = module_names(path, tree, {path: {}}, notes)
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    toolkits = {name: _methods(cls, classes, set()) for name, cls in classes.items()}
    toolkits = {name: m for name, m in toolkits.items() if m}
    bases = {b.id for name in toolkits for b in classes[name].bases if isinstance(b, ast.Name)}
    leaves = [name for name in toolkits if name not in bases]  # a base's tools are its subclass's
    if not toolkits:
        raise InputError(f"{path}: no toolkit class: no class has a method decorated "
                         f"@{TOOL_DECORATOR}(ToolType...); --tools-from takes tau2's tools.py of a "
                         "domain (src/tau2/domains/NAME/tools.py)")
    if wanted is None and len(leaves) > 1:
        listed = ", ".join(f"{n} ({sum(not d[2] for _, d in toolkits[n].values())} tools)"
                           for n in leaves)
        raise InputError(f"{path}: declares {len(leaves)} toolkits, {listed}; name the agent's "
                         f"one: --tools-from {path}:{leaves[0]}")
    cls = wanted or leaves[0]
    if cls not in toolkits:
        raise InputError(f"{path}: no toolkit class {cls!r}; it declares "
                         f"{', '.join(toolkits)}")
    kit = Toolkit(path, cls, [], names, notes=notes)
    for node, (kind, writes, hidden) in toolkits[cls].values():
        if hidden:
            kit.discoverable.append(node.name)
            continue
        if kind is None:
            kit.notes.append(f"{node.name}: @{TOOL_DECORATOR} names no ToolType; marked as reading")
        kit.tools.append(DeclaredTool(node.name, node, kind or "READ", writes))
    return kit


def _split(spec: str) -> tuple[Path, str | None]:
    path, _, cls = spec.rpartition(":")
    if path and cls.isidentifier() and not Path(spec).exists():
        return Path(path), cls
    return Path(spec), None


def _parse(path: Path, notes: list[str], required: bool) -> ast.Module | None:
    """The syntax tree of a file (`required`: --tools-from's own, whose problems stop the import);
    a file beside it that cannot be read or parsed is noted and left out."""
    where = ""
    try:
        source = read_bounded(path, MAX_BYTES)  # not stat's size: /dev/zero says 0, a FIFO blocks
        if b"\0" in source:  # Python 3.11.4+ raises SyntaxError for it, 3.11.0-3 ValueError
            raise SyntaxError("source code string cannot contain null bytes")
        return ast.parse(source, str(path))
    except TooLarge:
        what = f"over {MAX_BYTES:,} bytes, is this tau2's tools.py?"
    except OSError as e:
        if required:
            raise FileError(f"{path}: cannot read it ({e.strerror or e}); --tools-from takes "
                            "tau2's tools.py of the domain") from None
        what = f"cannot read it ({e.strerror or e})"
    except SyntaxError as e:  # also what a file that is not UTF-8 raises
        where, what = f":{e.lineno}" if e.lineno else "", f"not Python that parses ({e.msg})"
    except (RecursionError, MemoryError, ValueError) as e:  # nested too deep
        what = f"cannot be parsed ({type(e).__name__}: {e})"
    if required:
        raise InputError(f"{path}{where}: {what}; --tools-from reads the file without running it: "
                         "give the tools.py the domain runs with")
    notes.append(f"{path}{where}: {what}; left out, so the types it defines are annotated dict")
    return None


def module_names(path: Path, tree: ast.Module, seen: dict[Path, Names], notes: list[str]) -> Names:
    """The classes and aliases a module defines, and those it imports from modules beside it."""
    names = seen[path]
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom) and stmt.module:
            beside = path.parent / f"{stmt.module.rpartition('.')[2]}.py"
            if beside not in seen and beside.is_file():
                seen[beside] = {}
                other = _parse(beside, notes, required=False)
                if other is not None:
                    module_names(beside, other, seen, notes)
            imported = seen.get(beside, {})
            names.update({a.asname or a.name: imported[a.name] for a in stmt.names
                          if a.name in imported})
        elif isinstance(stmt, ast.ClassDef):
            names[stmt.name] = (stmt, names)
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                and isinstance(stmt.targets[0], ast.Name):
            names[stmt.targets[0].id] = (stmt.value, names)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value:
            names[stmt.target.id] = (stmt.value, names)
        elif type(stmt).__name__ == "TypeAlias":  # `type X = ...`, Python 3.12
            names[stmt.name.id] = (stmt.value, names)
    return names


def _methods(cls: ast.ClassDef, classes: dict[str, ast.ClassDef], seen: set[str]) -> dict:
    """name -> (method, (kind, writes, discoverable)) of the tools of `cls`, those of its base
    classes in the same file first (a method of the class replaces one of a base)."""
    seen.add(cls.name)
    found: dict[str, tuple] = {}
    for base in cls.bases:
        if isinstance(base, ast.Name) and base.id in classes and base.id not in seen:
            found.update(_methods(classes[base.id], classes, seen))
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            decorator = next(filter(None, map(_tool_decorator, node.decorator_list)), None)
            if decorator:
                found[node.name] = (node, decorator)
            else:
                found.pop(node.name, None)  # overridden by a method that is no tool
    return found


def _tool_decorator(node: ast.expr) -> tuple[str | None, bool, bool] | None:
    """(kind, writes, discoverable) of `@is_tool(ToolType.KIND, ...)` (or is_discoverable_tool);
    None for any other decorator."""
    call = node if isinstance(node, ast.Call) else None
    func = call.func if call else node
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name not in (TOOL_DECORATOR, HIDDEN_DECORATOR):
        return None
    args = [*(call.args[:1] if call else []),
            *(k.value for k in (call.keywords if call else []) if k.arg == "tool_type")]
    kind = next((_last_name(a) for a in args if _last_name(a) in KINDS), None)
    mutates = any(k.arg == "mutates_state" and isinstance(k.value, ast.Constant)
                  and k.value.value is True for k in (call.keywords if call else []))
    return kind, kind == "WRITE" or mutates, name == HIDDEN_DECORATOR


def _last_name(node: ast.expr) -> str | None:
    """`ToolType.WRITE` -> WRITE; `WRITE` -> WRITE; "WRITE" -> WRITE."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.upper()
    return None
