"""python -m endstate.grpo"""

from endstate.grpo.cli import main

main()
