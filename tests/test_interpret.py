"""The interpreter: hermes and Qwen3-XML tool calls, <think> reasoning, type coercion — and it never
raises, whatever the model wrote."""

from typing import Literal

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from endstate.core.agent.interpret import (
    _parse,
    coerce,
    parse,
    render_call,
    render_signature,
    render_system,
    split_reasoning,
)

PARAMS = {"get_order": {"type": "object", "properties": {
    "order_id": {"type": "string"}, "line": {"type": "integer"}, "amount": {"type": "number"},
    "rush": {"type": "boolean"}, "lines": {"type": "array", "items": {"type": "integer"}},
    "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}}


def test_hermes_call_with_reasoning_and_text():
    p = parse('<think>find it first</think>Let me check.\n<tool_call>\n{"name": "get_order", '
              '"arguments": {"order_id": "W1", "line": "2"}}\n</tool_call>', PARAMS)
    assert p.reasoning == "find it first"
    assert p.content == "Let me check."
    assert [(c.name, c.args()) for c in p.tool_calls] == [("get_order", {"order_id": "W1", "line": 2})]
    assert p.parse_error is None


def test_qwen3_xml_call_and_string_coercion():
    p = parse("<tool_call>\n<function=get_order>\n<parameter=order_id>\nW1\n</parameter>\n"
              "<parameter=amount>\n12.50\n</parameter>\n<parameter=rush>\ntrue\n</parameter>\n"
              "<parameter=lines>\n[1, 2]\n</parameter>\n<parameter=note>\nnull\n</parameter>\n"
              "</function>\n</tool_call>", PARAMS)
    assert p.tool_calls[0].args() == {"order_id": "W1", "amount": 12.5, "rush": True,
                                         "lines": [1, 2], "note": None}


def test_several_calls_arguments_as_json_string_and_unknown_tools_kept():
    p = parse('<tool_call>{"name": "a", "arguments": "{\\"x\\": 1}"}</tool_call>'
              '<tool_call>{"name": "teleport", "parameters": {}}</tool_call>')
    assert [(c.name, c.args()) for c in p.tool_calls] == [("a", {"x": 1}), ("teleport", {})]


def test_unparseable_call_is_a_text_turn_with_parse_error():
    p = parse('Sure! <tool_call>{"name": "get_order", "arguments": {"order_id": </tool_call>', PARAMS)
    assert p.tool_calls == []
    assert p.content.startswith("Sure! <tool_call>")
    assert p.parse_error.startswith("unreadable tool call")


def test_cut_off_generation_is_still_read():
    assert parse('<tool_call>\n{"name": "get_order", "arguments": {"order_id": "W1"}}', PARAMS).tool_calls
    visible, reasoning = split_reasoning("<think>still thinking about")
    assert visible == "" and reasoning == "still thinking about"
    visible, reasoning = split_reasoning("template opened it</think>Hello")
    assert (visible, reasoning) == ("Hello", "template opened it")


def test_coercion_leaves_what_does_not_convert():
    assert coerce("abc", {"type": "integer"}) == "abc"
    assert coerce("7", {"type": "string"}) == "7"
    assert coerce(7, {"type": "string"}) == 7  # only strings are coerced; validation reports this
    assert coerce("-3", {"anyOf": [{"type": "integer"}, {"type": "null"}]}) == -3
    # past a double's range: inf would be recorded as null (orjson), so it stays text for validation
    assert coerce(["1e400", "-1e999", "2.5e3"], {"type": "array", "items": {"type": "number"}}) == [
        "1e400", "-1e999", 2500.0]


def test_system_prompt_lists_every_tool():
    spec = {"type": "function", "function": {"name": "get_order", "description": "d",
                                             "parameters": PARAMS["get_order"]}}
    text = render_system("Be kind.", [spec])
    assert text.startswith("Be kind.\n\n# Tools") and '"name":"get_order"' in text


def test_signatures_list_every_tool_on_one_line_with_its_argument_types():
    from endstate.core.env.tools import make_tool

    def refund(db, order_id: str, lines: list[int], reason: Literal["late", "broken"],
               note: str | None = None, amount: float = 0.0) -> dict:
        """Refund lines of an order.

        Args:
            order_id: The order, such as "W1042".
        """

    spec = make_tool(refund, writes=True).schema
    text = render_system("Be kind.", [spec], "signatures")
    assert text.startswith("Be kind.\n\n# Tools") and "<tools>\n" in text
    assert ('refund(order_id: string, lines: list[integer], reason: "late" | "broken", '
            'note?: string | null, amount?: number): Refund lines of an order.\n') in text
    assert "The order, such as" not in text  # argument descriptions are what this format leaves out
    assert len(text) < len(render_system("Be kind.", [spec]))


FRAGMENTS = st.sampled_from(["<tool_call>", "</tool_call>", "<think>", "</think>", "{", "}", '"name"',
                             ":", '"arguments"', "<function=", "<parameter=", "</parameter>", ">", "[",
                             '"', "\\", "\n", "get_order", "1e999", "null", "\x00", "é"])


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(), st.lists(st.one_of(FRAGMENTS, st.text(max_size=5))).map("".join)))
def test_parse_never_raises(text):
    p = _parse(text, PARAMS)  # without parse's last-resort catch: an internal exception fails here
    assert isinstance(p.content, str)
    assert all(isinstance(c.args(), dict) for c in p.tool_calls)
    orjson.dumps([c.args() for c in p.tool_calls])  # every call kept can be recorded


def test_one_hostile_call_costs_only_itself():
    deep = "[" * 100_000 + "]" * 100_000  # RecursionError in the JSON decoder
    for hostile in ('{"name": "get_order", "arguments": {"line": "%s"}}' % ("9" * 5000),
                    '{"name": "get_order", "arguments": {"line": %s}}' % ("9" * 5000),
                    '{"name": "get_order", "arguments": {"line": %s}}' % ("9" * 30),
                    '{"name": "get_order", "arguments": {"lines": %s}}' % deep):
        text = (f"<tool_call>{hostile}</tool_call>"
                '<tool_call>{"name": "get_order", "arguments": {"order_id": "W1"}}</tool_call>')
        p = _parse(text, PARAMS)
        assert [(c.name, c.args()) for c in p.tool_calls][-1] == ("get_order", {"order_id": "W1"})
        orjson.dumps([c.args() for c in p.tool_calls])


# Markup inside argument strings ("<think>", "</tool_call>") is not supported: the model's own
# tags delimit calls and reasoning.
PLAIN = st.text(max_size=8).filter(lambda t: "<" not in t)
JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | PLAIN,
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                           max_leaves=8)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="abcdefghij_", min_size=1, max_size=12),
       st.dictionaries(PLAIN, JSON_VALUES, max_size=4))
def test_rendered_calls_parse_back(name, arguments):
    p = parse(render_call(name, arguments))
    assert [(c.name, c.args()) for c in p.tool_calls] == [(name, arguments)]


NESTED = {"type": "object", "properties": {
    "passengers": {"type": "array", "items": {"type": "object", "properties": {
        "name": {"type": "string"}, "age": {"type": "integer"},
        "seat": {"type": "string", "enum": ["window", "aisle"]}}, "required": ["name", "age"]}},
    "extras": {"anyOf": [{"type": "object", "properties": {"bags": {"type": "integer"}}}, {"type": "null"}]},
    "fares": {"type": "object", "additionalProperties": {"type": "number"}},
    "anything": True}}


def test_coercion_follows_the_nested_schema():
    args = {"passengers": '[{"name": "Ada", "age": "34"}, {"name": "Bo", "age": 3, "seat": "aisle"}]',
            "extras": {"bags": "2"}, "fares": {"ADT": "99.5", "CHD": "n/a"}, "anything": "7"}
    assert coerce(args, NESTED) == {
        "passengers": [{"name": "Ada", "age": 34}, {"name": "Bo", "age": 3, "seat": "aisle"}],
        "extras": {"bags": 2}, "fares": {"ADT": 99.5, "CHD": "n/a"}, "anything": "7"}
    assert coerce("null", NESTED["properties"]["extras"]) is None
    assert coerce([{"name": 5}], {"type": "array", "items": True}) == [{"name": 5}]


def test_signatures_show_nested_objects():
    spec = {"name": "book", "description": "Book.", "parameters": NESTED | {"required": ["passengers"]}}
    assert render_signature(spec) == (
        'book(passengers: list[{name: string, age: integer, seat?: "window" | "aisle"}], '
        "extras?: {bags?: integer} | null, fares?: dict[string, number], anything?: any): Book.")
