"""tools.py of `grade import tau2`: without --tools-from, a stub per tool the gold calls use
(tau2_stubs.tools_source); with it, a stub per tool the tau2 toolkit declares, under tau2's name,
with its parameters (annotations as endstate hints, tau2_hints.py; defaults kept when they are
JSON), its docstring and the read/write mark of its decorator. A gold call's tool the toolkit does
not declare keeps the stub inferred from its arguments. Every stub fails with "not written yet".
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from endstate.core.errors import InputError
from endstate.grade.authoring.tau2_hints import UNPARSABLE, Hints, json_value, last_name, union
from endstate.grade.authoring.tau2_stubs import (
    Records,
    assemble,
    docstring_text,
    handle_name,
    inferred_stub,
    not_written,
    tool_name_problem,
    tools_source,
)
from endstate.grade.authoring.tau2_toolkit import DeclaredTool, Names, Toolkit

MAX_DOC = 20_000  # characters of a docstring kept: the agent reads the description every turn


@dataclass
class GeneratedTools:
    """tools.py and what the import report says about it."""

    source: str
    inferred: list[str]  # tools whose stubs come from the gold arguments
    toolkit: Toolkit | None = None
    declared: list[DeclaredTool] = field(default_factory=list)  # stubbed from the toolkit
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (tool, why)
    notes: list[str] = field(default_factory=list)

    def report(self, path: Path) -> list[str]:
        if self.toolkit is None:
            return [f"tools are code, so they are not translated: {path} has a typed stub for "
                    f"each of the {len(self.inferred)} tools the gold calls use, failing with "
                    "'not written yet'; --tools-from TAU2_DOMAIN_SRC/tools.py gives a stub for "
                    "every tool tau2 declares, with its signature, docstring and read/write mark"]
        kit = self.toolkit
        writes = sum(t.writes for t in self.declared)
        lines = [f"tools are code, so they are not translated: {path} has a stub for each of the "
                 f"{len(self.declared)} tools {kit.cls} declares in {kit.path} ({writes} marked "
                 "writing), with tau2's signature, docstring and mark, failing with "
                 "'not written yet'"]
        if kit.discoverable:
            n = len(kit.discoverable)
            lines.append(f"  not stubbed: {n} @is_discoverable_tool method{'s' * (n != 1)} "
                         f"({', '.join(kit.discoverable[:3])}{', ...' * (len(kit.discoverable) > 3)}"
                         "): tau2 offers them only through the tool that calls them by name")
        lines += [f"  not stubbed: {name}: {why}" for name, why in self.skipped]
        if self.inferred:
            lines.append(f"  gold calls use tools {kit.cls} does not declare, stubbed from their "
                         f"arguments as without --tools-from: {', '.join(self.inferred)}")
        return lines + [f"  check: {note}" for note in [*kit.notes, *self.notes]]


def generated_tools(domain: str, calls: dict[str, list[dict[str, Any]]],
                    toolkit: Toolkit | None) -> GeneratedTools:
    if toolkit is None:
        return GeneratedTools(tools_source(domain, calls), list(calls))
    for name in calls:
        why = tool_name_problem(name)
        if why:
            raise InputError(f"tool name {name!r} {why}; rename the tool in tasks.json")
    records = Records(reserved=(*toolkit.by_name, *calls))
    hints = Hints(records, str(toolkit.path))
    out = GeneratedTools("", [], toolkit)
    stubs = []
    for tool in toolkit.tools:
        why = tool_name_problem(tool.name)
        stub = None if why else declared_stub(tool, toolkit.names, hints)
        if stub is None:
            out.skipped.append((tool.name, why or "takes *args or **kwargs, which no JSON "
                                "schema lists: write it by hand"))
            continue
        stubs.append(stub)
        out.declared.append(tool)
        accepted = {a.arg for a in _parameters(tool.node)[0]}
        extra = sorted({k for args in calls.get(tool.name, []) for k in args} - accepted)
        if extra:
            out.notes.append(f"{tool.name}: gold calls pass {', '.join(extra)}, which tau2's "
                             "signature does not take")
    declared = {t.name for t in out.declared}
    out.inferred = [name for name in calls if name not in declared]
    stubs += [inferred_stub(name, calls[name], records) for name in out.inferred]
    how = (f"Names, signatures, docstrings and read/write marks are those of tau2's {toolkit.cls}"
           + (" (stubs of tools it lacks are inferred from the gold calls)." if out.inferred
              else "."))
    out.source = assemble(domain, records, stubs, how, hints.typing)
    out.notes = hints.notes + out.notes
    return out


def _parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[list[ast.arg], list]:
    """(parameters after self, their defaults: None where there is none)."""
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    params = list(zip(positional, defaults)) + list(zip(a.kwonlyargs, a.kw_defaults))
    if params and "staticmethod" not in map(last_name, fn.decorator_list):
        params = params[1:]
    return [p for p, _ in params], [d for _, d in params]


def declared_stub(tool: DeclaredTool, names: Names, hints: Hints) -> str | None:
    """The stub of one declared tool; None when its parameters have no schema (*args)."""
    fn = tool.node
    if fn.args.vararg or fn.args.kwarg:
        return None
    params, defaults = _parameters(fn)
    rendered = []
    for param, default in zip(params, defaults):
        hints.where = f"{tool.name}: argument {param.arg}"
        members = hints.members(param.annotation, names)
        if default is not None:
            value = _default(default, hints)
            members = union(members, ("None",)) if value is None else members
        hint = " | ".join(members) + (f" = {value!r}" if default is not None else "")
        rendered.append((param.arg, hint, default is not None))
    rendered.sort(key=lambda p: p[2])  # Python wants defaults last; agents pass by name
    handle = handle_name({p for p, _, _ in rendered})
    args = "".join(f", {p}: {h}" for p, h, _ in rendered)
    mark = ("@tool(writes=True)" if tool.writes else "@tool") + f"  # tau2: ToolType.{tool.kind}"
    if tool.writes and tool.kind != "WRITE":
        mark += ", mutates_state=True"
    aliases, body = not_written(tool.name, {p for p, _, _ in rendered} | {handle})
    return "\n".join([*aliases, mark, f"def {tool.name}({handle}: Db{args}) -> {_returns(fn.returns)}:",
                      *_docstring(fn, hints), body])


def _default(node: ast.expr, hints: Hints) -> Any:
    """A default's value when it is JSON (a tuple as a list); else None, noted."""
    try:
        value = ast.literal_eval(node)
    except UNPARSABLE:
        value = ...
    if value is ... or not json_value(value):
        hints.note("its default is no JSON value: the stub's default is None")
        return None
    return list(value) if isinstance(value, tuple) else value


def _returns(node: ast.expr | None) -> str:
    head = last_name(node.value if isinstance(node, ast.Subscript) else node)
    if head in ("str", "int", "float", "bool"):
        return head
    return "list" if head in ("list", "List", "Sequence", "tuple", "Tuple") else "dict"


def _docstring(fn: ast.FunctionDef | ast.AsyncFunctionDef, hints: Hints) -> list[str]:
    """tau2's docstring as lines of the stub, made safe by docstring_text; a placeholder when
    there is none (endstate needs a description)."""
    hints.where = fn.name
    text = ast.get_docstring(fn, clean=True) or ""
    if not text.strip():
        hints.note("no docstring: the agent's description is a placeholder; write one")
        text = f"Not written yet: what {fn.name} does, as the agent should read it."
    if len(text) > MAX_DOC:
        hints.note(f"docstring of {len(text):,} characters cut to {MAX_DOC:,}")
        text = text[:MAX_DOC] + " ..."
    lines = [docstring_text(line) for line in text.split("\n")]  # other breaks stay escapes
    if len(lines) == 1:
        return [f'    """{lines[0]}"""']
    return [f'    """{lines[0]}', *(f"    {line}" if line else "" for line in lines[1:]), '    """']
