"""Domain tools: typed Python functions whose signature and docstring are the tool's JSON schema.

    @tool(writes=True)
    def cancel_order(db: Db, order_id: str, reason: Literal["no_longer_needed", "mistake"]) -> dict:
        '''Cancel a pending order.

        Args:
            order_id: The order id, such as "W1042".
            reason: Why the customer cancels.
        '''

The first parameter is the episode's database handle (`Db`); the others are the tool's arguments.
Nested arguments are TypedDicts or dataclasses (core.tool_schema turns hints into JSON Schema and
builds the dataclass instances); `@tool(schema={...})` gives a raw schema instead. Arguments are
validated against the full schema before the call. A tool raises ToolError for anything the agent
should be told ("order W1 is already shipped").

What the built-in domains share lives here too: `db.get` (a row by id, or the one "not found"
error), `db.today`, `customer_finder` and `employee_finder` (their find tools), `escalator`, the argument
checks `positive_cents`, `rounded_within` and `iso_date` (each checks the value stored: after
rounding, within sane bounds), and, for seed.py, `insert_rows`.
"""

from __future__ import annotations

import inspect
import math
import sqlite3
import typing
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING, Any

from endstate.core.env.tool_schema import (
    check_parameters_schema,
    docstring_parts,
    fast_accept,
    holds_dataclass,
    json_schema_of,
    to_python,
    with_default,
)

if TYPE_CHECKING:  # jsonschema is imported when a tool is made: ~65 ms of every CLI start
    from jsonschema import Draft202012Validator


class ToolError(Exception):
    """Raised by a tool to tell the agent why its call did not work."""


class Db:
    """The only handle a tool gets: parameterized SQL on its own episode's database."""

    def __init__(self, conn: sqlite3.Connection, now: str):
        self._conn = conn
        self.now = now  # the domain's fixed clock, so replays are deterministic

    @property
    def today(self) -> str:
        """The clock's date, YYYY-MM-DD."""
        return self.now[:10]

    def all(self, sql: str, *params: Any) -> list[dict[str, Any]]:
        cur = self._conn.execute(sql, params)
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, row)) for row in cur]

    def one(self, sql: str, *params: Any) -> dict[str, Any] | None:
        cur = self._conn.execute(sql, params)
        row = cur.fetchone()
        return None if row is None else dict(zip([d[0] for d in cur.description], row))

    def value(self, sql: str, *params: Any) -> Any:
        row = self._conn.execute(sql, params).fetchone()
        return None if row is None else row[0]

    def get(self, table: str, key: Any, what: str) -> dict[str, Any]:
        """The row of `table` whose `id` is `key`. A missing row raises ToolError "{what} {key} not
        found" (`what`: "order", "carrier exception"), the same wording in every domain."""
        row = self.one(f'SELECT * FROM "{table}" WHERE id = ?', key)
        if row is None:
            raise ToolError(f"{what} {key} not found")
        return row

    def run(self, sql: str, *params: Any) -> int:
        """Execute a write; returns the number of rows changed."""
        return self._conn.execute(sql, params).rowcount

    def next_id(self, table: str, prefix: str, width: int) -> str:
        """The next sequential id of `table` (`RT00042` for prefix RT, width 5), so replays of the
        same calls produce the same rows. Ids have a fixed width, so the largest in text order (a
        primary-key index lookup) has the largest number. A range, not `LIKE ?`: SQLite compiles
        a statement with a bound LIKE pattern again at every call (9 µs against 1.5)."""
        if prefix:
            after = prefix[:-1] + chr(ord(prefix[-1]) + 1)  # every id with the prefix sorts below it
            last = self.value(f'SELECT id FROM "{table}" WHERE id >= ? AND id < ? '
                              "ORDER BY id DESC LIMIT 1", prefix, after)
        else:
            last = self.value(f'SELECT id FROM "{table}" ORDER BY id DESC LIMIT 1')
        return f"{prefix}{int(last[len(prefix):]) + 1 if last else 1:0{width}d}"


@dataclass
class Tool:
    name: str
    fn: Callable[..., Any]
    writes: bool
    schema: dict[str, Any]  # OpenAI function-tool spec: {"type": "function", "function": {...}}
    _validator: Draft202012Validator
    _typed: dict[str, Any] = field(default_factory=dict)  # parameter -> hint holding a dataclass
    # plain-Python fast path of _validator where the schema allows one (tool_schema.fast_accept):
    # jsonschema took half of a tool call's time in the sandbox
    _accept: Callable[[Any], bool] | None = None

    def __post_init__(self):
        self._accept = fast_accept(self.parameters)

    @property
    def parameters(self) -> dict[str, Any]:
        return self.schema["function"]["parameters"]

    def argument_problem(self, args: Any) -> str | None:
        if (self._accept is not None and self._accept(args)) or self._validator.is_valid(args):
            return None
        from jsonschema.exceptions import best_match

        error = best_match(self._validator.iter_errors(args))
        where = ".".join(str(p) for p in error.absolute_path)
        return f"{where + ': ' if where else ''}{error.message}"

    def invoke(self, db: Db, args: dict[str, Any]) -> Any:
        """Call the tool with arguments `argument_problem` passed: a dataclass parameter receives
        an instance (a list of them, a list of instances), everything else the JSON as read."""
        return self.fn(db, **{k: to_python(v, self._typed[k]) if k in self._typed else v
                              for k, v in args.items()})


def make_tool(fn: Callable[..., Any], writes: bool, schema: dict[str, Any] | None = None) -> Tool:
    """The Tool of a function: its parameters schema from the type hints and the docstring's
    `Args:`, or `schema` as given (a raw JSON Schema for the arguments object)."""
    description, arg_docs = docstring_parts(fn.__doc__)
    if not description:
        raise TypeError(f"tool {fn.__name__} needs a docstring: it is the agent's description")
    params = list(inspect.signature(fn).parameters.values())[1:]  # first is the Db handle
    if schema is not None:
        check_parameters_schema(fn.__name__, schema, params)
        parameters, typed = schema, {}
    else:
        parameters, typed = _parameters_from_hints(fn, params, arg_docs)
    spec = {"type": "function",
            "function": {"name": fn.__name__, "description": description, "parameters": parameters}}
    from jsonschema import Draft202012Validator

    return Tool(fn.__name__, fn, writes, spec, Draft202012Validator(parameters), typed)


def _parameters_from_hints(fn: Callable[..., Any], params: list[inspect.Parameter],
                           arg_docs: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(parameters schema, {parameter: hint} of those that arrive as dataclasses)."""
    hints = typing.get_type_hints(fn)
    properties, required = {}, []
    for p in params:
        if p.name not in hints:
            raise TypeError(f"tool {fn.__name__}: argument {p.name!r} needs a type hint")
        try:
            prop = json_schema_of(hints[p.name])
        except TypeError as e:
            raise TypeError(f"tool {fn.__name__}: argument {p.name!r}: {e}") from None
        if p.name in arg_docs:
            prop["description"] = arg_docs[p.name]
        if p.default is inspect.Parameter.empty:
            required.append(p.name)
        properties[p.name] = with_default(prop, p.default)
    parameters = {"type": "object", "properties": properties, "required": required,
                  "additionalProperties": False}
    return parameters, {p.name: hints[p.name] for p in params if holds_dataclass(hints[p.name])}


def tool(fn: Callable[..., Any] | None = None, *, writes: bool = False,
         schema: dict[str, Any] | None = None):
    """Mark a domain function as a tool; `writes=True` for tools that change the database.
    `schema=` replaces the schema read from the type hints with a raw JSON Schema (Draft 2020-12)
    of the arguments object; its arguments then reach the function as JSON (dicts and lists)."""

    def mark(f: Callable[..., Any]) -> Callable[..., Any]:
        f.__endstate_tool__ = make_tool(f, writes, schema)
        return f

    return mark(fn) if fn is not None else mark


def insert_rows(conn: sqlite3.Connection, **rows: Iterable[Sequence[Any]]) -> None:
    """Seed helper: `insert_rows(db, orders=orders, refunds=refunds)` inserts each table's rows, in
    the order given, as whole rows (one value per column, as `INSERT INTO t VALUES (?, ...)`)."""
    for table, values in rows.items():
        width = len(conn.execute(f'SELECT * FROM "{table}" LIMIT 0').description)
        conn.executemany(f'INSERT INTO "{table}" VALUES ({", ".join("?" * width)})', values)


def customer_finder(example_name: str) -> Callable[..., dict]:
    """The find_customer tool of a domain whose `customers` table has email, name and zip columns;
    its description shows `example_name` as the sample full name. Shared so that every domain
    identifies customers by the same rules and with the same error messages."""

    def find_customer(db: Db, email: str | None = None, name: str | None = None,
                      zip: str | None = None) -> dict:
        """Find a customer's id by email, or by full name and zip code.

        Args:
            email: The customer's email address.
            name: The customer's full name, e.g. "{example_name}" (use together with zip).
            zip: The customer's 5-digit zip code (use together with name).
        """
        if email:
            found = db.all("SELECT id FROM customers WHERE email = ?", email.strip().lower())
        elif name and zip:
            found = db.all("SELECT id FROM customers WHERE name = ? AND zip = ?", name.strip(),
                           zip.strip())
        else:
            raise ToolError("give an email, or a name together with a zip code")
        if not found:
            raise ToolError("no customer matches")
        if len(found) > 1:
            raise ToolError(f"{len(found)} customers match; ask for the email address")
        return {"customer_id": found[0]["id"]}

    find_customer.__doc__ = find_customer.__doc__.format(example_name=example_name)
    return tool(find_customer)


def employee_finder(example_domain: str) -> Callable[..., dict]:
    """The find_employee tool of a domain whose `employees` table has email and name columns; its
    description shows Ada Fischer at `example_domain` as the sample."""

    def find_employee(db: Db, email: str | None = None, name: str | None = None) -> dict:
        """Find an employee's id by work email, or by full name when it is unique.

        Args:
            email: The work email, e.g. "ada.fischer@{example_domain}".
            name: The full name, e.g. "Ada Fischer".
        """
        if email:
            found = db.all("SELECT id FROM employees WHERE email = ?", email.strip().lower())
        elif name:
            found = db.all("SELECT id FROM employees WHERE name = ?", name.strip())
        else:
            raise ToolError("give an email or a full name")
        if not found:
            raise ToolError("no employee matches")
        if len(found) > 1:
            raise ToolError(f"{len(found)} employees are called {name.strip()}; ask for the work "
                            "email")
        return {"employee_id": found[0]["id"]}

    find_employee.__doc__ = find_employee.__doc__.format(example_domain=example_domain)
    return tool(find_employee)


def escalator(references: str) -> Callable[..., dict]:
    """The escalate tool of a domain whose `escalations` table is (id, customer_id, reference,
    summary, created_at); its description names `references` ("the policy, vehicle, driver or
    claim") as what a reference may be."""

    def escalate(db: Db, summary: str, customer_id: str | None = None,
                 reference: str | None = None) -> dict:
        """Hand the case to a human specialist, with a summary of what the customer needs and why.

        Args:
            summary: What the customer asked for and why you cannot do it.
            customer_id: The customer id, if known.
            reference: The {references} id concerned, if any.
        """
        escalation_id = db.next_id("escalations", "E", 5)
        db.run("INSERT INTO escalations VALUES (?, ?, ?, ?, ?)", escalation_id, customer_id,
               reference, summary, db.now)
        return {"escalation_id": escalation_id,
                "message": "A specialist will follow up within one business day."}

    escalate.__doc__ = escalate.__doc__.format(references=references)
    return tool(writes=True)(escalate)


def positive_cents(amount: float, what: str = "amount") -> float:
    """A money argument rounded to the cent, refused unless what is stored is positive: the check
    is on the rounded value (0.004 or 5e-324 round to 0.0) and NaN or infinity are no amount."""
    return rounded_within(amount, 0.01, math.inf, what, "must be positive")


def rounded_within(value: float, low: float, high: float, what: str, said: str = "",
                   places: int = 2) -> float:
    """A number argument rounded to `places` decimals, refused naming `what` unless the rounded
    value (what is stored) is finite and within [low, high]; `said`: the error's words, else
    "must be between LOW and HIGH"."""
    stored = round(value, places) if math.isfinite(value) else value
    if not (math.isfinite(stored) and low <= stored <= high):
        rounded = f" ({value!r} rounds to {stored!r})" if stored != value and math.isfinite(value) else ""
        raise ToolError(f"{what} {said or f'must be between {low:g} and {high:g}'}{rounded}")
    return stored


EARLIEST, LATEST = date(1900, 1, 1), date(2199, 12, 31)  # past these, a date is a typo or a probe


def iso_date(text: str, what: str, earliest: date | str = EARLIEST, latest: date | str = LATEST) -> str:
    """A date argument as YYYY-MM-DD, within [earliest, latest] (dates or YYYY-MM-DD text);
    anything else is refused naming the argument `what`."""
    try:
        day = date.fromisoformat(text.strip())
    except ValueError:
        raise ToolError(f"{what} {text!r} is not a date; use YYYY-MM-DD") from None
    low, high = (d if isinstance(d, date) else date.fromisoformat(d) for d in (earliest, latest))
    if day < low:
        raise ToolError(f"{what} {day} is before {low}")
    if day > high:
        raise ToolError(f"{what} {day} is after {high}")
    return day.isoformat()
