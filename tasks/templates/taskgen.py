"""What every template script builds the same way: gold steps, check records, the scene that
collects a task's rows, the task record, and the JSONL on stdout. A script adds only its domain's
entities and templates.

The scripts import this module by name, from their own folder: run as `python
tasks/templates/NAME.py` that folder is on sys.path already; under runpy (tests) the script puts it
there. Check records keep their keys in the order the committed task files have them.
"""

from __future__ import annotations

import importlib.util
import json
import random
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

DOMAINS = Path(__file__).resolve().parents[2] / "domains"


def domain_seed(domain: str) -> ModuleType:
    """The domain's seed.py as a module, so that a script samples from the same constants (cities,
    categories, rate caps) and the two cannot drift apart."""
    spec = importlib.util.spec_from_file_location(f"{domain}_seed", DOMAINS / domain / "seed.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- gold steps and the simulated user ----------------------------------------------------------

def call(tool: str, *, free: tuple[str, ...] = (), **args: Any) -> dict:
    """A gold tool call. `free`: its arguments whose value is the agent's to choose (a summary's
    wording), which `grade validate` does not ask a check to notice a change of."""
    step = {"tool": tool, "args": args}
    if free:
        step["free"] = list(free)
    return step


def say(text: str) -> dict:
    return {"say": text}


def user(instruction: str, opening: str, script: list[str]) -> dict:
    return {"instruction": instruction, "opening": opening, "script": script}


def money(x: float) -> str:
    return f"${x:,.2f}"


def ts(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S")


# -- checks (the kinds are documented in docs/authoring.md) -------------------------------------

def approx(x: float) -> dict:
    return {"approx": x, "tol": 0.005}


def row(check_id: str, table: str, where: dict, expect: dict) -> dict:
    return {"id": check_id, "kind": "row", "table": table, "where": where, "expect": expect}


def said(check_id: str, value: Any) -> dict:
    return {"id": check_id, "kind": "said", "value": value}


def judge(check_id: str, question: str) -> dict:
    """A YES/NO question to the judge about what the agent told the user: what the database
    cannot show (that a refusal was explained, a card named), so that training's reward has such
    checks in the mix as the study's has."""
    return {"id": check_id, "kind": "judge", "question": question}


def python_check(check_id: str, name: str, **params: Any) -> dict:
    """A named check of the domain's checks.py."""
    return {"id": check_id, "kind": "python", "name": name, "params": params}


def allow(table: str, where: dict | None = None, count: int = 1) -> dict:
    """One entry of an only_changes check: `count` changed rows of `table` matching `where`."""
    entry: dict[str, Any] = {"table": table}
    if where:
        entry["where"] = where
    if count != 1:
        entry["count"] = count
    return entry


def only(*allowed: dict, ignore: list[str] | None = None, check_id: str = "nothing-else") -> dict:
    """Nothing changed but the `allowed` entries (columns in `ignore` may change anywhere)."""
    check = {"id": check_id, "kind": "only_changes", "allow": list(allowed)}
    if ignore:
        check["ignore_columns"] = ignore
    return check


# -- tasks --------------------------------------------------------------------------------------

class Scene:
    """The rows one task adds on top of the seed, and the random source that samples them. A
    domain's subclass adds row builders; keys they keep on rows for the templates' use
    (HELPER_KEYS) stay out of the task's init."""

    HELPER_KEYS: tuple[str, ...] = ()

    def __init__(self, rng: random.Random, ids: Any):
        self.rng, self.ids, self.init = rng, ids, {}

    def add(self, table: str, row: dict) -> dict:
        self.init.setdefault(table, []).append(row)
        return row

    def rows(self) -> dict:
        return {table: [{k: v for k, v in r.items() if k not in self.HELPER_KEYS} for r in rows]
                for table, rows in self.init.items()}


def task(domain: str, template: str, n: int, tags: list[str], user: dict, init: dict,
         checks: list, gold: list) -> dict:
    return {"id": f"{domain}-train-{template}-{n:03d}", "domain": domain, "split": "train",
            "tags": [f"template:{template}", *tags], "user": user, "init": init,
            "checks": checks, "gold": gold}


def generate(domain: str, templates: dict[str, Callable[[Any], dict]], per_template: int,
             seed: int, scene: type[Scene], ids: Any) -> list[dict]:
    """`per_template` tasks of each template in turn, all drawn from one random source, so the
    file is the same on every run; `ids` hands out entity ids unique across the file. A template
    samples a fresh scene and returns the task's tags, user, checks and gold; the scene's rows
    become its init."""
    rng, tasks = random.Random(seed), []
    for name, template in templates.items():
        for n in range(1, per_template + 1):
            s = scene(rng, ids)
            body = template(s)
            tasks.append(task(domain, name, n, body["tags"], body["user"], s.rows(),
                              body["checks"], body["gold"]))
    return tasks


def print_jsonl(tasks: Iterable[dict]) -> None:
    for t in tasks:
        print(json.dumps(t, ensure_ascii=False))
