"""`grade new-domain NAME`: a small domain folder that runs and validates as written (two tables,
a read tool and a write tool, a policy, two sound tasks), for a person to make their own."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from string import Template

import orjson

from endstate.core.env.domain import Domain
from endstate.core.errors import EndstateError, ExitCode
from endstate.grade.authoring.staging import check_domain_name, staged

SCHEMA = """\
-- The tables of the $domain domain. Every table needs a PRIMARY KEY: an episode's diff names rows
-- by it. No BLOB columns. Replace these with your own (docs/authoring.md).
CREATE TABLE customers (
  id TEXT PRIMARY KEY,            -- C0001
  name TEXT NOT NULL,
  email TEXT NOT NULL UNIQUE,
  plan TEXT NOT NULL              -- basic | plus
);
CREATE TABLE requests (
  id TEXT PRIMARY KEY,            -- R00001, sequential
  customer_id TEXT NOT NULL REFERENCES customers(id),
  kind TEXT NOT NULL,             -- upgrade | downgrade
  note TEXT NOT NULL,
  created_at TEXT NOT NULL
);
"""

SEED = '''\
"""Seed of the $domain domain. endstate calls build(db, rng) once with rng = random.Random(0) and
caches the result by the digest of schema.sql, this file and anything under seed/: take every
random choice from rng, never from the clock. To load a data file instead, see docs/domains.md."""

import random
import sqlite3

from endstate.api import insert_rows

FIRST = ("Ada", "Ben", "Cleo", "Dev", "Eli", "Fay", "Gus", "Hana")
LAST = ("Abe", "Brandt", "Costa", "Diaz", "Eng", "Frey", "Gill", "Holm")


def build(db: sqlite3.Connection, rng: random.Random) -> None:
    customers = []
    for i in range(1, 41):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        customers.append((f"C{i:04d}", f"{first} {last}", f"{first}.{last}{i}@example.com".lower(),
                          rng.choice(("basic", "plus"))))
    insert_rows(db, customers=customers)
'''

TOOLS = '''\
"""Tools of the $domain domain: typed functions whose signature and docstring are what the agent
sees. Mark the ones that change the database @tool(writes=True); raise ToolError to tell the agent
why a call did not work."""

from typing import Literal

from endstate.api import Db, ToolError, tool

NOW = "2026-01-15T12:00:00"  # db.now: a fixed clock, so replaying calls gives the same rows


@tool
def find_customer(db: Db, email: str) -> dict:
    """Look up a customer by email: their id, name, plan and open requests.

    Args:
        email: The customer's email address.
    """
    customer = db.one("SELECT * FROM customers WHERE email = ?", email.strip().lower())
    if customer is None:
        raise ToolError(f"no customer with email {email}")
    customer["requests"] = db.all("SELECT id, kind, note FROM requests WHERE customer_id = ? "
                                  "ORDER BY id", customer["id"])
    return customer


@tool(writes=True)
def open_request(db: Db, customer_id: str, kind: Literal["upgrade", "downgrade"],
                 note: str) -> dict:
    """Open a request to change a customer's plan; the billing team handles it.

    Args:
        customer_id: The customer's id, such as "C0042".
        kind: upgrade (basic to plus) or downgrade (plus to basic).
        note: One sentence on what the customer asked for.
    """
    customer = db.get("customers", customer_id, "customer")
    if (kind == "upgrade") != (customer["plan"] == "basic"):
        raise ToolError(f"customer {customer_id} is on the {customer['plan']} plan; cannot {kind}")
    request_id = db.next_id("requests", "R", 5)  # sequential: replays give the same rows
    db.run("INSERT INTO requests VALUES (?, ?, ?, ?, ?)", request_id, customer_id, kind, note,
           db.now)
    return {"request_id": request_id}
'''

POLICY = """\
# $domain desk policy

You help customers of the $domain service with their plans. Today is 2026-01-15.

- Identify the customer by email before doing anything for them.
- Tell the customer what you will do and get their "yes" before opening a request.
- Customers on the basic plan may ask for an upgrade, customers on plus for a downgrade.
"""

def _tasks(domain: str) -> list[dict]:
    """A write checked by `row` and fenced by `only_changes`, and a read-only answer (`said`)."""
    upgrade = {
        "id": f"{domain}-upgrade", "domain": domain, "split": "example", "tags": ["single-write"],
        "user": {"instruction": "You are Ana Silva (ana.silva@example.com), on the basic plan. "
                                "You want to upgrade to plus.",
                 "opening": "Hi, I'd like to upgrade my plan.",
                 "script": ["ana.silva@example.com", "Yes, please go ahead."]},
        "init": {"customers": [{"id": "C9001", "name": "Ana Silva",
                                "email": "ana.silva@example.com", "plan": "basic"}]},
        "checks": [{"id": "upgrade-requested", "kind": "row", "table": "requests",
                    "where": {"customer_id": "C9001"}, "expect": {"kind": "upgrade"}},
                   {"id": "nothing-else", "kind": "only_changes",
                    "allow": [{"table": "requests", "where": {"customer_id": "C9001"}}]}],
        "gold": [{"tool": "find_customer", "args": {"email": "ana.silva@example.com"}},
                 {"tool": "open_request", "args": {"customer_id": "C9001", "kind": "upgrade",
                                                   "note": "Customer asked to upgrade to plus."},
                  "free": ["note"]}]}  # the note's words are the agent's: validate does not vary them
    which_plan = {
        "id": f"{domain}-which-plan", "domain": domain, "split": "example",
        "tags": ["said", "read-only"],
        "user": {"instruction": "You are Ben Okoro (ben.okoro@example.com). You want to know which "
                                "plan you are on; you do not want to change it.",
                 "opening": "Which plan am I on?",
                 "script": ["ben.okoro@example.com", "Thanks, that's all."]},
        "init": {"customers": [{"id": "C9002", "name": "Ben Okoro",
                                "email": "ben.okoro@example.com", "plan": "plus"}]},
        "checks": [{"id": "told-plan", "kind": "said", "value": "plus"},
                   {"id": "no-change", "kind": "only_changes", "allow": []}],
        "gold": [{"tool": "find_customer", "args": {"email": "ben.okoro@example.com"}},
                 {"say": "You are on the plus plan."}]}
    return [upgrade, which_plan]


FILES = {"schema.sql": SCHEMA, "seed.py": SEED, "tools.py": TOOLS, "policy.md": POLICY}


def new_domain(name: str, parent: Path) -> Path:
    """Write the scaffold for domain `name` into parent/name, which must not exist yet: whole or
    not at all, and loaded (tools, seed) before it is there."""
    check_domain_name(name, "NAME")
    folder = parent / name
    if folder.exists():
        raise EndstateError(f"{folder}: exists already; pick another NAME or --out DIR")
    with staged(folder) as tmp:
        (tmp / "tasks").mkdir()
        for file, text in FILES.items():
            (tmp / file).write_text(Template(text).substitute(domain=name))
        (tmp / "tasks" / f"{name}.jsonl").write_bytes(b"".join(orjson.dumps(t) + b"\n"
                                                           for t in _tasks(name)))
        try:
            written = Domain(name, tmp)
            written.tools
            written.build_seed()
        except (EndstateError, sqlite3.Error, SyntaxError) as e:
            raise EndstateError(f"internal error: the scaffold does not load ({e}); nothing was "
                                "written. Please report it.", ExitCode.INTERNAL) from None
    return folder


def next_steps(folder: Path, name: str) -> list[str]:
    tasks = folder / "tasks" / f"{name}.jsonl"
    return [(f"wrote {folder}: schema.sql, seed.py, tools.py (find_customer, open_request), "
             f"policy.md, {tasks.relative_to(folder)} (2 tasks)"),
            "next:",
            f"  grade validate --domains {folder} {tasks}   # both tasks are sound",
            f"  probe --domains {folder} {tasks} -n 2         # run the default agent on them",
            ("  then make it yours: the tables, the seed, the tools, the policy and the tasks "
             "(docs/authoring.md)")]
