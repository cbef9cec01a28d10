"""Tool schemas come from type hints and docstrings; arguments are validated against them."""

from typing import Literal

import pytest

from endstate.core.tools import Db, make_tool


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
