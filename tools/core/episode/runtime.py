"""Running episodes concurrently, the runtime rollout, probe and grpo share: at most -j in flight in
one event loop, or split over forked processes (--procs); each finished episode handed back to the
caller in this process. How they run: episode.config; which keys: episode.plan; one episode:
episode.loop."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

import msgspec

from endstate.core.agent.session import AgentBackend
from endstate.core.console import stdio
from endstate.core.console.progress import Progress, episode_counts, episode_tokens
from endstate.core.env.domain import Domains
from endstate.core.episode.config import RunConfig, UserMaker, price_of
from endstate.core.episode.loop import EpisodeSpec, run_episode
from endstate.core.errors import EndstateError, ExitCode
from endstate.core.records.structs import Episode, Task

# on_episode(task record, episode) -> the record it wrote, when that is graded (for the progress
# line), or None
OnEpisode = Callable[[dict[str, Any], Episode], Awaitable[dict[str, Any] | None] | dict[str, Any] | None]


class Closing(Protocol):
    """What holds connections on the run's event loop (a grader's judge): closed at its end."""

    def close(self) -> None: ...


async def run_all(keys: list[tuple[dict, int]], cfg: RunConfig, domains: Domains,
                  backend: AgentBackend, on_episode: OnEpisode, progress: Progress,
                  closing: Sequence[Closing] = ()) -> None:
    """Run every (task, attempt) with at most cfg.jobs in flight; `on_episode(task, episode)` is
    called as each finishes (its output is written there, one line at a time) and may return the
    record it wrote (a graded one counts rewards in the progress line); a coroutine it returns
    (grading with a judge) is awaited beside the other episodes. `closing` is closed at the end."""
    gate = asyncio.Semaphore(cfg.jobs)
    price = price_of(cfg)
    policy = cfg.policy()
    make_user = UserMaker(cfg)
    typed = {t["id"]: Task.of(t) for t, _ in keys}  # each task read once, not once per attempt

    async def one(task: dict[str, Any], attempt: int) -> None:
        async with gate:
            spec = EpisodeSpec(typed[task["id"]], domains[task["domain"]], attempt, policy, cfg.max_turns)
            episode = await run_episode(spec, backend, make_user(spec.task), price)
        written = on_episode(task, episode)
        if asyncio.iscoroutine(written):
            written = await written
        _advance(progress, episode, written)

    try:
        await asyncio.gather(*(one(t, a) for t, a in keys))
    finally:
        if backend is not None:  # none when there is nothing to run
            backend.close()
        make_user.close()
        for resource in closing:
            resource.close()


EPISODE_COUNTS = ("ok", "system_error")
ATTEMPT_COUNTS = ("reward 1", "reward 0", "system_error")


def _advance(progress: Progress, episode: Episode, written: dict[str, Any] | None) -> None:
    """Count an episode, or the graded record written for it, in the progress line."""
    if written is not None:
        progress.advance(episode_counts(written), episode_tokens(written))
        return
    agent = episode.usage.get("agent")
    progress.advance({episode.status: 1}, agent.completion_tokens if agent else 0)


def run_episodes(keys: list[tuple[dict, int]], cfg: RunConfig, domains: Domains,
                 backend: AgentBackend | None, on_episode: OnEpisode,
                 what: str = "rollout", quiet: bool = False,
                 counts: tuple[str, ...] = EPISODE_COUNTS, closing: Sequence[Closing] = ()) -> None:
    """Run every key in this process's event loop or, with cfg.procs > 1, split over that many
    forked processes. Either way `on_episode(task, episode)` runs here, in this process, as each
    episode finishes, so outputs are written by one process one line at a time. Progress and a
    summary line go to stderr (core.progress) unless `quiet`."""
    progress = Progress(len(keys), what, quiet=quiet, counts=counts)
    internal: list[str] = []

    def written(task: dict[str, Any], episode: Episode):
        if episode.error is not None and episode.error.kind == "internal":
            internal.append(episode.episode_id)
        return on_episode(task, episode)

    try:
        if cfg.procs <= 1 or len(keys) <= 1:
            asyncio.run(run_all(keys, cfg, domains, backend, written, progress, closing))
        else:
            _run_forked(keys, cfg, domains, backend, written, progress, closing)
    finally:
        progress.close()
    if internal:
        raise EndstateError(f"{len(internal)} episode(s) hit an internal error, e.g. {internal[0]}: "
                            "they are written as system_error (kind internal), the traceback is above; "
                            "please report it. The other episodes are complete.", ExitCode.INTERNAL)


def _run_forked(keys, cfg, domains, backend, on_episode: OnEpisode, progress: Progress,
                closing: Sequence[Closing]) -> None:
    """One event loop per process: past ~4,000 model calls a second one core is the limit
    (docs/rollout.md). Each worker gets every procs-th key and -j/procs episodes in flight
    (rounded up). Workers are forked (they inherit domains, tasks and the backend, and open
    their own sockets and seed connections) and send finished episodes back through pipes.
    Here, a coroutine `on_episode` returns (grading with a judge) runs on one loop of its own."""
    import multiprocessing
    from multiprocessing.connection import wait

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # a forked tokenizer must not thread
    stdio.flush()  # a worker flushes inherited buffers when it exits: nothing may be left in them
    context = multiprocessing.get_context("fork")
    procs = min(cfg.procs, len(keys))
    worker_cfg = dataclasses.replace(cfg, jobs=max(1, -(-cfg.jobs // procs)), procs=1,
                                     resolved_prompting=cfg.prompting)
    tasks = {(t["id"], a): t for t, a in keys}
    loop = asyncio.new_event_loop()
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
                episode = msgspec.json.decode(message, type=Episode)
                written = on_episode(tasks[(episode.task_id, episode.attempt)], episode)
                if asyncio.iscoroutine(written):
                    written = loop.run_until_complete(written)
                _advance(progress, episode, written)
    finally:
        for worker in workers.values():
            worker.terminate()
        for worker in workers.values():
            worker.join()
        for resource in closing:
            resource.close()
        loop.run_until_complete(asyncio.sleep(0))  # the closes it scheduled
        loop.close()


def _worker(keys, cfg: RunConfig, domains: Domains, backend, send, inherited) -> None:
    # Ctrl-C reaches the whole process group: the parent stops the workers, they do not stop themselves.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for receive in inherited:  # only the parent may read the pipes, so a dead parent breaks them
        receive.close()

    def report(task: dict[str, Any], episode: Episode) -> None:
        send.send_bytes(msgspec.json.encode(episode))  # BrokenPipeError once the parent is gone: we stop

    try:
        asyncio.run(run_all(keys, cfg, domains, backend, report, Progress(0, "", quiet=True)))
    except BrokenPipeError:  # the parent is gone (killed): nobody to tell
        raise SystemExit(1) from None
    except Exception as e:  # the parent stops the run with this message
        send.send_bytes(b"!" + (str(e) if isinstance(e, EndstateError) else f"{type(e).__name__}: {e}").encode())
        raise SystemExit(1) from None
