"""Two buttons, neither pressed."""


def build(db, rng):
    db.executemany("INSERT INTO buttons (name, pressed) VALUES (?, 0)", [("red",), ("blue",)])
