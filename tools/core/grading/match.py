"""Value tests used by checks: a literal means equality; operators are one-key objects.

    "cancelled"                      equals
    {"equals": 3}                    equals (for values that look like operators)
    {"any_of": ["a", "b"]}           one of
    {"approx": 12.5, "tol": 0.01}    |actual - 12.5| <= tol (default 1e-6)
    {"is_null": true}                actual is (not) NULL
    {"not": <test>}                  the negation of any test
"""

from __future__ import annotations

import re
from typing import Any

from endstate.core.agent.interpret import split_reasoning

OPERATORS = ("equals", "any_of", "approx", "is_null", "not")


def _is_operator(test: Any) -> bool:
    return isinstance(test, dict) and len(test.keys() & set(OPERATORS)) == 1


def matches(test: Any, actual: Any) -> bool:
    if not _is_operator(test):
        return _equal(test, actual)
    if "equals" in test:
        return _equal(test["equals"], actual)
    if "any_of" in test:
        return any(_equal(v, actual) for v in test["any_of"])
    if "approx" in test:
        return (isinstance(actual, (int, float)) and not isinstance(actual, bool)
                and abs(actual - test["approx"]) <= test.get("tol", 1e-6))
    if "is_null" in test:
        return (actual is None) == bool(test["is_null"])
    return not matches(test["not"], actual)


def _equal(expected: Any, actual: Any) -> bool:
    # True == 1 in Python; a check that expects true must not pass on the integer 1 by accident
    # unless the column stores booleans as integers, which SQLite does: compare as stored.
    if isinstance(expected, bool) and isinstance(actual, int):
        return int(expected) == actual
    return expected == actual


def describe(test: Any) -> str:
    """How a test reads in a detail line."""
    if not _is_operator(test):
        return repr(test)
    if "equals" in test:
        return repr(test["equals"])
    if "any_of" in test:
        return "one of " + ", ".join(map(repr, test["any_of"]))
    if "approx" in test:
        return f"{test['approx']!r} ± {test.get('tol', 1e-6)}"
    if "is_null" in test:
        return "NULL" if test["is_null"] else "not NULL"
    return "not " + describe(test["not"])


def literal_filters(where: dict[str, Any]) -> dict[str, Any]:
    """The equality conditions of a `where`, which SQL can use (the rest is filtered in Python)."""
    out = {}
    for col, test in where.items():
        if not _is_operator(test):
            out[col] = test
        elif "equals" in test:
            out[col] = test["equals"]
    return out


def describe_where(where: dict[str, Any]) -> str:
    return ", ".join(f"{c}={describe(t)}" for c, t in where.items())


# -- what the agent said --------------------------------------------------------------------

# A numeral standing alone: not part of a word or id ("W1042", "4th"), of a longer number ("14",
# "4.5", "2024") or of a date, time, range or fraction ("2024-01-04", "10:30", "4-5", "4–5", "3/4").
# Thousands are grouped by commas ("1,250.00"); a sign and a currency symbol may lead ("-$4").
_NUMERAL = re.compile(r"""
    (?<![\w.-]) (?<!\d[.,/:\u2013-])
    (?P<sign>[-\u2212])? [$\u20ac\u00a3]?
    (?P<digits>[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+) (?P<fraction>\.[0-9]+)?
    (?!\w|[.,/:\u2013-][0-9])
""", re.VERBOSE)


def normalize_text(text: str) -> str:
    """Casefold, drop thousands separators and currency signs, collapse whitespace."""
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text.casefold())
    text = text.replace("$", "").replace("€", "").replace("£", "")
    return " ".join(text.split())


def numbers_in(text: str) -> list[float]:
    """The values of the standalone numerals of `text` (see _NUMERAL): "$1,250.00" reads 1250."""
    return [(-1 if m["sign"] else 1) * float(m["digits"].replace(",", "") + (m["fraction"] or ""))
            for m in _NUMERAL.finditer(text)]


def said(value: str | int | float, text: str) -> bool:
    """Whether `text` contains `value`: a number matches a standalone numeral of the same value
    within half a cent (4 matches "4", "$4.00" and "4%", never "14", "4.5", "W4" or "2024-01-04");
    a string matches as a normalized substring."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return any(abs(n - value) < 0.005 for n in numbers_in(text))
    return normalize_text(value) in normalize_text(text)


def visible_assistant_text(messages: list[dict[str, Any]]) -> str:
    """What the agent told the user: assistant content without reasoning (read by the same
    interpreter that reads model output for training and evaluation)."""
    parts = [m.get("content") or "" for m in messages if m.get("role") == "assistant"]
    return "\n".join(split_reasoning(p)[0] for p in parts)
