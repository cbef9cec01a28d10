"""The path of the grader before endstate.core.grading.grader, kept for one release."""

from endstate.core.deprecation import moved
from endstate.core.grading.grader import *

moved(__name__, "from endstate.api import Grader, grade (they take and return typed records: "
      "Episode, Task, GradedEpisode)")
