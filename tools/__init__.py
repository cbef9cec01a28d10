"""endstate: terminal-state rewards for tool-using LLM agents, and GRPO to train on them."""

from pathlib import Path

__version__ = "0.1.0"

# Schemas, built-in domains and task suites live beside the package in the repository
# (the project installs editable); everything that needs them asks for these paths.
ROOT = Path(__file__).resolve().parent.parent
SCHEMA_DIR = ROOT / "schemas"
DOMAINS_DIR = ROOT / "domains"
TASKS_DIR = ROOT / "tasks"
