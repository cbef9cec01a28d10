"""The built-in suites: bench is held out from train (by id and by content), the out-of-distribution
benchmark (split ood) has domains no other suite has a task of, and all are big enough. That every
built-in task is sound is test_grade.py::test_validate_builtin_tasks_are_sound."""

from collections import Counter

import pytest
from conftest import ROOT

from endstate.core.episode.leak import fingerprint
from endstate.core.records.jsonl import read_jsonl

DOMAINS = ("retail", "travel", "support", "bank")  # in distribution: train and bench
OOD_DOMAINS = ("insurance", "consulting")  # out of distribution: ood only
SPLITS = ("bench", "ood", "train")


@pytest.fixture(scope="module")
def suites():
    """split -> [(location, task)] from tasks/<split>/*.jsonl."""
    return {split: list(read_jsonl([str(p) for p in sorted((ROOT / "tasks" / split).glob("*.jsonl"))],
                                   "task"))
            for split in SPLITS}


def test_every_task_is_in_the_folder_of_its_split(suites):
    for split, located in suites.items():
        wrong = [str(loc) for loc, t in located if t.get("split") != split]
        assert not wrong, f"tasks whose split is not {split!r}: {wrong}"


def test_bench_and_train_share_no_task_id(suites):
    bench = {t["id"]: loc for loc, t in suites["bench"] + suites["ood"]}
    shared = [f"{loc}: {t['id']} (also {bench[t['id']]})" for loc, t in suites["train"] if t["id"] in bench]
    assert not shared


def test_bench_and_train_share_no_task_content(suites):
    """Content = domain, init, user instruction and opening, checks and gold, normalised (the
    fingerprint of the leak guard of bucket and grpo), so a renamed copy is caught too."""
    bench = {fingerprint(t): loc for loc, t in suites["bench"] + suites["ood"]}
    shared = [f"{loc}: {t['id']} has the content of {bench[fingerprint(t)]}"
              for loc, t in suites["train"] if fingerprint(t) in bench]
    assert not shared


def test_the_content_check_catches_a_renamed_and_reformatted_copy(suites):
    _, task = suites["bench"][0]
    copy = {**task, "id": "renamed", "split": "train", "tags": ["template:copy"],
            "user": {**task["user"], "instruction": "  " + task["user"]["instruction"].upper() + "\n"}}
    assert fingerprint(copy) == fingerprint(task)


def test_suite_sizes(suites):
    bench = Counter(t["domain"] for _, t in suites["bench"])
    train = Counter(t["domain"] for _, t in suites["train"])
    for domain in DOMAINS:
        assert bench[domain] >= 25, f"{domain}: {bench[domain]} bench tasks, want at least 25"
        assert train[domain] > 0, f"{domain}: no train tasks"
    assert sum(bench.values()) >= 120
    assert sum(train.values()) >= 400


def test_the_ood_benchmark_has_domains_no_other_suite_touches(suites):
    """Out of distribution means the domain's database and tools are in no training pool: no task
    of an ood domain outside the ood split, and no ood split in a trained domain."""
    ood = Counter(t["domain"] for _, t in suites["ood"])
    assert set(ood) == set(OOD_DOMAINS) and min(ood.values()) >= 25
    leaked = [f"{loc}: {t['id']}" for split in ("bench", "train") for loc, t in suites[split]
              if t["domain"] in OOD_DOMAINS]
    assert not leaked
    assert not set(ood) & set(DOMAINS)


def test_train_covers_at_least_15_templates_one_per_task(suites):
    templates = [[tag for tag in t.get("tags", []) if tag.startswith("template:")]
                 for _, t in suites["train"]]
    untagged = [str(loc) for (loc, _), tags in zip(suites["train"], templates) if len(tags) != 1]
    assert not untagged, f"train tasks without exactly one template:* tag: {untagged[:5]}"
    assert len({tags[0] for tags in templates}) >= 15


def test_each_trained_domain_trains_with_judge_checks_in_the_mix(suites):
    """As the study trains: at least 5% of each domain's training tasks carry a judge check (what
    the agent told the user, which the database cannot show)."""
    for domain in DOMAINS:
        train = [t for _, t in suites["train"] if t["domain"] == domain]
        judged = [t for t in train if any(c["kind"] == "judge" for c in t["checks"])]
        assert len(judged) >= 0.05 * len(train), f"{domain}: {len(judged)} of {len(train)} judged"


def test_training_on_judged_tasks_needs_a_judge_and_takes_one(tmp_path):
    from click.testing import CliRunner

    from endstate.grpo.cli import cli

    pool = str(ROOT / "tasks/train/retail.jsonl")
    args = ["train", "--pool", pool, "--out", str(tmp_path / "r"), "--dry-run"]
    refused = CliRunner().invoke(cli, args)
    assert refused.exit_code == 2
    assert "has a judge check: pass --judge-model and --judge-base-url" in refused.output
    judged = CliRunner().invoke(cli, [*args, "--judge-model", "judge", "--judge-base-url", "http://127.0.0.1:9/v1"])
    assert judged.exit_code == 0, judged.output
