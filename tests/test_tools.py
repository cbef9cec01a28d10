"""Tool schemas come from type hints and docstrings; arguments are validated against them."""

import enum
import sqlite3
from dataclasses import dataclass
from typing import Literal, NotRequired, TypedDict

import pytest
from jsonschema import Draft202012Validator

from endstate.core.agent.interpret import parse
from endstate.core.env.domain import Domains
from endstate.core.env.sandbox import Sandbox
from endstate.core.env.tool_schema import to_python
from endstate.core.env.tools import Db, ToolError, customer_finder, insert_rows, make_tool, tool


def lookup(db: Db, order_id: str, lines: list[int], mode: Literal["fast", "slow"] = "fast",
           note: str | None = None, amount: float = 0.0) -> dict:
    """Look an order up.

    Second paragraph is part of the description.

    Args:
        order_id: The order id,
            continued on the next line.
        lines: Which lines.
        mode: How.
    """


def test_schema_from_hints_and_docstring():
    t = make_tool(lookup, writes=False)
    fn = t.schema["function"]
    assert fn["name"] == "lookup"
    assert fn["description"] == "Look an order up. Second paragraph is part of the description."
    p = fn["parameters"]
    assert p["required"] == ["order_id", "lines"]
    assert p["additionalProperties"] is False
    assert p["properties"]["order_id"] == {"type": "string",
                                          "description": "The order id, continued on the next line."}
    assert p["properties"]["lines"] == {"type": "array", "items": {"type": "integer"},
                                       "description": "Which lines."}
    assert p["properties"]["mode"] == {"type": "string", "enum": ["fast", "slow"], "default": "fast",
                                      "description": "How."}
    assert p["properties"]["note"] == {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}
    assert p["properties"]["amount"] == {"type": "number", "default": 0.0}


@pytest.mark.parametrize("args, problem", [
    ({"order_id": "W1", "lines": [1]}, None),
    ({"order_id": "W1"}, "'lines' is a required property"),
    ({"order_id": 7, "lines": [1]}, "order_id: 7 is not of type 'string'"),
    ({"order_id": "W1", "lines": ["1"]}, "lines.0: '1' is not of type 'integer'"),
    ({"order_id": "W1", "lines": [1], "mode": "warp"}, "mode: 'warp' is not one of ['fast', 'slow']"),
    ({"order_id": "W1", "lines": [1], "extra": 1}, "Additional properties are not allowed ('extra' was unexpected)"),
    ("not an object", "'not an object' is not of type 'object'"),
])
def test_argument_problems(args, problem):
    assert make_tool(lookup, writes=False).argument_problem(args) == problem


def test_tools_need_docstrings_and_supported_hints():
    def undocumented(db: Db, x: int) -> int:
        return x

    def odd(db: Db, x: complex) -> int:
        """Odd."""

    with pytest.raises(TypeError, match="needs a docstring"):
        make_tool(undocumented, writes=False)
    with pytest.raises(TypeError, match="unsupported tool argument type"):
        make_tool(odd, writes=False)


def test_retail_tools_are_marked(domains):
    tools = domains["retail"].tools
    assert 8 <= len(tools) <= 12
    assert {n for n, t in tools.items() if t.writes} == {
        "cancel_order", "update_shipping_address", "update_customer_email", "request_return",
        "issue_refund", "exchange_item", "transfer_to_human"}


@pytest.fixture
def customers_db():
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE customers (id TEXT PRIMARY KEY, name TEXT, email TEXT, zip TEXT)")
    insert_rows(conn, customers=[("C1", "Ava Chen", "ava@example.com", "10001"),
                                 ("C2", "Ben Kim", "ben@example.com", "10002"),
                                 ("C3", "Ben Kim", "ben.k@example.com", "10002")])
    return Db(conn, "2026-01-15T12:00:00")


def test_get_returns_the_row_or_says_what_is_missing(customers_db):
    assert customers_db.get("customers", "C1", "customer") == {
        "id": "C1", "name": "Ava Chen", "email": "ava@example.com", "zip": "10001"}
    with pytest.raises(ToolError, match="^customer C9 not found$"):
        customers_db.get("customers", "C9", "customer")


def test_next_id_continues_its_prefix_and_compiles_its_statement_once():
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE refunds (id TEXT PRIMARY KEY)")
    insert_rows(conn, refunds=[("RF00007",), ("RF00012",), ("RG00099",), ("R00500",)])
    prepared = []  # SQLite asks the authorizer while it compiles a statement, never when it reuses one
    conn.set_authorizer(lambda *action: prepared.append(action) or sqlite3.SQLITE_OK)
    db = Db(conn, "2026-01-15T12:00:00")
    assert db.next_id("refunds", "RF", 5) == "RF00013"  # not RG00099 above it, nor R00500 beside it
    assert prepared
    prepared.clear()
    conn.execute("INSERT INTO refunds VALUES ('RF00013')")
    prepared.clear()
    assert db.next_id("refunds", "RF", 5) == "RF00014"
    assert prepared == []  # a bound LIKE pattern is compiled again at every call
    assert db.next_id("refunds", "RX", 3) == "RX001"
    conn.execute("CREATE TABLE tickets (id TEXT PRIMARY KEY)")
    insert_rows(conn, tickets=[("0041",), ("0039",)])
    assert db.next_id("tickets", "", 4) == "0042"  # no prefix: after the largest id


@pytest.mark.parametrize("domain, tool, args, field, text", [
    ("retail", "search_products", {}, "query", "Trail Shoes"),
    ("consulting", "find_client", {}, "name", "Brightmoor"),
    ("bank", "list_transactions", {"account_id": "A00001"}, "merchant", "Metro Fuel"),
])
def test_text_searches_match_the_text_itself_in_any_case(domains, domain, tool, args, field, text):
    """A search is a case-insensitive substring match of the text as typed: `%` and `_` in it are
    characters, not LIKE wildcards (which also made SQLite compile the statement at every call)."""
    with Sandbox(domains[domain]) as box:
        def found(term):
            result = box.call(tool, {**args, field: term})
            assert result.ok, result.content
            return result.value

        assert found(text.upper()) and found(text.upper()) == found(text.lower())
        for wildcard in ("%", "_", text[:3] + "%" + text[4:], text[:3] + "_" + text[4:]):
            assert found(wildcard) == [], wildcard


def test_customer_finder_matches_by_email_or_name_and_zip(customers_db):
    find = customer_finder("Greta Moreau")
    spec = find.__endstate_tool__.schema["function"]
    assert spec["name"] == "find_customer"
    assert spec["parameters"]["properties"]["name"]["description"] == (
        'The customer\'s full name, e.g. "Greta Moreau" (use together with zip).')
    assert find(customers_db, email=" AVA@example.com ") == {"customer_id": "C1"}
    assert find(customers_db, name="Ava Chen", zip="10001") == {"customer_id": "C1"}
    for args, error in [({}, "give an email, or a name together with a zip code"),
                        ({"name": "Ava Chen"}, "give an email, or a name together with a zip code"),
                        ({"email": "nobody@example.com"}, "no customer matches"),
                        ({"name": "Ben Kim", "zip": "10002"},
                         "2 customers match; ask for the email address")]:
        with pytest.raises(ToolError) as e:
            find(customers_db, **args)
        assert str(e.value) == error


def test_insert_rows_fills_whole_rows_in_the_order_given():
    conn = sqlite3.connect(":memory:")
    conn.executescript("CREATE TABLE a (x, y, z); CREATE TABLE b (x);")
    insert_rows(conn, a=[(1, 2, 3), (4, 5, 6)], b=[])
    assert conn.execute("SELECT * FROM a ORDER BY rowid").fetchall() == [(1, 2, 3), (4, 5, 6)]
    with pytest.raises(sqlite3.ProgrammingError):  # a row of the wrong width is an error, as before
        insert_rows(conn, b=[(1, 2)])


# -- nested arguments: TypedDict, dataclasses, Literal, Optional, dict[str, X] -----------------------

class Passenger(TypedDict):
    """A traveller on the booking.

    Attributes:
        name: Full name, as on the passport.
        age: Age in years
            on the day of travel.
        seat: Seat preference.
    """

    name: str
    age: int
    seat: NotRequired[Literal["window", "aisle"]]


class Extras(TypedDict, total=False):
    bags: int
    meal: Literal["veg", 2, None]  # mixed types


@dataclass
class Payment:
    """One payment towards the booking.

    Attributes:
        method_id: A payment method id, such as "pm_1".
        amount: In dollars.
    """

    method_id: str
    amount: float
    note: str | None = None


def book(db: Db, passengers: list[Passenger], payments: list[Payment], extras: Extras | None = None,
         fares: dict[str, float] | None = None) -> dict:
    """Book a flight.

    Args:
        passengers: Who flies.
        payments: How it is paid.
    """


PASSENGER = {"type": "object", "properties": {
    "name": {"type": "string", "description": "Full name, as on the passport."},
    "age": {"type": "integer", "description": "Age in years on the day of travel."},
    "seat": {"type": "string", "enum": ["window", "aisle"], "description": "Seat preference."}},
    "required": ["name", "age"], "additionalProperties": False}
PAYMENT = {"type": "object", "properties": {
    "method_id": {"type": "string", "description": 'A payment method id, such as "pm_1".'},
    "amount": {"type": "number", "description": "In dollars."},
    "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}},
    "required": ["method_id", "amount"], "additionalProperties": False}


def test_typed_dicts_and_dataclasses_become_full_object_schemas():
    p = make_tool(book, writes=True).parameters
    assert p["required"] == ["passengers", "payments"]
    assert p["properties"]["passengers"] == {"type": "array", "items": PASSENGER, "description": "Who flies."}
    assert p["properties"]["payments"] == {"type": "array", "items": PAYMENT, "description": "How it is paid."}
    assert p["properties"]["extras"] == {"anyOf": [
        {"type": "object", "properties": {"bags": {"type": "integer"},
                                          "meal": {"type": ["string", "integer", "null"], "enum": ["veg", 2, None]}},
         "required": [], "additionalProperties": False},
        {"type": "null"}], "default": None}
    assert p["properties"]["fares"] == {"anyOf": [
        {"type": "object", "additionalProperties": {"type": "number"}}, {"type": "null"}], "default": None}
    Draft202012Validator.check_schema(p)


GOOD = {"passengers": [{"name": "Ada Li", "age": 34, "seat": "aisle"}, {"name": "Bo Li", "age": 3}],
        "payments": [{"method_id": "pm_1", "amount": 120.5}]}


@pytest.mark.parametrize("change, problem", [
    ({}, None),
    ({"extras": {"meal": 2}, "fares": {"ADT": 99.0}}, None),
    ({"passengers": [{"name": "Ada Li"}]}, "passengers.0: 'age' is a required property"),
    ({"passengers": [{"name": "Ada Li", "age": 34, "seat": "middle"}]},
     "passengers.0.seat: 'middle' is not one of ['window', 'aisle']"),
    ({"payments": [{"method_id": "pm_1", "amount": 1, "tip": 2}]},
     "payments.0: Additional properties are not allowed ('tip' was unexpected)"),
    ({"extras": {"meal": "fish"}}, "extras.meal: 'fish' is not one of ['veg', 2, None]"),
    ({"fares": {"ADT": "cheap"}}, "fares.ADT: 'cheap' is not of type 'number'"),
])
def test_nested_arguments_are_validated_by_the_full_schema(change, problem):
    assert make_tool(book, writes=True).argument_problem({**GOOD, **change}) == problem


class Node(TypedDict):
    child: "Node | None"


def test_unsupported_and_recursive_types_are_named():
    def tree(db: Db, root: Node) -> dict:
        """Walk a tree."""

    def keyed(db: Db, by_id: dict[int, str]) -> dict:
        """Keyed by integers."""

    with pytest.raises(TypeError, match="tool tree: argument 'root': .*Node refers to itself"):
        make_tool(tree, writes=False)
    with pytest.raises(TypeError, match="tool keyed: argument 'by_id': .*JSON object keys are strings"):
        make_tool(keyed, writes=False)

    class Colour(enum.Enum):
        RED = "red"

    def paint(db: Db, colour: Literal[Colour.RED]) -> dict:
        """Paint it."""

    with pytest.raises(TypeError, match="tool paint: argument 'colour': .*Literal values must be str, int"):
        make_tool(paint, writes=False)


def test_to_python_builds_dataclasses_at_any_depth_and_picks_the_union_member_that_fits():
    @dataclass
    class Card:
        card_id: str

    @dataclass
    class Voucher:
        code: str
        value: float = 0.0

    assert to_python([{"code": "V1"}, {"card_id": "C1"}], list[Card | Voucher]) == [Voucher("V1"), Card("C1")]
    assert to_python({"a": [{"card_id": "C1"}]}, dict[str, list[Card]]) == {"a": [Card("C1")]}
    assert to_python(None, Card | None) is None


SHOP_SCHEMA = "CREATE TABLE bookings (id TEXT PRIMARY KEY, passenger TEXT, paid REAL, kind TEXT);\n"
SHOP_TOOLS = '''
from dataclasses import dataclass
from typing import Literal, TypedDict

from endstate.api import Db, ToolError, tool


@dataclass
class Payment:
    method_id: str
    amount: float

    def __post_init__(self):
        if self.amount <= 0:
            raise ToolError(f"payment {self.method_id}: the amount must be positive")


class Passenger(TypedDict):
    name: str
    age: int


@tool(writes=True)
def book(db: Db, passengers: list[Passenger], payments: list[Payment]) -> dict:
    """Book seats for passengers, paid with one or more payments."""
    kind = f"{type(passengers[0]).__name__}/list[{type(payments[0]).__name__}]"
    for i, p in enumerate(passengers):
        db.run("INSERT INTO bookings VALUES (?, ?, ?, ?)", f"B{i}", p["name"],
               sum(pay.amount for pay in payments) / len(passengers), kind)
    return {"booked": len(passengers)}


@tool(writes=True, schema={"type": "object", "properties": {"ids": {
    "type": "array", "items": {"type": "string", "pattern": "^B[0-9]+$"}, "minItems": 1}},
    "required": ["ids"], "additionalProperties": False})
def cancel(db: Db, ids) -> dict:
    """Cancel bookings."""
    return {"cancelled": sum(db.run("DELETE FROM bookings WHERE id = ?", i) for i in ids)}
'''


@pytest.fixture
def airline(tmp_path, monkeypatch):
    monkeypatch.setenv("ENDSTATE_CACHE", str(tmp_path / "cache"))
    d = tmp_path / "domains" / "airline"
    d.mkdir(parents=True)
    (d / "schema.sql").write_text(SHOP_SCHEMA)
    (d / "seed.py").write_text("def build(db, rng):\n    pass\n")
    (d / "tools.py").write_text(SHOP_TOOLS)
    return Domains([str(tmp_path / "domains")])["airline"]


def test_a_dataclass_argument_reaches_the_tool_as_an_instance_through_the_sandbox(airline):
    text = ("<tool_call>\n<function=book>\n<parameter=passengers>\n"
            '[{"name": "Ada Li", "age": "34"}, {"name": "Bo Li", "age": 3}]\n</parameter>\n'
            '<parameter=payments>\n[{"method_id": "pm_1", "amount": "60"}, {"method_id": "pm_2", "amount": 30}]\n'
            "</parameter>\n</function>\n</tool_call>")
    params = {name: t.parameters for name, t in airline.tools.items()}
    [call] = parse(text, params).tool_calls  # nested strings are coerced by the nested schema
    assert call.args()["passengers"][0]["age"] == 34 and call.args()["payments"][0]["amount"] == 60.0
    with Sandbox(airline) as s:
        assert s.call("book", call.args()).content == '{"booked":2}'
        refused = s.call("book", {**call.args(), "payments": [{"method_id": "pm_1", "amount": -1}]})
        assert refused.content == '{"error":"payment pm_1: the amount must be positive"}'
        assert s.call("book", {"passengers": [{"name": "X"}], "payments": call.args()["payments"]}).content == (
            '{"error":"invalid arguments for book: passengers.0: \'age\' is a required property"}')
        assert s.call("cancel", {"ids": ["nope"]}).content == (
            '{"error":"invalid arguments for cancel: ids.0: \'nope\' does not match \'^B[0-9]+$\'"}')
        assert s.call("cancel", {"ids": ["B1"]}).content == '{"cancelled":1}'
        rows = {k: v["row"] for k, v in ((e["key"]["id"], e) for e in s.changes()["bookings"]["inserted"])}
    assert rows == {"B0": {"id": "B0", "passenger": "Ada Li", "paid": 45.0, "kind": "dict/list[Payment]"}}


NESTED_TOOL = '''

class Seat(TypedDict):
    row: int


class Traveller(TypedDict):
    name: str
    seat: Seat


@tool
def seat_of(db: Db, traveller: Traveller) -> dict:
    """A traveller's seat row."""
    return {"row": traveller["seat"]["row"]}
'''


def test_a_tools_py_with_string_annotations_loads_like_a_module(tmp_path, monkeypatch):
    """`from __future__ import annotations` makes every hint a string, which dataclasses and
    typing.get_type_hints resolve through the module's entry in sys.modules."""
    monkeypatch.setenv("ENDSTATE_CACHE", str(tmp_path / "cache"))
    d = tmp_path / "domains" / "airline"
    d.mkdir(parents=True)
    (d / "schema.sql").write_text(SHOP_SCHEMA)
    (d / "seed.py").write_text("def build(db, rng):\n    pass\n")
    (d / "tools.py").write_text("from __future__ import annotations\n" + SHOP_TOOLS + NESTED_TOOL)
    domain = Domains([str(tmp_path / "domains")])["airline"]
    seat = domain.tools["seat_of"].parameters["properties"]["traveller"]["properties"]["seat"]
    assert seat == {"type": "object", "properties": {"row": {"type": "integer"}}, "required": ["row"],
                    "additionalProperties": False}
    with Sandbox(domain) as s:
        assert s.call("seat_of", {"traveller": {"name": "Ada", "seat": {"row": 7}}}).content == '{"row":7}'
        assert s.call("book", {"passengers": [{"name": "Ada", "age": 3}],
                               "payments": [{"method_id": "pm_1", "amount": 5}]}).content == '{"booked":1}'


def test_a_raw_schema_override_is_checked_when_the_tool_is_declared():
    raw = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}$"}},
           "required": ["code"]}

    @tool(schema=raw)
    def airport(db: Db, code) -> dict:
        """Look an airport up."""

    t = airport.__endstate_tool__
    assert t.parameters is raw and t.argument_problem({"code": "sfo"}) == "code: 'sfo' does not match '^[A-Z]{3}$'"
    for schema, error in [
        ({"type": "object", "properties": {"code": {"type": "strnig"}}, "required": ["code"]},
         "tool airport: schema= is not a valid JSON Schema .*'strnig' is not valid"),
        ({"type": "array"}, 'tool airport: schema= describes the arguments object: give it "type": "object"'),
        ({"type": "object", "properties": {"code": {}, "city": {}}, "required": ["code"]},
         r"tool airport: schema= has properties \['city'\] that are not parameters"),
        ({"type": "object", "properties": {"code": {}}},
         r"tool airport: parameters \['code'\] have no default, so schema= must list them"),
    ]:
        with pytest.raises(TypeError, match=error):
            tool(schema=schema)(airport)


def _mutations(args: dict) -> list:
    """Arguments near a valid call: each value swapped for other JSON types, keys dropped and added."""
    out = [None, [], "x", [args]]
    for key, value in args.items():
        for other in (None, True, 0, 1.0, 1.5, "", "ZZZ-no-such", [value], {"v": value}, float("nan")):
            out.append({**args, key: other})
        out.append({k: v for k, v in args.items() if k != key})
    out.append({**args, "unexpected": 1})
    return out


def test_the_fast_argument_check_never_accepts_what_the_schema_rejects():
    """tool_schema.fast_accept: every built-in tool's gold arguments and a few hundred near misses;
    whatever the fast path accepts, jsonschema accepts, and it takes the gold calls of the tools
    it covers (else it would only cost)."""
    from endstate.core.grading.grader import TaskIndex

    domains = Domains()
    gold: dict[tuple[str, str], list] = {}
    for task in TaskIndex(domains):
        for step in task["gold"]:
            if "tool" in step:
                gold.setdefault((task["domain"], step["tool"]), []).append(step["args"])
    covered = checked = 0
    for (domain, name), calls in sorted(gold.items()):
        t = domains[domain].tools[name]
        if t._accept is None:
            continue
        covered += 1
        for args in calls[:20]:
            for candidate in [args, *_mutations(args)]:
                checked += 1
                if t._accept(candidate):
                    assert t._validator.is_valid(candidate), (domain, name, candidate)
            assert t._accept(args) == t._validator.is_valid(args), (domain, name, args)
    assert covered >= 40 and checked > 10_000, (covered, checked)
