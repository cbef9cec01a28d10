"""python -m endstate.probe"""

from endstate.probe.cli import main

main()
