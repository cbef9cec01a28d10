"""Token traces for token-level agents: the exact ids the trainer will see, built append-only.

Each model call is a turn: `prompt_ids` are the tokens appended since the previous call's
completion (the whole prompt for the first call: system, few-shot turns, the user's opening), and
`completion_ids`/`logprobs` are what the model sampled. Observations (tool results, user replies)
are rendered as *deltas* through the chat template and appended; the history is never re-rendered,
so templates that drop earlier `<think>` blocks cannot change the prefix under the trainer.
The training sequence is concat(prompt_ids, completion_ids) over the turns, with loss on the
completion ids only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

_SENTINEL = "\u2063endstate-sentinel\u2063"


class ChatTemplate:
    """Renders messages with a tokenizer's chat template, whole (first turn) or as a delta."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.has_tool_role = self._renders_tool_role()
        self.eos_text = tokenizer.eos_token or ""

    def _renders_tool_role(self) -> bool:
        """Templates that render any role (SmolLM2's ChatML) or name `tool` get tool turns as such;
        others get tool results as user turns wrapped in <tool_response>, hermes-style."""
        try:
            text = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": "u"}, {"role": "tool", "content": _SENTINEL}], tokenize=False)
        except Exception:  # noqa: BLE001 - templates raise on roles they do not know
            return False
        return _SENTINEL in text

    def _text(self, messages: list[dict[str, Any]], generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            [self.adapt(m) for m in messages], tokenize=False, add_generation_prompt=generation_prompt)

    def adapt(self, message: dict[str, Any]) -> dict[str, Any]:
        if message["role"] == "tool" and not self.has_tool_role:
            from endstate.core.agent.interpret import render_tool_result

            return {"role": "user", "content": render_tool_result(message["content"])}
        return {"role": message["role"], "content": message.get("content") or ""}

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def first_prompt(self, messages: list[dict[str, Any]]) -> list[int]:
        return self.encode(self._text(messages, generation_prompt=True))

    def shared_prefix_len(self, static: list[dict[str, Any]], ids: list[int]) -> int:
        """How many leading tokens of `ids` are exactly the rendering of `static` (the messages
        every episode of a domain starts with), or 0 when tokenization merges across the seam."""
        prefix = self.encode(self._text(static, generation_prompt=False))
        return len(prefix) if ids[:len(prefix)] == prefix else 0

    def delta(self, messages: list[dict[str, Any]], completion_ended: bool) -> list[int]:
        """Tokens that follow an assistant completion and carry `messages`, up to the next
        generation prompt. If the completion did not end with the end-of-turn token (cut off by
        max_tokens), the delta supplies it: it was not sampled, so it is not trained on."""
        frame = [{"role": "system", "content": "x"}, {"role": "assistant", "content": _SENTINEL}]
        text = self._text(frame + messages, generation_prompt=True)
        after = text[text.index(_SENTINEL) + len(_SENTINEL):]
        if completion_ended and self.eos_text and after.startswith(self.eos_text):
            after = after[len(self.eos_text):]
        return self.encode(after)


@dataclass
class TokenTrace:
    turns: list[dict[str, Any]] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)  # prompt ids for the next call
    length: int = 0  # tokens in the whole sequence so far, pending included

    def append_prompt(self, ids: list[int]) -> None:
        self.pending += ids
        self.length += len(ids)

    def next_prompt(self) -> list[int]:
        """The full prompt for the next call: everything so far (this is only read, never
        rebuilt, so it is exactly what the trainer will concatenate)."""
        ids: list[int] = []
        for t in self.turns:
            ids += t["prompt_ids"] + t["completion_ids"]
        return ids + self.pending

    def append_completion(self, ids: list[int], logprobs: list[float] | None) -> None:
        self.turns.append({"prompt_ids": self.pending, "completion_ids": list(ids),
                           "logprobs": None if logprobs is None else [float(x) for x in logprobs]})
        self.pending = []
        self.length += len(ids)
