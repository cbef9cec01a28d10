"""LLM judge: a YES/NO question about a transcript, asked through any OpenAI-compatible endpoint,
on the same wire as the agent and the simulated user (core.wire: retries with backoff, timeouts,
the contract checks), so judge calls run concurrently with the episodes of a step.

Verdicts are cached in a SQLite file keyed by model + prompt digest, so re-grading costs nothing.
A judge that cannot answer (endpoint down past its retries, no YES/NO after PARSE_ATTEMPTS
answers) raises JudgeError: the episode becomes a system_error, never a 0. A 4xx other than 429
means the URL, key or model is wrong: the run stops (ConfigurationError), as for the agent.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from endstate import cache_dir
from endstate.core.errors import ConfigurationError
from endstate.core.records.structs import Usage
from endstate.core.wire.endpoints import (
    ContextOverflow,
    EndpointFailure,
    Endpoints,
    RetryPolicy,
    chat_message,
    usage_of,
)
from endstate.core.wire.urls import url_problem

SYSTEM = ("You grade a transcript between a customer-service agent and a user. Answer the question "
          "about the transcript with exactly one word: YES or NO.")
PARSE_ATTEMPTS = 2  # a judge that rambles gets one more chance, then it is a system error


class JudgeError(Exception):
    """The judge could not give a verdict: infrastructure, not the agent's fault."""


def render_transcript(messages: list[dict[str, Any]]) -> str:
    """The transcript as the judge sees it: user, agent and tool turns; never the agent's reasoning."""
    lines = []
    for m in messages:
        role = m.get("role")
        if role == "system":
            continue
        if role == "tool":
            lines.append(f"TOOL RESULT ({m.get('name', '')}): {m.get('content', '')}")
            continue
        if m.get("content"):
            lines.append(f"{role.upper()}: {m['content']}")
        for call in m.get("tool_calls") or []:
            f = call["function"]
            lines.append(f"AGENT CALLS {f['name']}({f['arguments']})")
    return "\n".join(lines)


def build_prompt(messages: list[dict[str, Any]], question: str) -> str:
    return f"<transcript>\n{render_transcript(messages)}\n</transcript>\n\nQuestion: {question}\nAnswer YES or NO."


def parse_verdict(text: str | None) -> bool | None:
    words = (text or "").strip().strip("*.!\"' ").split()
    first = words[0].strip("*.,!:\"'").upper() if words else ""
    return {"YES": True, "NO": False}.get(first)


@dataclass
class Verdict:
    """A judge's answer to one question, and what it cost: `usage.calls` model calls made for it
    (0 when it came from the cache, then `usage.cache_hits` is 1)."""

    passed: bool
    usage: Usage


@dataclass
class Judge:
    model: str
    base_url: str
    api_key: str | None = field(default=None, repr=False)  # core.wire.keys: the judge's own
    cache_path: Path = field(default_factory=lambda: cache_dir() / "judge.sqlite")
    timeout_s: float = 60.0
    retries: int = 4  # calls per question in all (the first included), with backoff
    seed: int = 0

    def __post_init__(self):
        self.cache_path = Path(self.cache_path)
        self.cache_path.parent.mkdir(parents=True, exist_ok=True)
        self._cache = sqlite3.connect(self.cache_path, isolation_level=None, timeout=30)
        self._cache.execute("CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, model TEXT, "
                            "verdict INTEGER NOT NULL, answer TEXT, created_at REAL)")
        self.endpoints = Endpoints([self.base_url], self.api_key, self.timeout_s,
                                   RetryPolicy(attempts=self.retries))

    @classmethod
    def from_options(cls, model: str | None, base_url: str | None, cache: str | None,
                     api_key: str | None = None, **settings: Any) -> Judge | None:
        """The judge the flags (else $ENDSTATE_JUDGE_MODEL, $ENDSTATE_JUDGE_BASE_URL) name, or
        None; `api_key`: the judge's (core.wire.keys); `settings`: timeout_s, retries."""
        base_url = base_url or os.environ.get("ENDSTATE_JUDGE_BASE_URL")
        model = model or os.environ.get("ENDSTATE_JUDGE_MODEL")
        if not (model and base_url):
            return None
        problem = url_problem(base_url)
        if problem:
            raise ConfigurationError(f"judge base URL {base_url!r}: {problem}; give the endpoint's "
                                     "base URL, e.g. http://localhost:8000/v1")
        if cache:
            settings["cache_path"] = Path(cache)
        try:
            return cls(model, base_url, api_key, **settings)
        except (sqlite3.DatabaseError, OSError) as e:  # not SQLite, a folder, a file it cannot write
            where = cache or "the judge cache in $ENDSTATE_CACHE"
            raise ConfigurationError(f"--judge-cache {where}: cannot keep verdicts there ({e}); give "
                                     "a new file name, or a judge cache endstate wrote") from None

    def close(self) -> None:
        """The judge's connections, at the end of a run (on the event loop that used them)."""
        self.endpoints.close()

    async def ask(self, messages: list[dict[str, Any]], question: str) -> Verdict:
        prompt = build_prompt(messages, question)
        key = hashlib.sha256(f"{self.model}\0{SYSTEM}\0{prompt}".encode()).hexdigest()
        row = self._cache.execute("SELECT verdict FROM verdicts WHERE key = ?", (key,)).fetchone()
        if row:
            return Verdict(bool(row[0]), Usage(calls=0, cache_hits=1))
        usage, answer = Usage(calls=0, cache_hits=0), None
        for _ in range(PARSE_ATTEMPTS):
            try:
                response = await self.endpoints.post("/chat/completions", {
                    "model": self.model, "temperature": 0, "max_tokens": 8, "seed": self.seed,
                    "messages": [{"role": "system", "content": SYSTEM},
                                 {"role": "user", "content": prompt}]})
                usage.add(usage_of(response))
                usage.calls += 1
                answer = chat_message(response).get("content")
            except EndpointFailure as e:  # past its retries, or an answer that breaks the contract
                raise JudgeError(f"judge endpoint failed ({e.kind}): {e.message}") from None
            except ContextOverflow as e:  # the transcript does not fit the judge's context
                raise JudgeError(f"judge endpoint refused the prompt: {e}") from None
            verdict = parse_verdict(answer)
            if verdict is not None:
                self._cache.execute("INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?)",
                                    (key, self.model, int(verdict), answer, time.time()))
                return Verdict(verdict, usage)
        raise JudgeError(f"judge gave no YES/NO after {PARSE_ATTEMPTS} tries: {answer!r}")
