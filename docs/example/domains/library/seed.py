"""Seed for the library example: 200 members, 120 books, 300 loans. Deterministic: every random
choice comes from `rng` (endstate passes random.Random(0)), every date from a fixed NOW."""

import random
import sqlite3
from datetime import datetime, timedelta

FIRST = ("Ada", "Ben", "Cleo", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jun")
LAST = ("Abe", "Brandt", "Costa", "Diaz", "Eng", "Frey", "Gill", "Holm", "Ito", "Juarez")
WORDS = ("Silent", "River", "Glass", "Winter", "Garden", "Iron", "Paper", "Night", "Salt", "Moon")
NOW = datetime(2026, 1, 15, 12, 0, 0)  # the same clock as tools.NOW


def build(db: sqlite3.Connection, rng: random.Random) -> None:
    for i in range(1, 201):
        name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
        fines = rng.choice((0.0, 0.0, 0.0, 1.5, 4.25, 12.0))
        db.execute("INSERT INTO members VALUES (?, ?, ?, ?)",
                   (f"M{i:04d}", name, f"{name.lower().replace(' ', '.')}{i}@example.com", fines))
    for i in range(1, 121):
        title = f"The {rng.choice(WORDS)} {rng.choice(WORDS)}"
        db.execute("INSERT INTO books VALUES (?, ?, ?, ?)",
                   (f"B{i:04d}", title, f"{rng.choice(FIRST)} {rng.choice(LAST)}", rng.randint(1, 3)))
    for i in range(1, 301):
        loaned = NOW - timedelta(days=rng.randint(1, 60))
        returned = loaned + timedelta(days=rng.randint(1, 20)) if rng.random() < 0.7 else None
        db.execute("INSERT INTO loans VALUES (?, ?, ?, ?, ?, ?)",
                   (f"L{i:05d}", f"M{rng.randint(1, 200):04d}", f"B{rng.randint(1, 120):04d}",
                    loaned.isoformat(), (loaned + timedelta(days=21)).isoformat(),
                    returned.isoformat() if returned and returned < NOW else None))
