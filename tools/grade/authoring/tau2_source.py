"""Reading a tau2-bench domain folder as it is published: the database (db.json, or db.toml read
as the JSON it is written as), the task file (tasks.json, else the one tasks*.json: telecom ships
tasks_small.json), the policy (policy.md or main_policy.md; banking_knowledge has none) and the
optional split_tasks.json; and the document as each task's init leaves it."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from endstate.core.errors import FileError, InputError


@dataclass
class Source:
    """A tau2 domain folder, read and checked."""

    folder: Path
    db_file: Path
    document: dict[str, Any]
    tasks_file: Path
    tasks: list[Any]
    policy: str
    splits: dict[str, str]  # tau2 task id -> split
    warnings: list[str] = field(default_factory=list)  # for the import's report


def _load(path: Path, loads: Callable[[bytes], Any] = orjson.loads) -> Any:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise FileError(f"{path}: not found; a tau2 domain folder holds db.json (or db.toml), "
                         "tasks.json and policy.md") from None
    try:
        if path.suffix == ".toml":  # read as the JSON it is written as: dates become ISO text
            return json.loads(json.dumps(tomllib.loads(data.decode()), default=_iso))
        return loads(data)
    except ValueError as e:  # the decoders' errors, and UnicodeDecodeError, are ValueErrors
        raise InputError(f"{path}: not valid {path.suffix[1:].upper()}: {e}") from None
    except RecursionError:
        raise InputError(f"{path}: nested too deep to read") from None


def _iso(value: Any) -> str:
    return value.isoformat()  # TOML's dates and times: what orjson writes for them


def _exact_json(data: bytes) -> Any:
    """JSON as seed.py reads it (integers past 64 bits stay exact, to be refused by name), minus
    NaN and Infinity, which are not JSON."""
    def refuse(constant: str):
        raise ValueError(f"{constant} is not a JSON number")
    return json.loads(data, parse_constant=refuse)


def read_source(folder: Path, tasks_file: Path | None = None,
                policy_file: Path | None = None) -> Source:
    db_file = next((folder / n for n in ("db.json", "db.toml") if (folder / n).exists()),
                   folder / "db.json")
    document = _load(db_file, _exact_json)
    if not isinstance(document, dict):
        raise InputError(f"{db_file}: the database must be a JSON object (collections by name), "
                         f"not a {type(document).__name__}")
    tasks_file = tasks_file or _tasks_file(folder)
    tasks = _load(tasks_file)
    if not isinstance(tasks, list):
        raise InputError(f"{tasks_file}: expected a JSON array of tasks, got "
                         f"{type(tasks).__name__}")
    warnings = []
    policy_file = policy_file or next((folder / n for n in ("policy.md", "main_policy.md")
                                       if (folder / n).exists()), None)
    if policy_file is None:  # tau2's banking_knowledge builds its policy from documents
        warnings.append(f"{folder}: no policy.md (nor main_policy.md): the agent gets no policy; "
                        "pass --policy FILE to give it one")
    try:
        policy = policy_file.read_bytes().decode() if policy_file else ""
    except FileNotFoundError:
        raise FileError(f"{policy_file}: not found (--policy)") from None
    except UnicodeDecodeError as e:
        raise InputError(f"{policy_file}: not UTF-8 text: {e}") from None
    return Source(folder, db_file, document, tasks_file, tasks, policy,
                  _splits(folder / "split_tasks.json"), warnings)


def _tasks_file(folder: Path) -> Path:
    """tasks.json, else the one tasks*.json there is (telecom ships tasks_small.json)."""
    if (folder / "tasks.json").exists():
        return folder / "tasks.json"
    found = sorted(folder.glob("tasks*.json"))
    if len(found) > 1:
        raise InputError(f"{folder}: several task files ({', '.join(f.name for f in found)}) and "
                         "no tasks.json: pass --tasks FILE to choose one")
    return found[0] if found else folder / "tasks.json"


def _splits(path: Path) -> dict[str, str]:
    """Each task's split: the smallest split listing it (tau2 also lists unions such as
    "train+test"), the first in the file on a tie."""
    if not path.exists():
        return {}
    raw = _load(path)
    if not isinstance(raw, dict) or not all(
            isinstance(ids, list) and all(isinstance(i, str) for i in ids) for ids in raw.values()):
        raise InputError(f"{path}: expected an object of split name -> array of task ids")
    by_size = sorted(raw.items(), key=lambda kv: len(kv[1]))  # stable: file order on ties
    splits: dict[str, str] = {}
    for name, ids in by_size:
        for task_id in ids:
            splits.setdefault(task_id, name)
    return splits


def updated(document: dict, update: dict) -> dict:
    """tau2's update of a document (objects merge key by key, anything else replaces), as a new
    document sharing what the update leaves alone with `document`."""
    out = dict(document)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(document.get(key), dict):
            out[key] = updated(document[key], value)
        else:
            out[key] = value
    return out


def init_documents(source: Source) -> list[dict]:
    """The document as each task's initialization_data.agent_data leaves it: its fields need
    columns too (a task may set a field, or fill a collection, the seed does not hold)."""
    out = []
    for raw in source.tasks:
        state = raw.get("initial_state") if isinstance(raw, dict) else None
        data = ((state.get("initialization_data") if isinstance(state, dict) else None) or {})
        agent = data.get("agent_data") if isinstance(data, dict) else None
        if isinstance(agent, dict) and agent:
            out.append(updated(source.document, agent))
    return out
