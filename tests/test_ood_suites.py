"""The out-of-distribution benchmark (tasks/ood): per domain, bench tasks of every kind, all sound,
and no training task of that domain anywhere in tasks/; its generator of training candidates (for
the opposite experiment) reproduces its output byte for byte, every candidate sound and sharing
nothing with the bench."""

import hashlib
import json
import subprocess
import sys
from dataclasses import dataclass
from functools import cache

import pytest
from conftest import ROOT, read_jsonl

from endstate.grade.validate import validate_task


@dataclass(frozen=True)
class Suite:
    domain: str
    # sha256 of the generator's output: the candidates are not committed (no training pool may
    # hold an out-of-distribution domain's tasks), so this pins them byte for byte instead
    train_sha256: str
    max_writes: int  # the most writing gold calls of one bench task, at least
    customers: tuple[str, str] | None = None  # id prefixes of the bench's and the train's customers


SUITES = [Suite("insurance", "f47c1729b599ccf23ecc4e0279b400439c2d3c9fefe401169bed6614262911a5", 3,
                ("C9", "C8")),
          Suite("consulting", "afc7697f41451c4973bb591cd8b5190084fc8377f636977997cf85ee8dde992b", 2)]


@cache
def generated(domain: str) -> bytes:
    generator = ROOT / "tasks" / "templates" / f"{domain}.py"
    return subprocess.run([sys.executable, str(generator)], capture_output=True, check=True).stdout


@pytest.mark.parametrize("suite", SUITES, ids=lambda s: s.domain)
def test_bench_is_out_of_distribution_and_covers_the_kinds(suite, domains, grader):
    bench = read_jsonl(ROOT / "tasks" / "ood" / f"{suite.domain}.jsonl")
    assert len(bench) >= 25 and {t["split"] for t in bench} == {"ood"}
    assert not any(t["domain"] == suite.domain for p in (ROOT / "tasks").glob("*/*.jsonl")
                   if p.parent.name != "ood" for t in read_jsonl(p))  # no training task anywhere
    tools = domains[suite.domain].tools
    writes = [sum(1 for s in t["gold"] if "tool" in s and tools[s["tool"]].writes) for t in bench]
    assert sum("single-call" in t["tags"] for t in bench) >= 3 and max(writes) >= suite.max_writes
    assert sum("policy-trap" in t["tags"] for t in bench) >= 12
    assert sum(any(c["kind"] == "judge" for c in t["checks"]) for t in bench) >= 2
    if suite.customers:
        assert all(c["id"].startswith(suite.customers[0]) for t in bench
                   for c in t["init"]["customers"])
    verdicts = [validate_task(grader, t) for t in bench]
    assert [v["task_id"] for v in verdicts if not v["sound"]] == []


@pytest.mark.parametrize("suite", SUITES, ids=lambda s: s.domain)
def test_generator_is_reproducible_and_every_candidate_is_sound(suite, grader):
    out = generated(suite.domain)
    assert hashlib.sha256(out).hexdigest() == suite.train_sha256
    train = [json.loads(line) for line in out.splitlines()]
    templates = {tag for t in train for tag in t["tags"] if tag.startswith("template:")}
    assert len(train) >= 100 and len(templates) >= 8 and {t["split"] for t in train} == {"train"}
    assert sum("single-call" in t["tags"] for t in train) >= 20
    verdicts = [validate_task(grader, t) for t in train]
    assert [v["task_id"] for v in verdicts if not v["sound"]] == []


@pytest.mark.parametrize("suite", SUITES, ids=lambda s: s.domain)
def test_candidates_share_no_id_entity_or_instruction_with_the_bench(suite):
    bench = read_jsonl(ROOT / "tasks" / "ood" / f"{suite.domain}.jsonl")
    train = [json.loads(line) for line in generated(suite.domain).splitlines()]
    ids = lambda t: {r["id"] for rows in t["init"].values() for r in rows if "id" in r}
    assert not {t["id"] for t in bench} & {t["id"] for t in train}
    assert not set().union(*map(ids, bench)) & set().union(*map(ids, train))
    norm = lambda t: " ".join(t["user"]["instruction"].casefold().split())
    assert not {norm(t) for t in bench} & {norm(t) for t in train}
    if suite.customers:
        assert all(c["id"].startswith(suite.customers[1]) for t in train
                   for c in t["init"]["customers"])
