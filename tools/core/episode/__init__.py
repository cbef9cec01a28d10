"""Running episodes: the loop, the users, the backends by name, the runtime. Before it was a
package, endstate.core.episode was a module holding replay(): that name is answered for one
release, with a DeprecationWarning."""

from endstate.core.deprecation import moved_names

__getattr__ = moved_names(__name__, {
    "replay": ("endstate.core.episode.replays",
               "from endstate.api import replay (replay(task, steps) returns an Episode)"),
    "system_prompt": ("endstate.core.episode.replays", "Domain.policy, from endstate.api"),
})
