"""endstate: terminal-state rewards for tool-using LLM agents, and GRPO to train on them."""

import os
from pathlib import Path

__version__ = "0.1.0"

# Schemas, built-in domains, task suites and configs ship inside the package: tools/builtin links
# to the repository's folders, so an editable install and an installed wheel find them alike.
BUILTIN = Path(__file__).resolve().parent / "builtin"
SCHEMA_DIR = BUILTIN / "schemas"
DOMAINS_DIR = BUILTIN / "domains"
TASKS_DIR = BUILTIN / "tasks"
CONFIGS_DIR = BUILTIN / "configs"


def cache_dir() -> Path:
    """Where endstate keeps what it can rebuild (domain seeds, the converted embedded model, task
    verdicts): $ENDSTATE_CACHE, else $XDG_CACHE_HOME/endstate, else ~/.cache/endstate."""
    base = os.environ.get("ENDSTATE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "endstate")
    return Path(base)
