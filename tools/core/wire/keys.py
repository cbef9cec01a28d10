"""Which API key each role sends, and to which host: the agent, the simulated user and the judge
may be served by different providers, and a key sent to another provider's host is a key leaked.

Each role reads its own key from an environment variable of its own (ROLE_KEYS; a flag such as
--user-key-env names another variable: flags name the variable, never the secret, which would
show in `ps` and shell history). A role whose variable is unset falls back to the shared
OPENAI_API_KEY only where that key already goes: the first role, in the order agent, user,
judge, whose variable is unset takes it for its hosts; another falls back only if every one of
its endpoints is on one of those hosts (scheme, host and port), and otherwise sends no key (the
warning names the variable to set). Naming OPENAI_API_KEY with a role's flag shares it on purpose.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

SHARED = "OPENAI_API_KEY"
ROLE_KEYS = {"agent": "ENDSTATE_AGENT_API_KEY", "user": "ENDSTATE_USER_API_KEY",
             "judge": "ENDSTATE_JUDGE_API_KEY"}
ORDER = ("agent", "user", "judge")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Role:
    """A role of the run that talks to endpoints: its name, its base URLs and the variable that
    holds its own key."""

    name: str
    urls: Sequence[str]
    key_env: str


def origin(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of a URL: what a key is sent to."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or (443 if scheme == "https" else 80)


def shown_origin(url: str) -> str:
    scheme, host, port = origin(url)
    return f"{scheme}://{host}:{port}"


def key_env_problem(name: str) -> str | None:
    """Why `name` is not an environment variable name (the value is never echoed: it may be the
    secret itself, given by mistake)."""
    if _NAME.fullmatch(name or ""):
        return None
    return ("takes the name of the environment variable that holds the key (letters, digits and _, "
            "e.g. MY_PROVIDER_KEY), never the key itself")


def resolve_keys(roles: Sequence[Role], environ: Mapping[str, str] = os.environ
                 ) -> tuple[dict[str, str | None], dict[str, str]]:
    """({role: the key it sends, or None}, {role: why it sends none}) for the roles that name
    endpoints (a warning only where the shared key is set and kept from that role)."""
    keys: dict[str, str | None] = {}
    warnings: dict[str, str] = {}
    shared = environ.get(SHARED) or None
    owner: Role | None = None
    for role in sorted((r for r in roles if r.urls), key=lambda r: ORDER.index(r.name)):
        own = environ.get(role.key_env) or None
        if own is not None or role.key_env == SHARED:
            keys[role.name] = own
            continue
        if shared is None:
            keys[role.name] = None
            continue
        if owner is None:
            owner = role
        hosts = {origin(u) for u in owner.urls}
        if all(origin(u) in hosts for u in role.urls):
            keys[role.name] = shared
            continue
        keys[role.name] = None
        elsewhere = ", ".join(sorted({shown_origin(u) for u in role.urls if origin(u) not in hosts}))
        warnings[role.name] = (
            f"the {role.name} endpoint ({elsewhere}) gets no API key: ${role.key_env} is unset, and "
            f"${SHARED} goes only to the {owner.name}'s host(s) "
            f"({', '.join(sorted(shown_origin(u) for u in owner.urls))}); export {role.key_env}, or "
            f"name a variable with --{role.name}-key-env ({SHARED} itself shares it on purpose)")
    return keys, warnings
