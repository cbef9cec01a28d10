"""An endstate plugin: the counter domain, the `total` check kind, the `plain` tool result format,
the `counter-bot` agent backend and the `polite` simulated user, each registered through an entry
point (pyproject.toml)."""

from pathlib import Path

COUNTER = Path(__file__).parent / "counter"  # the domain's folder: a domain is named after it
