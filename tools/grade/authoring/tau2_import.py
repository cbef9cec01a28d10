"""`grade import tau2 DIR --out FOLDER`: a tau2-bench domain folder (db.json or db.toml,
tasks.json, policy.md, optional split_tasks.json) as an endstate domain folder and task file.

Translated: the database document (tables by endstate.core.env.nested's mapping, seeded from a copy of
the document), the policy, and each task's reference actions (gold calls), the user scenario (the
LLM user's instruction, after a fixed opening), the split and the source id (tag
`source:tau2:<id>`). The reward basis decides the checks, since in tau2 only the listed
components gate the reward: DB -> gold_state, COMMUNICATE -> said, NL_ASSERTION -> judge,
ACTION -> a python check per action. Not translated: tools (code: tools.py gets typed stubs), and
tasks that need what endstate does not model (user-side tools and env assertions, setup actions,
a message history): those are skipped, each with its reason, never graded more leniently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from endstate.core.env.nested import Mapping, MappingError, TableMap, document_rows
from endstate.core.errors import InputError
from endstate.core.records.schemas import problem
from endstate.grade.authoring.tau2_source import Source, updated

REWARD_TYPES = ("DB", "COMMUNICATE", "NL_ASSERTION", "ACTION", "ENV_ASSERTION")
CRITERIA = "evaluation_criteria"
CRITERIA_KEYS = {"actions", "env_assertions", "communicate_info", "nl_assertions", "reward_basis"}
DEFAULT_BASIS = ["DB", "COMMUNICATE"]  # tau2's default, as in the original tau-bench
OPENING = "Hi, I need some help, please."
# A task its own notes call wrong (tau2 keeps such tasks and says so in their description): tagged,
# so that `grade tasks --tag` can leave them out of a pool or a report.
KNOWN_BAD = "known-bad"
# A task whose tau2 user may act through tools (banking_knowledge) though its gold needs none of
# their calls: imported, since the agent's end state is graded as in tau2, and tagged, since
# endstate's simulated user cannot make those calls.
USER_TOOLS = "tau2:user-tools"
KNOWN_BAD_TEXT = re.compile(r"known[ -](bad|issue|problem|bug)|\b(incorrect|wrong|broken|buggy) "
                            r"(gold|annotation|ground[ -]truth|label|task)|\bmislabel", re.I)
# tau2's TaskIssueStatus: a task's `issues` record problems its authors found (or discussed), open
# until resolved or left as they are (wont_fix). Each status is a tag; an open issue also makes the
# task known-bad, since tau2 itself says something about it is wrong.
ISSUE_STATUSES = ("open", "resolved", "wont_fix")
ISSUE_TAG = "tau2:issue:"
INSTRUCTION_PARTS = (("reason_for_call", "Why you are contacting support"),
                     ("known_info", "What you know"), ("unknown_info", "What you do not know"),
                     ("task_instructions", "How to act"))


@dataclass
class Converted:
    tasks: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (tau2 id, why)
    calls: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # tool -> gold arguments
    action_checks: bool = False  # some task needs checks.py's tau2_action
    vacuous: list[str] = field(default_factory=list)  # ids of tasks an idle agent passes
    issues: dict[str, list[str]] = field(default_factory=dict)  # tau2 id -> its issues' statuses
    documents: list[str] = field(default_factory=list)  # ids of tasks that cite a knowledge base


def task_notes(description: Any) -> str:
    """tau2's task description (purpose, relevant policies, notes) as the task's notes."""
    if isinstance(description, str):
        return description.strip()
    if not isinstance(description, dict):
        return ""
    return "\n".join(f"{key.replace('_', ' ')}: {value.strip() if isinstance(value, str) else value}"
                     for key, value in description.items() if value not in (None, "", [], {}))


def task_issues(raw: dict, where: str) -> list[dict[str, Any]]:
    """tau2's `issues` of a task, checked: objects with an `id`, a `title` and a `status` (open
    when not given); each gets its status filled in."""
    checked = []
    for at, issue in _objects(raw, "issues", where):
        _get(issue, "id", str, where, at)
        _get(issue, "title", str, where, at)
        status = issue.get("status") or "open"
        if status not in ISSUE_STATUSES:
            raise InputError(f"{where}: {at}.status: expected one of {', '.join(ISSUE_STATUSES)}, "
                             f"got {status!r}")
        checked.append({**issue, "status": status})
    return checked


def issue_notes(issues: list[dict[str, Any]]) -> list[str]:
    """One line per issue: `issue ID (status): title - description; resolution: ...`."""
    def line(text: Any) -> str:
        return " ".join(str(text).split())

    return [f"issue {line(i['id'])} ({i['status']}): {line(i['title'])}"
            + (f" - {line(i['description'])}" if i.get("description") else "")
            + (f"; resolution: {line(i['resolution'])}" if i.get("resolution") else "")
            for i in issues]


def labels(raw: dict, issues: list[dict[str, Any]]) -> tuple[list[str], str]:
    """A task's tags and notes: its source id, known-bad when its description calls it wrong or
    an issue is open, a tag per status of its issues, user tools; the description and issues."""
    described = task_notes(raw.get("description"))
    statuses = [s for s in ISSUE_STATUSES if any(i["status"] == s for i in issues)]
    known_bad = KNOWN_BAD_TEXT.search(described) or "open" in statuses
    tags = [f"source:tau2:{raw['id']}", *([KNOWN_BAD] if known_bad else []),
            *(ISSUE_TAG + s for s in statuses), *([USER_TOOLS] if raw.get("user_tools") else [])]
    return tags, "\n".join([*([described] if described else []), *issue_notes(issues)])


class Skip(Exception):
    """A task that cannot be translated faithfully; the message says why."""


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _get(obj: dict, key: str, kinds: type | tuple, where: str, path: str = "",
         required: bool = True) -> Any:
    """obj[key], checked; errors read `FILE: task 'ID': path.key: what is wrong`."""
    value = obj.get(key)
    if value is None:
        if required:
            raise InputError(f"{where}: {path + ': ' if path else ''}missing key {key!r}")
        return None
    if not isinstance(value, kinds):
        want = " or ".join(k.__name__ for k in (kinds if isinstance(kinds, tuple) else (kinds,)))
        raise InputError(f"{where}: {_join(path, key)}: expected {want}, got "
                         f"{type(value).__name__}")
    return value


def _objects(obj: dict, key: str, where: str, path: str = "") -> list[tuple[str, dict]]:
    """obj[key], an array of objects (none when absent), as (path of each, the object)."""
    at = _join(path, key)
    items = _get(obj, key, list, where, path, required=False) or []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise InputError(f"{where}: {at}[{i}]: expected an object, got {type(item).__name__}")
    return [(f"{at}[{i}]", item) for i, item in enumerate(items)]


def user_instruction(scenario: dict, where: str) -> str:
    """The LLM user's private instruction: tau2's persona and scenario, each part headed."""
    parts = []
    persona = _get(scenario, "persona", str, where, "user_scenario", required=False)
    if persona and persona.strip():
        parts.append(("Who you are", persona))
    instructions = _get(scenario, "instructions", (dict, str), where, "user_scenario")
    if isinstance(instructions, str):
        parts.append(("Your situation", instructions))
    else:
        for key, heading in INSTRUCTION_PARTS:
            required = key in ("reason_for_call", "task_instructions")
            text = _get(instructions, key, str, where, "user_scenario.instructions", required)
            if text and text.strip():
                parts.append((heading, text))
    return "\n\n".join(f"{heading}:\n{text.strip()}" for heading, text in parts)


def _actions(criteria: dict, where: str) -> list[dict[str, Any]]:
    actions = []
    for at, action in _objects(criteria, "actions", where, CRITERIA):
        _get(action, "name", str, where, at)
        _get(action, "arguments", dict, where, at)
        _get(action, "compare_args", list, where, at, required=False)
        if action.get("requestor", "assistant") not in ("assistant", "user"):
            raise InputError(f"{where}: {at}.requestor: expected 'assistant' or 'user', got "
                             f"{action['requestor']!r}")
        actions.append(action)
    return actions


def _basis(criteria: dict, where: str) -> list[str]:
    basis = criteria.get("reward_basis")
    basis = DEFAULT_BASIS if basis is None else basis
    if not isinstance(basis, list):
        raise InputError(f"{where}: {CRITERIA}.reward_basis: expected an array, got "
                         f"{type(basis).__name__}")
    unknown = [b for b in basis if b not in REWARD_TYPES]
    if unknown:
        raise InputError(f"{where}: {CRITERIA}.reward_basis: unknown reward type "
                         f"{unknown[0]!r}; endstate knows {', '.join(REWARD_TYPES)}")
    return basis


def _initial_state(raw: dict, where: str) -> tuple[dict, dict]:
    """(initial_state, its initialization_data), checked down to agent_data; {} when absent."""
    state = _get(raw, "initial_state", dict, where, required=False) or {}
    data = _get(state, "initialization_data", dict, where, "initial_state", required=False) or {}
    _get(data, "agent_data", dict, where, "initial_state.initialization_data", required=False)
    return state, data


def _untranslatable(raw: dict, actions: list[dict], basis: list[str], criteria: dict,
                    where: str) -> None:
    """Raise Skip with the first thing the task needs that endstate does not model, the user's
    side first (what most such tasks are about)."""
    state, data = _initial_state(raw, where)
    setup = state.get("initialization_actions") or []
    user_setup = sorted({a.get("func_name", "?") for a in setup
                         if isinstance(a, dict) and a.get("env_type") == "user"})
    if user_setup:
        raise Skip(f"initialization_actions on the user's side ({', '.join(user_setup)}): the "
                   "user's device state; endstate's simulated users have no tools or state")
    if data.get("user_data"):
        raise Skip("initial_state.initialization_data.user_data: the user's device state; "
                   "endstate's users have no tools or state")
    user_calls = sorted({a["name"] for a in actions if a.get("requestor", "assistant") == "user"})
    if user_calls:
        raise Skip(f"actions the user makes ({', '.join(user_calls)}): endstate's simulated users "
                   "have no tools")
    if "ENV_ASSERTION" in basis and criteria.get("env_assertions"):
        raise Skip("ENV_ASSERTION in reward_basis: env assertions are tau2 code, not data; "
                   "grading without them would be more lenient than tau2")
    if setup:
        raise Skip("initial_state.initialization_actions: setup calls on tau2's environment; "
                   "endstate sets a task up with rows (init): write them as the task's init")
    if state.get("message_history"):
        raise Skip("initial_state.message_history: endstate starts every episode at the opening")


def _checks(criteria: dict, actions: list[dict], basis: list[str], where: str) -> list[dict]:
    checks: list[dict[str, Any]] = []
    if "DB" in basis:
        checks.append({"id": "db", "kind": "gold_state"})
    if "COMMUNICATE" in basis:
        infos = _get(criteria, "communicate_info", list, where, CRITERIA, required=False) or []
        for i, info in enumerate(infos):
            if not isinstance(info, (str, int, float)) or isinstance(info, bool):
                raise InputError(f"{where}: {CRITERIA}.communicate_info[{i}]: expected a "
                                 f"string, got {type(info).__name__}")
            checks.append({"id": f"communicate-{i}", "kind": "said", "value": str(info)})
    if "NL_ASSERTION" in basis:
        for i, text in enumerate(_get(criteria, "nl_assertions", list, where, CRITERIA,
                                      required=False) or []):
            if not isinstance(text, str):
                raise InputError(f"{where}: {CRITERIA}.nl_assertions[{i}]: expected a string, got "
                                 f"{type(text).__name__}")
            checks.append({"id": f"nl-{i}", "kind": "judge",
                           "question": f"Is this true of the agent in the transcript? {text}"})
    if "ACTION" in basis:
        for i, action in enumerate(actions):
            params = {"name": action["name"], "arguments": action["arguments"]}
            if action.get("compare_args") is not None:
                params["compare_args"] = action["compare_args"]
            checks.append({"id": f"action-{i}", "kind": "python", "name": "tau2_action",
                           "params": params})
    return checks


class Converter:
    """tau2 tasks -> endstate tasks of domain `domain`, on the tables of `mapping`."""

    def __init__(self, source: Source, domain: str, mapping: Mapping):
        self.source, self.domain, self.mapping = source, domain, mapping
        self._seed_rows: dict[str, dict[tuple, tuple]] | None = None

    def convert(self) -> Converted:
        out = Converted()
        seen: set[str] = set()
        for i, raw in enumerate(self.source.tasks):
            where = f"{self.source.tasks_file}: task #{i}"
            if not isinstance(raw, dict):
                raise InputError(f"{where}: expected an object, got {type(raw).__name__}")
            task_id = _get(raw, "id", str, where)
            if task_id in seen:
                raise InputError(f"{where}: duplicate id {task_id!r}")
            seen.add(task_id)
            try:
                out.tasks.append(self.task(raw, f"{self.source.tasks_file}: task {task_id!r}", out))
            except Skip as why:
                out.skipped.append((task_id, str(why)))
        return out

    def task(self, raw: dict, where: str, out: Converted) -> dict[str, Any]:
        instruction = user_instruction(_get(raw, "user_scenario", dict, where), where)
        issues = task_issues(raw, where)
        criteria = _get(raw, "evaluation_criteria", dict, where, required=False)
        if criteria is None:
            raise Skip("no evaluation_criteria: nothing decides its reward")
        unknown = sorted(set(criteria) - CRITERIA_KEYS)
        if unknown:
            raise InputError(f"{where}: {CRITERIA}: unknown key {unknown[0]!r}; endstate "
                             f"translates {', '.join(sorted(CRITERIA_KEYS))} and never drops a "
                             "criterion")
        actions, basis = _actions(criteria, where), _basis(criteria, where)
        _untranslatable(raw, actions, basis, criteria, where)
        checks = _checks(criteria, actions, basis, where)
        if not checks:
            raise Skip(f"reward_basis {basis} leaves nothing to check in this task")
        gold: list[dict[str, Any]] = [{"tool": a["name"], "args": a["arguments"]} for a in actions]
        said = [c["value"] for c in checks if c["kind"] == "said"]
        if said:  # tau2 has no reference messages: the gold says exactly what must be said
            gold.append({"say": "\n".join(said)})
        init = self.init(raw)
        for a in actions:
            out.calls.setdefault(a["name"], []).append(a["arguments"])
        out.action_checks |= any(c["kind"] == "python" for c in checks)
        if raw.get("required_documents"):
            out.documents.append(raw["id"])
        if not actions and all(c["kind"] == "gold_state" for c in checks):
            out.vacuous.append(raw["id"])  # tau2 scores doing nothing 1 here; validate will say so
        task_id = raw["id"]
        if issues:
            out.issues[task_id] = [i["status"] for i in issues]
        tags, notes = labels(raw, issues)
        task = {"id": f"{self.domain}-{task_id}", "domain": self.domain,
                **({"split": self.source.splits[task_id]} if task_id in self.source.splits else {}),
                "tags": tags, **({"notes": notes} if notes else {}),
                "user": {"instruction": instruction, "opening": OPENING},
                **({"init": init} if init else {}), "checks": checks, "gold": gold}
        wrong = problem("task", task)
        assert wrong is None, f"built an invalid task from {where}: {wrong}"
        return task

    def init(self, raw: dict) -> dict[str, list[dict[str, Any]]]:
        """tau2's initialization_data.agent_data (a deep update of the document) as init rows:
        each row it adds, whole, and each row it changes, as its key and changed columns."""
        data = ((raw.get("initial_state") or {}).get("initialization_data") or {}).get("agent_data")
        if not data:
            return {}
        try:
            changed = document_rows(updated(self.source.document, data), self.mapping)
        except MappingError as e:
            raise Skip("initialization_data.agent_data does not fit the tables: "
                       f"{e.message}") from None
        init: dict[str, list[dict[str, Any]]] = {}
        for table, rows in changed.items():
            t, before = self.mapping.by_name[table], self.seed_rows()[table]
            after = _by_key(t, rows)
            if before.keys() - after.keys():
                raise Skip(f"initialization_data.agent_data removes rows of {table}; init can "
                           "only insert or update rows")
            written = [_init_row(t, before.get(key), row) for key, row in after.items()
                       if before.get(key) != row]
            if written:
                init[table] = written
        return init

    def seed_rows(self) -> dict[str, dict[tuple, tuple]]:
        if self._seed_rows is None:
            self._seed_rows = {
                table: _by_key(self.mapping.by_name[table], rows)
                for table, rows in document_rows(self.source.document, self.mapping).items()}
        return self._seed_rows


def _by_key(t: TableMap, rows: list[tuple]) -> dict[tuple, tuple]:
    at = [t.columns.index(c) for c in t.key_columns]
    return {tuple(row[i] for i in at): row for row in rows}


def _init_row(t: TableMap, before: tuple | None, after: tuple) -> dict[str, Any]:
    """A new row whole; a changed one as its key and the columns that changed (init updates)."""
    if before is None:
        return dict(zip(t.columns, after))
    keys = set(t.key_columns)
    return {c: a for c, b, a in zip(t.columns, before, after) if c in keys or a != b}
