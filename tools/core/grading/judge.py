"""LLM judge: a YES/NO question about a transcript, asked through any OpenAI-compatible endpoint.

Verdicts are cached in a SQLite file keyed by model + prompt digest, so re-grading costs nothing.
A judge that cannot answer (endpoint down, no YES/NO after bounded retries) raises JudgeError:
the episode becomes a system_error, never a 0.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from endstate.core.env.domain import cache_dir
from endstate.core.records.structs import Usage
from endstate.core.wire.endpoints import EndpointFailure, usage_of
from endstate.core.wire.http import configuration_error, http_failure_kind

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
class Judge:
    model: str
    base_url: str
    api_key: str = "EMPTY"
    cache_path: Path = field(default_factory=lambda: cache_dir() / "judge.sqlite")
    timeout_s: float = 60.0
    max_retries: int = 3
    seed: int = 0
    usage: Usage = field(default_factory=Usage)

    def __post_init__(self):
        self.cache_path = Path(self.cache_path)
        self.cache_path.parent.mkdir(parents=True, exist_ok=True)
        self._cache = sqlite3.connect(self.cache_path, isolation_level=None, timeout=30)
        self._cache.execute("CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, model TEXT, "
                            "verdict INTEGER NOT NULL, answer TEXT, created_at REAL)")
        from openai import OpenAI  # imported here: grading without judge checks never pays for it

        self._client = OpenAI(base_url=self.base_url, api_key=self.api_key,
                              timeout=self.timeout_s, max_retries=self.max_retries)

    @classmethod
    def from_options(cls, model: str | None, base_url: str | None, cache: str | None) -> Judge | None:
        base_url = base_url or os.environ.get("ENDSTATE_JUDGE_BASE_URL")
        model = model or os.environ.get("ENDSTATE_JUDGE_MODEL")
        if not (model and base_url):
            return None
        kwargs = {"cache_path": Path(cache)} if cache else {}
        return cls(model, base_url, os.environ.get("ENDSTATE_JUDGE_API_KEY")
                   or os.environ.get("OPENAI_API_KEY") or "EMPTY", **kwargs)

    def ask(self, messages: list[dict[str, Any]], question: str) -> bool:
        prompt = build_prompt(messages, question)
        key = hashlib.sha256(f"{self.model}\0{SYSTEM}\0{prompt}".encode()).hexdigest()
        row = self._cache.execute("SELECT verdict FROM verdicts WHERE key = ?", (key,)).fetchone()
        if row:
            return bool(row[0])
        answer = None
        for _ in range(PARSE_ATTEMPTS):
            try:
                response = self._client.chat.completions.create(
                    model=self.model, temperature=0, max_tokens=8, seed=self.seed,
                    messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}])
            except Exception as e:  # openai raises its own hierarchy for timeouts, 5xx, resets
                status = getattr(e, "status_code", None)
                if isinstance(status, int) and http_failure_kind(status) is None:
                    raise configuration_error(f"judge endpoint {self.base_url} ({self.model}): "
                                              f"HTTP {status}: {e}") from e
                raise JudgeError(f"judge endpoint failed: {type(e).__name__}: {e}") from e
            try:  # the agent's rule for token counts, so a judge's are checked alike
                counts = usage_of({"usage": response.usage and response.usage.model_dump()})
            except EndpointFailure as e:
                raise JudgeError(f"judge endpoint answered {e.message}") from None
            self.usage.add(counts)
            answer = response.choices[0].message.content if response.choices else None
            verdict = parse_verdict(answer)
            if verdict is not None:
                self._cache.execute("INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?)",
                                    (key, self.model, int(verdict), answer, time.time()))
                return verdict
        raise JudgeError(f"judge gave no YES/NO after {PARSE_ATTEMPTS} tries: {answer!r}")
