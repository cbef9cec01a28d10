"""The start-up check of a completions endpoint. Token ids from another vocabulary are not an error
anywhere downstream, only garbage prompts and low rewards: so before the first episode the local
tokenizer must tokenize a conversation rendered with its own chat template (special tokens,
tool-call tags, non-ASCII text) exactly as the server does (vLLM's /tokenize), and the served name
and length must fit (/v1/models)."""

from __future__ import annotations

import asyncio
from typing import Any

from endstate.core.agent.trace import ChatTemplate
from endstate.core.console.progress import note
from endstate.core.errors import ConfigurationError
from endstate.core.wire.endpoints import Endpoints, server_root

PROBE_CONVERSATION = [
    {"role": "system", "content": "You check tokenizers: Ünïcödé, 東京, 🙂, 12345, \ttabs."},
    {"role": "user", "content": "Call the tool, then answer in  two spaces."},
    {"role": "assistant", "content": '<think>\nfine\n</think>\n<tool_call>\n{"name": "probe", '
                                     '"arguments": {"n": 1}}\n</tool_call>'},
    {"role": "user", "content": "Thanks."},
]


def probe_text(template: ChatTemplate) -> str:
    return template.tokenizer.apply_chat_template(PROBE_CONVERSATION, tokenize=False,
                                                  add_generation_prompt=True)


def check_served_tokenizer(endpoints: Endpoints, model: str, max_context: int,
                           template: ChatTemplate, name: str) -> None:
    """Check every endpoint before the first episode: a wrong served name, a --max-context past
    the served max_model_len, or token ids that differ from the local tokenizer's (`name`, as
    the user gave it) stop the run (exit 2); a check the server cannot answer is a warning."""
    async def check_all() -> None:
        try:  # every endpoint's check runs to its end, whatever another's found: then the first problem
            outcomes = await asyncio.gather(*(
                _check_endpoint(endpoints, url, model, max_context, template, name)
                for url in endpoints.urls), return_exceptions=True)
        finally:
            endpoints.close()
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome

    asyncio.run(check_all())


async def _check_endpoint(endpoints: Endpoints, url: str, model: str, max_context: int,
                          template: ChatTemplate, name: str) -> None:
    limit = None
    status, answer, problem = await endpoints.ask("GET", url + "/models")
    cards = answer.get("data") if isinstance(answer, dict) else None
    if status == 200 and isinstance(cards, list):
        served = {c["id"]: c for c in cards if isinstance(c, dict) and isinstance(c.get("id"), str)}
        if model not in served:
            raise ConfigurationError(f"{url}/models serves {', '.join(map(str, served)) or 'no model'}, "
                                     f"not --model {model}: pass the served name (vLLM's "
                                     "--served-model-name)")
        limit = served[model].get("max_model_len")
    else:
        note(f"warning: GET {url}/models: {problem or 'not a model list'}: the served model's name "
             "and length were not checked")
    text = probe_text(template)
    tokenize = server_root(url) + "/tokenize"
    status, answer, problem = await endpoints.ask("POST", tokenize, {
        "model": model, "prompt": text, "add_special_tokens": False, "return_token_strs": True})
    served_ids = answer.get("tokens") if isinstance(answer, dict) else None
    if status == 200 and isinstance(served_ids, list):
        local_ids = template.encode(text)
        if served_ids != local_ids:
            raise ConfigurationError(tokenizer_mismatch(local_ids, served_ids, answer.get("token_strs"),
                                                        template.tokenizer, name, tokenize))
        limit = limit or answer.get("max_model_len")
    else:
        note(f"warning: POST {tokenize}: {problem or 'no token list'}: the tokenizer check could not "
             f"run (a server without vLLM's /tokenize); make sure --tokenizer {name} is the served "
             "model's, or its prompts will be garbage")
    if limit is not None and not (type(limit) is int and limit > 0):
        note(f"warning: {url} gives max_model_len {limit!r:.40}, not a positive integer: "
             f"--max-context {max_context} was not checked against the served length")
    elif limit is not None and limit < max_context:
        raise ConfigurationError(f"--max-context {max_context} exceeds the max_model_len {limit} "
                                 f"served at {url}: pass --max-context {limit} (or serve with "
                                 f"--max-model-len {max_context})")


def tokenizer_mismatch(local: list[int], served: list, served_pieces: Any, tokenizer, name: str,
                       where: str) -> str:
    """Both tokenizations of the probe around the first position where they differ."""
    at = next((i for i, (a, b) in enumerate(zip(local, served)) if a != b), min(len(local), len(served)))
    window = range(max(0, at - 3), at + 6)

    def shown_ids(ids: list, pieces: list | None) -> str:
        def piece(i: int) -> str:
            if pieces is not None and i < len(pieces):
                return str(pieces[i])
            ok = type(ids[i]) is int and 0 <= ids[i] < len(tokenizer)
            return tokenizer.convert_ids_to_tokens(ids[i]) if ok else "?"
        return "  ".join(f"{i}:{ids[i]} {piece(i)!r}" for i in window if i < len(ids)) or "(ends)"

    pieces = served_pieces if isinstance(served_pieces, list) else None
    here = f"--tokenizer {name}:"
    return (f"--tokenizer {name} is not the served model's: a conversation rendered with its chat "
            f"template tokenizes differently at {where} from token {at} on ({len(local)} tokens "
            f"here, {len(served)} there)\n"
            f"  {here} {shown_ids(local, None)}\n"
            f"  {'server:':<{len(here)}} {shown_ids(served, pieces)}"
            f"{'' if pieces else '  (pieces decoded with the local tokenizer)'}\n"
            "Pass --tokenizer the folder of the model the server runs (its tokenizer files): ids "
            "from another vocabulary make garbage prompts, not errors.")
