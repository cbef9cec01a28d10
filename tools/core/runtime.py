"""The episode runtime rollout, probe and grpo share: the run configuration, the agent backends by
name, attempt records, and running episodes concurrently (which keys to run: core.tasks)."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import os
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import orjson

from endstate.core import prompting, stdio
from endstate.core.agents import (
    AgentBackend,
    ChatBackend,
    TokenBackend,
    check_served_tokenizer,
    completions_sampler,
)
from endstate.core.domain import Domains
from endstate.core.endpoints import Endpoints, RetryPolicy, close_endpoints
from endstate.core.episode_loop import EpisodeSpec, LLMUser, ScriptedUser, run_episode
from endstate.core.errors import EndstateError, ExitCode
from endstate.core.local_model import EMBEDDED, LocalGenerator, Sampling, load, resolve_model
from endstate.core.progress import Progress, episode_counts, episode_tokens
from endstate.core.schemas import Attempt
from endstate.core.settings import EpisodeSettings
from endstate.core.trace import ChatTemplate

MIN_TIMEOUT_S = 60.0
SLOWEST_TOKENS_PER_S = 4.0  # a served model under load, per request: 8,192 tokens in ~34 min


def default_timeout(max_new_tokens: int) -> float:
    """Seconds per model call when --timeout is not given: long enough for max_new_tokens at
    SLOWEST_TOKENS_PER_S, and at least MIN_TIMEOUT_S (256 tokens: 64 s; 8,192 tokens: 2,048 s, past
    the 1,800 s the reference evaluation gives a long reasoning answer)."""
    return max(MIN_TIMEOUT_S, max_new_tokens / SLOWEST_TOKENS_PER_S)


@dataclass
class RunConfig(EpisodeSettings):
    """How rollout and probe run episodes: the shared episode settings (core.settings), plus the
    backend, endpoints, simulated user and prices."""

    backend: str = "local"
    model: str = EMBEDDED
    tokenizer: str | None = None
    agent_urls: list[str] = field(default_factory=list)
    api_key: str = "EMPTY"
    seed: int | None = 0  # None: no seed is sent to endpoints (local generation uses 0)
    procs: int = 1  # processes running episodes, each its own event loop (endpoint backends)
    timeout: float | None = None  # None: default_timeout(max_new_tokens)
    retries: int = 4
    user: str = "scripted"
    user_urls: list[str] = field(default_factory=list)
    user_model: str | None = None
    prices: dict[str, tuple[float, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()  # --stop and --extra-body, before any episode
        if self.procs > 1 and self.backend == "local":
            raise EndstateError("--procs needs an endpoint backend (chat or completions): the local "
                                "backend batches all its episodes in one process")
        if self.backend == "completions" and self.tokenizer is None and self.model != EMBEDDED:
            raise EndstateError(
                f"--backend completions --model {self.model} needs --tokenizer: a local folder with "
                "the served model's tokenizer files (the folder the server was started with, or "
                "the tokenizer*.json files of its hub repo); endstate renders and tokenizes the "
                f"prompts itself. (--tokenizer {EMBEDDED} if the server runs the embedded SmolLM2.)")
        if self.backend == "local" and self.extra_body:
            raise EndstateError("--extra-body is merged into endpoint requests; the local backend "
                                "sends none (use --backend chat or completions, or drop it)")
        if self.timeout is None:
            self.timeout = default_timeout(self.max_new_tokens)

    @property
    def sampling(self) -> Sampling:
        return Sampling.of(self)

    def policy(self) -> dict[str, Any]:
        return {"model": self.model, "backend": self.backend, "seed": self.seed,
                "sampling": self.sampling.recorded(), **self.prompting}

    @functools.cached_property
    def prompting(self) -> dict[str, Any]:
        """few_shot, tool_prefill, tool_format and interpreter: the flags, else what the model
        folder records (the local model's; a completions endpoint's --tokenizer folder), else the
        generic defaults (core.prompting)."""
        folder = (resolve_model(self.model) if self.backend == "local"
                  else resolve_model(self.tokenizer) if self.backend == "completions" and self.tokenizer
                  else None)
        flags = {"few_shot": self.few_shot, "tool_prefill": self.tool_prefill,
                 "tool_format": self.tool_format}
        return prompting.resolve(flags, folder, f"model {self.model}")


# -- backends: name -> factory -------------------------------------------------------------------

def _endpoints(cfg: RunConfig) -> Endpoints:
    if not cfg.agent_urls:
        raise EndstateError(f"--backend {cfg.backend} needs --agent-url (or ENDSTATE_AGENT_URLS)")
    return Endpoints(cfg.agent_urls, cfg.api_key, cfg.timeout, RetryPolicy(attempts=cfg.retries))


def _chat_backend(cfg: RunConfig, model_and_tokenizer=None) -> AgentBackend:
    """Chat completions with native tools: the endpoint renders and parses."""
    return ChatBackend(_endpoints(cfg), cfg.model, cfg.sampling, cfg.seed, cfg.prompting["few_shot"])


def _completions_backend(cfg: RunConfig, model_and_tokenizer=None) -> AgentBackend:
    """Token-in/token-out against an endpoint: endstate renders and interprets."""
    from transformers import AutoTokenizer

    endpoints = _endpoints(cfg)
    tokenizer = AutoTokenizer.from_pretrained(resolve_model(cfg.tokenizer or EMBEDDED))
    template = ChatTemplate(tokenizer)
    check_served_tokenizer(endpoints, cfg.model, cfg.max_context, template, cfg.tokenizer or EMBEDDED)
    sample = completions_sampler(endpoints, cfg.model, cfg.sampling, cfg.seed, tokenizer.eos_token_id,
                                 len(tokenizer))
    return TokenBackend(template, sample, cfg.sampling, cfg.max_context, *token_prompting(cfg))


def _local_backend(cfg: RunConfig, model_and_tokenizer=None) -> AgentBackend:
    """In-process transformers; grpo passes its live policy as `model_and_tokenizer`."""
    model, tokenizer = model_and_tokenizer or load(resolve_model(cfg.model), cfg.device)
    generator = LocalGenerator(model, tokenizer, cfg.sampling, seed=cfg.seed or 0, max_batch=cfg.jobs)
    return TokenBackend(ChatTemplate(tokenizer), generator.submit, cfg.sampling, cfg.max_context,
                        *token_prompting(cfg))


def token_prompting(cfg: RunConfig) -> tuple[bool, bool, str]:
    """few_shot, tool_prefill, tool_format: how a token-level backend prompts."""
    return cfg.prompting["few_shot"], cfg.prompting["tool_prefill"], cfg.prompting["tool_format"]


BACKENDS: dict[str, Callable[..., AgentBackend]] = {
    "local": _local_backend, "completions": _completions_backend, "chat": _chat_backend}


def build_backend(cfg: RunConfig, model_and_tokenizer=None) -> AgentBackend:
    """The agent backend `cfg.backend` names."""
    return BACKENDS[cfg.backend](cfg, model_and_tokenizer)


def price_of(cfg: RunConfig) -> Callable[[dict[str, dict[str, int]]], float | None]:
    """Cost of an episode's usage from --price MODEL=IN,OUT (USD per million tokens)."""
    agent_price = cfg.prices.get(cfg.model)
    user_price = cfg.prices.get(cfg.user_model or "")

    def price(usage: dict[str, dict[str, int]]) -> float | None:
        total, known = 0.0, False
        for role, p in (("agent", agent_price), ("user", user_price)):
            if p and role in usage:
                known = True
                total += (usage[role]["prompt_tokens"] * p[0] + usage[role]["completion_tokens"] * p[1]) / 1e6
        return round(total, 8) if known else None

    return price


def user_maker(cfg: RunConfig) -> Callable[[dict[str, Any]], ScriptedUser | LLMUser]:
    """task -> its simulated user; LLM users of one run share one set of endpoints."""
    if cfg.user == "scripted":
        return ScriptedUser.for_task
    endpoints = Endpoints(cfg.user_urls, cfg.api_key, cfg.timeout, RetryPolicy(attempts=cfg.retries))
    return lambda task: LLMUser(endpoints, cfg.user_model, task["user"]["instruction"], seed=cfg.seed)


def attempt_record(graded: dict) -> dict:
    """The attempt record of a graded episode, built through the schema's Struct (field names and
    the reward/status rule are checked here; values are passed as recorded)."""
    return msgspec.to_builtins(Attempt(
        task_id=graded["task_id"], domain=graded["domain"], attempt=graded["attempt"],
        reward=graded["reward"], status=graded["status"], model=graded["policy"].get("model"),
        usage=graded["usage"], cost_usd=graded["cost_usd"], episode_id=graded["episode_id"],
        error=graded.get("error"), prompting=prompting.of(graded["policy"])))


# -- running --------------------------------------------------------------------------------------

OnEpisode = Callable[[dict[str, Any], dict[str, Any]], Awaitable[Any] | Any]


async def run_all(keys: list[tuple[dict, int]], cfg: RunConfig, domains: Domains,
                  backend: AgentBackend, on_episode: OnEpisode, progress: Progress) -> None:
    """Run every (task, attempt) with at most cfg.jobs in flight; `on_episode(task, episode)` is
    called as each finishes (its output is written there, one line at a time) and may return the
    record it wrote (a graded one counts rewards in the progress line)."""
    gate = asyncio.Semaphore(cfg.jobs)
    price = price_of(cfg)
    policy = cfg.policy()
    make_user = user_maker(cfg)

    async def one(task: dict[str, Any], attempt: int) -> None:
        async with gate:
            spec = EpisodeSpec(task, domains[task["domain"]], attempt, policy, cfg.max_turns)
            episode = await run_episode(spec, backend, make_user(task), price)
        result = on_episode(task, episode)
        if asyncio.iscoroutine(result):
            result = await result
        _advance(progress, result or episode)

    try:
        await asyncio.gather(*(one(t, a) for t, a in keys))
    finally:
        await close_endpoints()


EPISODE_COUNTS = ("ok", "system_error")
ATTEMPT_COUNTS = ("reward 1", "reward 0", "system_error")


def _advance(progress: Progress, record: dict[str, Any]) -> None:
    progress.advance(episode_counts(record), episode_tokens(record))


def run_episodes(keys: list[tuple[dict, int]], cfg: RunConfig, domains: Domains,
                 backend: AgentBackend | None, on_episode: OnEpisode,
                 what: str = "rollout", quiet: bool = False,
                 counts: tuple[str, ...] = EPISODE_COUNTS) -> None:
    """Run every key in this process's event loop or, with cfg.procs > 1, split over that many
    forked processes. Either way `on_episode(task, episode)` runs here, in this process, as each
    episode finishes, so outputs are written by one process one line at a time. Progress and a
    summary line go to stderr (core.progress) unless `quiet`."""
    progress = Progress(len(keys), what, quiet=quiet, counts=counts)
    internal: list[str] = []

    def written(task: dict[str, Any], episode: dict[str, Any]):
        if (episode.get("error") or {}).get("kind") == "internal":
            internal.append(episode["episode_id"])
        return on_episode(task, episode)

    try:
        if cfg.procs <= 1 or len(keys) <= 1:
            asyncio.run(run_all(keys, cfg, domains, backend, written, progress))
        else:
            _run_forked(keys, cfg, domains, backend, written, progress)
    finally:
        progress.close()
    if internal:
        raise EndstateError(f"{len(internal)} episode(s) hit an internal error, e.g. {internal[0]}: "
                            "they are written as system_error (kind internal), the traceback is above; "
                            "please report it. The other episodes are complete.", ExitCode.INTERNAL)


def _run_forked(keys, cfg, domains, backend, on_episode: OnEpisode, progress: Progress) -> None:
    """One event loop per process: past ~2,000 model calls a second one core is the limit
    (docs/rollout.md). Each worker gets every procs-th key and -j/procs episodes in flight
    (rounded up). Workers are forked (they inherit domains, tasks and the backend, and open
    their own sockets and seed connections) and send finished episodes back through pipes."""
    import multiprocessing
    from multiprocessing.connection import wait

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # a forked tokenizer must not thread
    stdio.flush()  # a worker flushes inherited buffers when it exits: nothing may be left in them
    context = multiprocessing.get_context("fork")
    procs = min(cfg.procs, len(keys))
    worker_cfg = dataclasses.replace(cfg, jobs=max(1, -(-cfg.jobs // procs)), procs=1)
    tasks = {(t["id"], a): t for t, a in keys}
    workers = {}
    for i in range(procs):
        receive, send = context.Pipe(duplex=False)
        inherited = [*workers, receive]  # read ends the fork copies: the worker closes them
        worker = context.Process(target=_worker, name=f"endstate-episodes-{i}", daemon=True,
                                 args=(keys[i::procs], worker_cfg, domains, backend, send, inherited))
        worker.start()
        send.close()
        workers[receive] = worker
    try:
        while workers:
            for receive in wait(list(workers)):
                try:
                    message = receive.recv_bytes()
                except EOFError:  # the worker is done, or died
                    worker = workers.pop(receive)
                    worker.join()
                    if worker.exitcode:
                        raise EndstateError(f"{worker.name} died (exit code {worker.exitcode}); the "
                                            "episodes written so far are kept: --resume to go on") from None
                    continue
                if message.startswith(b"!"):
                    raise EndstateError(message[1:].decode())
                episode = orjson.loads(message)
                written = on_episode(tasks[(episode["task_id"], episode["attempt"])], episode)
                _advance(progress, written or episode)
    finally:
        for worker in workers.values():
            worker.terminate()
        for worker in workers.values():
            worker.join()


def _worker(keys, cfg: RunConfig, domains: Domains, backend, send, inherited) -> None:
    # Ctrl-C reaches the whole process group: the parent stops the workers, they do not stop themselves.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for receive in inherited:  # only the parent may read the pipes, so a dead parent breaks them
        receive.close()

    def report(task: dict[str, Any], episode: dict[str, Any]) -> None:
        send.send_bytes(orjson.dumps(episode))  # BrokenPipeError once the parent is gone: we stop

    try:
        asyncio.run(run_all(keys, cfg, domains, backend, report, Progress(0, "", quiet=True)))
    except BrokenPipeError:  # the parent is gone (killed): nobody to tell
        raise SystemExit(1) from None
    except Exception as e:  # the parent stops the run with this message
        send.send_bytes(b"!" + (str(e) if isinstance(e, EndstateError) else f"{type(e).__name__}: {e}").encode())
        raise SystemExit(1) from None
