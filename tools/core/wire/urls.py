"""What an endpoint's base URL must be: light (urllib only), for the flags that take one and the
judge, which may read one from the environment."""

from __future__ import annotations

from urllib.parse import urlsplit


def url_problem(text: str) -> str | None:
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises on a port that is no number or past 65535
    except ValueError as e:
        return str(e)
    if parts.scheme not in ("http", "https"):
        return "not an http:// or https:// URL"
    if not parts.hostname:
        return "no host"
    return None
