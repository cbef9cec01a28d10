"""The `plain` tool result format: an object as `key=value` pairs, anything else as text."""

from typing import Any


def plain(value: Any) -> str:
    if isinstance(value, dict):
        return " ".join(f"{key}={item}" for key, item in value.items())
    return str(value)
