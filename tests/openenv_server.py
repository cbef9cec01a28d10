"""`rollout serve-openenv`'s app served in the test's own process (uvicorn on a thread), so a
test can look at what its sessions hold; the same app and shared state the command serves."""

from __future__ import annotations

import threading
import time
from typing import Self

import uvicorn

from endstate.core.env.domain import Domains
from endstate.core.grading.grader import Grader
from endstate.rollout.gateway import listen
from endstate.rollout.openenv_cmd import openenv_app, served_tasks
from endstate.rollout.serve_cmd import SessionMaker, UserSide


class Server:
    """The environment served in this process (uvicorn on a thread), so a test can look at what
    the sessions hold."""

    def __init__(self, tasks: list[dict], max_sessions: int = 8, save_file=None,
                 domain_folders: tuple[str, ...] = (), llm_user_url: str | None = None):
        domains = Domains(list(domain_folders))
        side = UserSide(model="openenv-test", user_kind="llm" if llm_user_url else "scripted",
                        user_urls=(llm_user_url,) if llm_user_url else (),
                        user_model="user-llm" if llm_user_url else None,
                        user_key_env="ENDSTATE_USER_API_KEY", timeout=10, retries=1, prices={},
                        preflight=False)
        self.served = served_tasks(tasks, domains, SessionMaker(side.run_config(), "openenv"),
                                   Grader(domains), save_file)
        self.app = openenv_app(self.served, max_sessions=max_sessions, session_timeout=None)

    def __enter__(self) -> Self:
        sock = listen("127.0.0.1:0")
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        self.uvicorn = uvicorn.Server(uvicorn.Config(self.app, log_level="warning"))
        self.thread = threading.Thread(target=self.uvicorn.run, kwargs={"sockets": [sock]},
                                       daemon=True)
        self.thread.start()
        while not self.uvicorn.started:
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.uvicorn.should_exit = True
        self.thread.join(10)
