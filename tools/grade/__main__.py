"""python -m endstate.grade"""

from endstate.grade.cli import main

main()
