"""Seed of the counter domain: three counters."""

import random
import sqlite3

from endstate.api import insert_rows


def build(db: sqlite3.Connection, rng: random.Random) -> None:
    insert_rows(db, counters=[("C1", 4), ("C2", 3), ("C3", 0)])
