"""Tool schemas come from type hints and docstrings; arguments are validated against them."""

import sqlite3
from typing import Literal

import pytest

from endstate.core.tools import Db, ToolError, customer_finder, insert_rows, make_tool


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
