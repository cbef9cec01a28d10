"""Moved to endstate.core.grader (temporary re-export while the move lands)."""

from endstate.core.grader import Grader, TaskIndex, builtin_task_files  # noqa: F401
