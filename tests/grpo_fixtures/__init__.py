"""Fixtures for the grpo tests: the buttons domain and its tasks, and a tiny model (see tiny.py)."""

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
BUTTONS = {"domain": str(HERE / "buttons"), "pool": str(HERE / "buttons.jsonl")}


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    from grpo_fixtures.tiny import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny-model"), seed=0)


@pytest.fixture(scope="session")
def buttons():
    return BUTTONS
