"""The sandbox: a fresh state per episode (its diff, replayed on shared seed connections), init on top of the seed, tools that cannot escape,
and a diff that rebuilds the terminal state."""

import os
import sqlite3
import textwrap

import orjson
import pytest
from conftest import run_tool

from endstate.core.env import sandbox as sandbox_module
from endstate.core.env import seats
from endstate.core.env.changes import diff, touched, upsert
from endstate.core.env.domain import Domains, content_digest, shadow
from endstate.core.env.sandbox import Sandbox
from endstate.core.env.tools import Db, ToolError
from endstate.core.errors import EndstateError
from endstate.core.grading.grader import TaskIndex

SCHEMA = """
CREATE TABLE items (id TEXT PRIMARY KEY, name TEXT NOT NULL, qty INTEGER NOT NULL);
CREATE TABLE pairs (a INTEGER, b INTEGER, v TEXT, PRIMARY KEY (a, b));
"""
SEED = """
def build(db, rng):
    db.executemany("INSERT INTO items VALUES (?, ?, ?)",
                   [(f"I{i}", f"item {i}", rng.randint(1, 9)) for i in range(1, 4)])
    db.execute("INSERT INTO pairs VALUES (1, 1, 'x')")
"""
TOOLS = '''
from endstate.api import Db, ToolError, tool

@tool
def get_item(db: Db, item_id: str) -> dict:
    """Get an item."""
    row = db.one("SELECT * FROM items WHERE id = ?", item_id)
    if row is None:
        raise ToolError(f"no item {item_id}")
    return row

@tool(writes=True)
def set_qty(db: Db, item_id: str, qty: int) -> dict:
    """Set the quantity."""
    db.run("UPDATE items SET qty = ? WHERE id = ?", qty, item_id)
    return {"ok": True}

@tool(writes=True)
def add_item(db: Db, item_id: str, name: str) -> dict:
    """Add an item."""
    db.run("INSERT INTO items VALUES (?, ?, 0)", item_id, name)
    return {"ok": True}

@tool(writes=True)
def delete_item(db: Db, item_id: str) -> dict:
    """Delete an item."""
    db.run("DELETE FROM items WHERE id = ?", item_id)
    return {"ok": True}

@tool(writes=True)
def rename_key(db: Db, item_id: str, new_id: str) -> dict:
    """Change an item's id."""
    db.run("UPDATE items SET id = ? WHERE id = ?", new_id, item_id)
    return {"ok": True}

@tool(writes=True)
def set_pair(db: Db, a: int, b: int, v: str) -> dict:
    """Set a pair."""
    db.run("INSERT INTO pairs VALUES (?, ?, ?) ON CONFLICT DO UPDATE SET v = excluded.v", a, b, v)
    return {"ok": True}

@tool
def sneaky_read(db: Db, item_id: str) -> dict:
    """A read tool with a bug: it writes."""
    db.run("UPDATE items SET qty = 0 WHERE id = ?", item_id)
    return {}

@tool(writes=True)
def half_write(db: Db, item_id: str) -> dict:
    """Writes, then fails."""
    db.run("UPDATE items SET qty = 99 WHERE id = ?", item_id)
    raise ToolError("out of stock")

@tool(writes=True)
def crash(db: Db) -> dict:
    """A bug in a tool."""
    return 1 / 0

@tool(writes=True)
def escape(db: Db, sql: str) -> dict:
    """Tries to run arbitrary SQL."""
    db.run(sql)
    return {}
'''


def make_domain(root, name="shop", seed=SEED):
    d = root / name
    d.mkdir(parents=True)
    (d / "schema.sql").write_text(SCHEMA)
    (d / "seed.py").write_text(textwrap.dedent(seed))
    (d / "tools.py").write_text(TOOLS)
    (d / "policy.md").write_text("Be careful.")
    return d


@pytest.fixture
def shop(tmp_path, monkeypatch):
    monkeypatch.setenv("ENDSTATE_CACHE", str(tmp_path / "cache"))
    return Domains([str(make_domain(tmp_path / "domains"))])["shop"]


def test_user_domains_load_like_builtins_from_flag_env_and_cli(tmp_path, monkeypatch):
    root = tmp_path / "domains"
    make_domain(root)
    assert {"retail", "shop"} <= set(Domains([str(root)]).by_name)  # a folder of domains
    assert "shop" in Domains([str(root / "shop")]).by_name  # one domain folder
    task = {"id": "s1", "domain": "shop", "user": {"instruction": "i", "opening": "o"},
            "checks": [{"kind": "row", "table": "items", "where": {"id": "I1"}, "expect": {"qty": 5}}],
            "gold": [{"tool": "set_qty", "args": {"item_id": "I1", "qty": 5}}]}
    tasks = tmp_path / "t.jsonl"
    tasks.write_text(__import__("json").dumps(task) + "\n")
    p = run_tool("grade", "validate", str(tasks), env={"ENDSTATE_DOMAINS": str(root),
                                                       "ENDSTATE_CACHE": str(tmp_path / "c")})
    assert p.returncode == 0, p.stderr
    p = run_tool("grade", "validate", str(tasks), env={"ENDSTATE_CACHE": str(tmp_path / "c")})
    assert p.returncode == 1 and "unknown domain 'shop'" in p.stdout


def test_a_domain_name_defined_twice_is_an_error(tmp_path):
    make_domain(tmp_path / "a")
    make_domain(tmp_path / "b")
    with pytest.raises(EndstateError, match="domain 'shop' is defined twice"):
        Domains([str(tmp_path / "a"), str(tmp_path / "b")])


def test_seed_is_deterministic_cached_and_digested_by_content(shop, tmp_path):
    data, digest = shop.seed()
    assert digest.startswith("sha256:")
    cached = list((tmp_path / "cache" / "seeds").glob("shop-*.sqlite"))
    assert len(cached) == 1 and cached[0].read_bytes() == data
    again = Domains([str(shop.path)])["shop"]
    assert again.build_seed()[1] == digest  # rebuilt from scratch: same content


def query(sandbox: Sandbox, method: str, sql: str, *params):
    """Read the sandbox's current state through the Db helpers."""
    with sandbox.read_only() as conn:
        return getattr(Db(conn, sandbox.domain.now), method)(sql, *params)


def test_each_sandbox_is_fresh_and_starts_from_seed_plus_init(shop):
    with Sandbox(shop) as a:
        a.call("set_qty", {"item_id": "I1", "qty": 42})
        assert query(a, "value", "SELECT qty FROM items WHERE id = 'I1'") == 42
    init = {"items": [{"id": "I1", "qty": 7}, {"id": "I9", "name": "new", "qty": 1}]}
    with Sandbox(shop, init) as b:
        assert query(b, "all", "SELECT id, qty FROM items WHERE id IN ('I1', 'I9') ORDER BY id") == [
            {"id": "I1", "qty": 7}, {"id": "I9", "qty": 1}]
        assert b.changes() == {}  # the diff starts after init


def test_init_errors_are_clear(shop):
    with pytest.raises(EndstateError, match=r"init row for items\[I9\]: NOT NULL constraint failed"):
        Sandbox(shop, {"items": [{"id": "I9"}]})
    with pytest.raises(EndstateError, match="unknown column"):
        Sandbox(shop, {"items": [{"id": "I1", "colour": "red"}]})
    with pytest.raises(EndstateError, match="unknown table 'things'"):
        Sandbox(shop, {"things": [{"id": 1}]})


def test_diff_records_inserts_updates_deletes_by_key(shop):
    with Sandbox(shop) as s:
        before = query(s, "one", "SELECT * FROM items WHERE id = 'I2'")
        for name, args in [("set_qty", {"item_id": "I1", "qty": 50}),
                           ("add_item", {"item_id": "I7", "name": "seven"}),
                           ("delete_item", {"item_id": "I2"}),
                           ("set_pair", {"a": 1, "b": 1, "v": "y"}),
                           ("set_pair", {"a": 2, "b": 3, "v": "z"}),
                           ("add_item", {"item_id": "I8", "name": "gone"}),  # inserted, then deleted:
                           ("delete_item", {"item_id": "I8"}),                # no change at all
                           ("set_qty", {"item_id": "I3", "qty": 0}),          # changed, then back
                           ]:
            assert s.call(name, args).ok
        qty3 = shop_seed_qty(shop, "I3")
        assert s.call("set_qty", {"item_id": "I3", "qty": qty3}).ok
        changes = s.changes()
    assert changes["items"]["updated"] == [{"key": {"id": "I1"}, "before": {"qty": shop_seed_qty(shop, "I1")},
                                           "after": {"qty": 50}}]
    assert changes["items"]["inserted"] == [{"key": {"id": "I7"}, "row": {"id": "I7", "name": "seven", "qty": 0}}]
    assert changes["items"]["deleted"] == [{"key": {"id": "I2"}, "row": before}]
    assert changes["pairs"] == {
        "inserted": [{"key": {"a": 2, "b": 3}, "row": {"a": 2, "b": 3, "v": "z"}}],
        "updated": [{"key": {"a": 1, "b": 1}, "before": {"v": "x"}, "after": {"v": "y"}}]}


def shop_seed_qty(domain, item_id):
    with Sandbox(domain) as s:
        return query(s, "value", "SELECT qty FROM items WHERE id = ?", item_id)


def test_primary_key_change_is_a_delete_plus_an_insert(shop):
    with Sandbox(shop) as s:
        assert s.call("rename_key", {"item_id": "I1", "new_id": "X1"}).ok
        changes = s.changes()
    assert [e["key"] for e in changes["items"]["deleted"]] == [{"id": "I1"}]
    assert [e["key"] for e in changes["items"]["inserted"]] == [{"id": "X1"}]


def test_applying_the_diff_rebuilds_the_terminal_state(shop):
    with Sandbox(shop) as s:
        s.call("set_qty", {"item_id": "I1", "qty": 50})
        s.call("delete_item", {"item_id": "I2"})
        s.call("rename_key", {"item_id": "I3", "new_id": "X3"})
        s.call("set_pair", {"a": 5, "b": 5, "v": "q"})
        changes = s.changes()
        terminal = query(s, "all", "SELECT * FROM items ORDER BY id"), query(s, "all", "SELECT * FROM pairs ORDER BY a")
    with Sandbox(shop) as r:
        r.apply_changes(changes)
        assert (query(r, "all", "SELECT * FROM items ORDER BY id"), query(r, "all", "SELECT * FROM pairs ORDER BY a")) == terminal


def test_a_diff_that_no_longer_applies_is_refused(shop):
    with Sandbox(shop) as s:
        s.call("set_qty", {"item_id": "I1", "qty": 50})
        changes = s.changes()
    with Sandbox(shop, {"items": [{"id": "I1", "qty": 3}]}) as r:
        with pytest.raises(EndstateError, match=r"items\[I1\] was \{'qty': .*\} when the episode was recorded"):
            r.apply_changes(changes)


def test_tool_failures_become_observations_and_leave_no_partial_writes(shop):
    with Sandbox(shop) as s:
        assert s.call("get_item", {"item_id": "nope"}).content == '{"error":"no item nope"}'
        bad = s.call("set_qty", {"item_id": "I1", "qty": "many"})
        assert not bad.ok and "invalid arguments for set_qty: qty: 'many' is not of type 'integer'" in bad.content
        assert "unknown tool 'drop_all'" in s.call("drop_all", {}).content
        assert s.call("half_write", {"item_id": "I1"}).content == '{"error":"out of stock"}'
        assert "crash failed: ZeroDivisionError" in s.call("crash", {}).content
        assert "read-only tool tried to write" in s.call("sneaky_read", {"item_id": "I1"}).content
        assert s.changes() == {}


@pytest.mark.parametrize("sql", [
    "ATTACH DATABASE ':memory:' AS other",
    "CREATE TABLE evil (x)",
    "DROP TABLE items",
    "DELETE FROM _endstate_before_items",
    "INSERT INTO _endstate_quiet VALUES (1)",  # would hide the tool's writes from the change log
    "PRAGMA foreign_keys = OFF",
    "SELECT load_extension('x')",
])
def test_tools_cannot_escape_their_database(shop, sql):
    with Sandbox(shop) as s:
        result = s.call("escape", {"sql": sql})
        assert not result.ok and "not authorized" in result.content


def test_grader_connection_is_read_only(shop):
    with Sandbox(shop) as s, s.read_only() as conn:
        assert conn.execute("SELECT count(*) FROM items").fetchone() == (3,)
        for sql in ["UPDATE items SET qty = 0", "INSERT INTO pairs VALUES (9, 9, 'z')",
                    "ATTACH DATABASE ':memory:' AS x", "PRAGMA query_only = 0"]:
            with pytest.raises(sqlite3.DatabaseError):
                conn.execute(sql)


def test_tool_allow_list(shop):
    with Sandbox(shop, allowed_tools=["get_item"]) as s:
        assert "unknown tool 'set_qty'; available: get_item" in s.call("set_qty", {"item_id": "I1", "qty": 1}).content
    with pytest.raises(EndstateError, match="unknown tool"):
        Sandbox(shop, allowed_tools=["teleport"])


def test_a_table_without_primary_key_is_refused(tmp_path):
    d = make_domain(tmp_path)
    (d / "schema.sql").write_text("CREATE TABLE log (msg TEXT);")
    with pytest.raises(EndstateError, match="table log has no PRIMARY KEY"):
        Domains([str(d)])["shop"].tables


# -- an episode's state is its diff: replaying it must equal running the calls in order ---------

def run_in_order(domain, task, digest: bool):
    """The reference: one private database, init upserted, every gold call run in turn on it.
    Its observations, its diff from seed + init (the seed's change log, emptied after init) and,
    with `digest`, a digest of every row."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.deserialize(domain.seed()[0])
    for table, rows in (task.get("init") or {}).items():
        for row in rows:
            upsert(conn, domain.tables[table], row)
    for table in domain.tables:
        conn.execute(f'DELETE FROM "{shadow(table)}"')
    db, seen = Db(conn, domain.now), []
    for step in (s for s in task["gold"] if "tool" in s):
        try:
            value = domain.tools[step["tool"]].fn(db, **step["args"])
            seen.append(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode())
        except ToolError as e:
            seen.append(str(e))
    changes = diff(touched(conn, domain.tables), {})
    return seen, changes, content_digest(conn, domain.tables) if digest else None


@pytest.mark.parametrize("pinned", [False, True], ids=["replayed", "pinned"])
def test_replaying_the_diff_gives_what_running_the_calls_in_order_gives(pinned, monkeypatch):
    """Every gold trajectory of every built-in task: each observation byte for byte and the diff,
    as on a private database that ran the calls in order; every 32nd task also row for row, and
    rebuilt from its diff the way grade does. One seat per domain and another sandbox taking it
    after every call: each call replays the diff, or (pinned) the seat stays."""
    monkeypatch.setattr(seats, "SEATS", 1)
    if pinned:
        monkeypatch.setattr(sandbox_module, "PIN_ROWS", 0)  # every sandbox pins at its first write
    domains = Domains()
    tasks = list(TaskIndex(domains))
    assert len(tasks) > 600
    for n, task in enumerate(tasks):
        domain, full = domains[task["domain"]], n % 32 == 0
        expected, expected_changes, terminal = run_in_order(domain, task, full)
        with Sandbox(domain, task.get("init")) as s:
            seen = []
            for step in (s for s in task["gold"] if "tool" in s):
                result = s.call(step["tool"], step["args"])
                seen.append(result.content if result.ok else orjson.loads(result.content)["error"])
                with Sandbox(domain).read_only():  # takes the seat unless it is pinned
                    pass
            if pinned and expected_changes:  # kept its seat through every other sandbox's turn
                assert s.seat is not None, task["id"]
            if not pinned:  # its seat was taken after each call: each call replayed the diff
                assert s.seat is None, task["id"]
            assert seen == expected, task["id"]
            assert s.changes() == expected_changes, task["id"]
            if full:
                with s.read_only() as conn:
                    assert content_digest(conn, domain.tables) == terminal, task["id"]
        if full:
            rebuilt = Sandbox(domain, task.get("init"))
            rebuilt.apply_changes(expected_changes)
            with rebuilt.read_only() as conn:
                assert content_digest(conn, domain.tables) == terminal, task["id"]


def test_sandboxes_of_one_task_interleave_without_seeing_each_other(shop):
    a, b = Sandbox(shop), Sandbox(shop)
    assert a.call("set_qty", {"item_id": "I1", "qty": 11}).ok
    assert b.call("set_qty", {"item_id": "I1", "qty": 22}).ok
    assert a.call("add_item", {"item_id": "I7", "name": "a's"}).ok
    assert "no item I7" in b.call("get_item", {"item_id": "I7"}).content
    assert query(a, "value", "SELECT qty FROM items WHERE id = 'I1'") == 11
    assert query(b, "value", "SELECT qty FROM items WHERE id = 'I1'") == 22
    assert query(Sandbox(shop), "value", "SELECT qty FROM items WHERE id = 'I1'") == shop_seed_qty(shop, "I1")
    assert set(a.changes()["items"]) == {"updated", "inserted"} and set(b.changes()["items"]) == {"updated"}


def test_a_tool_cannot_end_the_transaction(shop):
    """Seed connections are shared: a COMMIT would write the seed under every later episode, a
    ROLLBACK lose the episode's state (tests/test_check_isolation.py has every statement)."""
    s = Sandbox(shop)
    assert s.call("set_qty", {"item_id": "I1", "qty": 0}).ok
    for sql in ("COMMIT", "END", "ROLLBACK"):
        result = s.call("escape", {"sql": sql})
        assert not result.ok and "not authorized" in result.content
    assert query(s, "value", "SELECT qty FROM items WHERE id = 'I1'") == 0
    assert query(Sandbox(shop), "value", "SELECT qty FROM items WHERE id = 'I1'") == shop_seed_qty(shop, "I1")


def test_a_large_diff_pins_its_seat_until_closed(shop, monkeypatch):
    monkeypatch.setattr(seats, "SEATS", 1)
    monkeypatch.setattr(sandbox_module, "PIN_ROWS", 2)
    with Sandbox(shop) as s:
        for i in range(4):
            assert s.call("add_item", {"item_id": f"N{i}", "name": "n"}).ok
        seat = s.seat
        assert "no item N0" in Sandbox(shop).call("get_item", {"item_id": "N0"}).content
        assert s.pinned and s.seat is seat  # the other sandbox got a seat of its own
        assert [e["key"]["id"] for e in s.changes()["items"]["inserted"]] == ["N0", "N1", "N2", "N3"]
    assert not s.pinned and seat.holder() is None
    assert "no item N0" in Sandbox(shop).call("get_item", {"item_id": "N0"}).content


def test_sandboxes_past_the_seats_take_turns_and_keep_their_state(shop, monkeypatch):
    """More episodes in flight than seats: each call may find its seat taken and replay its diff;
    the seats stay at SEATS and every episode sees only its own writes."""
    monkeypatch.setattr(seats, "SEATS", 2)
    boxes = [Sandbox(shop) for _ in range(7)]
    for round_ in range(3):
        for i, box in enumerate(boxes):
            assert box.call("set_qty", {"item_id": "I1", "qty": 100 * i + round_}).ok
            assert box.call("add_item", {"item_id": f"B{i}R{round_}", "name": "b"}).ok
    for i, box in enumerate(boxes):
        assert query(box, "value", "SELECT qty FROM items WHERE id = 'I1'") == 100 * i + 2
        assert sorted(e["key"]["id"] for e in box.changes()["items"]["inserted"]) == \
            [f"B{i}R{r}" for r in range(3)]
    assert len(shop.seed_connections[(os.getpid(), "seats")]) == 2


def test_a_seat_hands_over_only_its_episodes_rows_and_diffs_them_against_the_init(shop, monkeypatch):
    """The change log is emptied at a seat's base (seats.mark_base): what a hand-over reads is the
    episode's own writes, never the init's rows, and a row the init wrote is diffed against the
    init's state, not the seed's."""
    monkeypatch.setattr(seats, "SEATS", 1)
    init = {"items": [{"id": "I1", "name": "from init", "qty": 5}, {"id": "N9", "name": "new", "qty": 1}]}
    a, b = Sandbox(shop, init), Sandbox(shop, init)
    assert a.call("set_qty", {"item_id": "N9", "qty": 2}).ok
    assert [(r.table.name, r.key, r.before["qty"]) for r in touched(a.seat.conn, shop.tables)] == \
        [("items", ("N9",), 1)]
    assert b.call("set_qty", {"item_id": "I1", "qty": 7}).ok  # the one seat: a's rows written down
    assert a.seat is None and query(a, "value", "SELECT qty FROM items WHERE id = 'N9'") == 2
    assert query(a, "value", "SELECT name FROM items WHERE id = 'I1'") == "from init"
    assert a.changes() == {"items": {"updated": [{"key": {"id": "N9"}, "before": {"qty": 1}, "after": {"qty": 2}}]}}
    assert b.changes() == {"items": {"updated": [{"key": {"id": "I1"}, "before": {"qty": 5}, "after": {"qty": 7}}]}}


def test_a_rebased_seat_logs_none_of_the_init_it_replays(shop, monkeypatch):
    """seats.rebase replays an init it already knows with the change log quiet (domain.QUIET): at
    the base the log is as empty as on the seed, and what it holds afterwards is the episode's."""
    monkeypatch.setattr(seats, "SEATS", 1)
    a = Sandbox(shop, {"items": [{"id": "I1", "name": "a's", "qty": 5}, {"id": "N9", "name": "new", "qty": 1}]})
    b = Sandbox(shop, {"items": [{"id": "I2", "name": "b's", "qty": 6}]})  # the one seat: b's base now
    assert a.call("set_qty", {"item_id": "N9", "qty": 2}).ok  # rebased onto a's init
    assert b.call("get_item", {"item_id": "I2"}).ok  # onto b's: a's row written down
    assert a.call("get_item", {"item_id": "I1"}).ok  # onto a's again, a's row replayed (logged)
    assert [(r.table.name, r.key, r.before["qty"]) for r in touched(a.seat.conn, shop.tables)] == \
        [("items", ("N9",), 1)]
    assert a.changes() == {"items": {"updated": [{"key": {"id": "N9"}, "before": {"qty": 1}, "after": {"qty": 2}}]}}
    assert b.changes() == {}


def test_a_rebase_that_fails_half_way_leaves_the_seat_bare_and_logging(shop):
    s = Sandbox(shop)
    seat, _ = seats.take(shop, s, b"some init")
    try:
        with pytest.raises(sqlite3.OperationalError):
            seats.rebase(seat, b"some init", [("UPDATE items SET qty = 0", [[]]),
                                              ("INSERT INTO nosuch VALUES (?)", [[1]])])
        assert seat.base is None
        assert seat.conn.execute("SELECT count(*) FROM _endstate_quiet").fetchone() == (0,)
        assert seat.conn.execute("SELECT min(qty) FROM items").fetchone() != (0,)  # the seed's
    finally:
        seats.give_back(shop, seat)


def test_a_schema_with_its_own_triggers_is_refused(tmp_path):
    d = make_domain(tmp_path)
    (d / "schema.sql").write_text(SCHEMA + "\nCREATE TRIGGER touch AFTER UPDATE ON items "
                                  "BEGIN UPDATE items SET name = name WHERE id = NEW.id; END;")
    with pytest.raises(EndstateError, match="defines trigger touch; .* would apply twice"):
        Domains([str(d)])["shop"].tables


def test_a_unique_value_moved_between_rows_replays_in_any_order():
    """Replays delete every touched key before inserting the rows whole: a unique email moved from
    one customer to another (in an order the key order would break) replays and grades."""
    retail = Domains()["retail"]
    s = Sandbox(retail)
    (a, _), (b, b_email) = [tuple(r.values()) for r in
                            query(s, "all", "SELECT id, email FROM customers ORDER BY id LIMIT 2")]
    assert s.call("update_customer_email", {"customer_id": b, "email": "moved@example.com"}).ok
    assert s.call("update_customer_email", {"customer_id": a, "email": b_email}).ok
    assert orjson.loads(s.call("get_customer", {"customer_id": a}).content)["email"] == b_email
    rebuilt = Sandbox(retail)
    rebuilt.apply_changes(s.changes())
    assert query(rebuilt, "all", "SELECT id, email FROM customers WHERE id IN (?, ?) ORDER BY id", a, b) == [
        {"id": a, "email": b_email}, {"id": b, "email": "moved@example.com"}]


def test_without_rowid_tables_replay_too(tmp_path, monkeypatch):
    monkeypatch.setenv("ENDSTATE_CACHE", str(tmp_path / "cache"))
    d = make_domain(tmp_path / "domains")
    (d / "schema.sql").write_text(SCHEMA.replace("PRIMARY KEY (a, b))", "PRIMARY KEY (a, b)) WITHOUT ROWID"))
    shop = Domains([str(d)])["shop"]
    assert not shop.tables["pairs"].rowid and shop.tables["items"].rowid
    s = Sandbox(shop)
    assert s.call("set_pair", {"a": 1, "b": 1, "v": "y"}).ok and s.call("set_pair", {"a": 2, "b": 3, "v": "z"}).ok
    assert s.call("set_qty", {"item_id": "I1", "qty": 5}).ok
    assert query(s, "all", "SELECT * FROM pairs ORDER BY a") == [{"a": 1, "b": 1, "v": "y"}, {"a": 2, "b": 3, "v": "z"}]
