"""Documents: an entry of a nested document's collection loaded as its nested dict and saved back
as rows (core/env/documents.py), on the tables `grade import tau2` makes of tests/fixtures/tau2_mini.
A save of what was loaded writes nothing; a change lands in exactly the rows it touches."""

import copy
import json
import sqlite3

import pytest
from conftest import ROOT

from endstate.core.env.documents import Documents
from endstate.core.env.nested import MappingError, insert_document, rebuild_document
from endstate.core.env.tools import Db
from endstate.grade.authoring.nested_tables import create_statements, infer_mapping

DOCUMENT = json.loads((ROOT / "tests" / "fixtures" / "tau2_mini" / "db.json").read_text())


@pytest.fixture
def seeded():
    mapping = infer_mapping(DOCUMENT)
    conn = sqlite3.connect(":memory:")
    conn.executescript(create_statements(mapping))
    insert_document(conn, DOCUMENT, mapping)
    conn.commit()
    return conn, Db(conn, "2024-05-15T12:00:00"), Documents(mapping)


def rows(conn, table):
    return conn.execute(f'SELECT rowid, * FROM "{table}" ORDER BY rowid').fetchall()


def test_every_entry_loads_as_it_is_in_the_document(seeded):
    _, db, docs = seeded
    for collection in ("customers", "bikes", "rentals"):
        assert docs.load_all(db, collection) == DOCUMENT[collection]
        for key, item in DOCUMENT[collection].items():
            assert docs.load(db, collection, key) == item
    assert docs.load(db, "bikes", "B-99") is None


def test_saving_what_was_loaded_writes_nothing(seeded):
    conn, db, docs = seeded
    before, changes = conn.serialize(), conn.total_changes
    for collection in ("customers", "bikes", "rentals"):
        for key in DOCUMENT[collection]:
            docs.save(db, collection, key, docs.load(db, collection, key))
    assert conn.total_changes == changes
    assert conn.serialize() == before


def test_a_changed_array_item_lands_in_its_child_row_only(seeded):
    conn, db, docs = seeded
    other = rows(conn, "bikes__service_log")
    bike = docs.load(db, "bikes", "B-01")
    bike["service_log"][1]["note"] = "brakes"
    changes = conn.total_changes
    docs.save(db, "bikes", "B-01", bike)
    assert conn.total_changes == changes + 1
    assert conn.execute("SELECT note FROM bikes__service_log WHERE bike_id = 'B-01' AND "
                        "position = 1").fetchone() == ("brakes",)
    assert rows(conn, "bikes__service_log")[0] == other[0]  # same rowid, same values
    expected = copy.deepcopy(DOCUMENT)
    expected["bikes"]["B-01"] = bike
    assert rebuild_document(conn, docs.mapping) == expected


def test_items_removed_and_added_below_an_entry(seeded):
    conn, db, docs = seeded
    customer = docs.load(db, "customers", "ana_ruiz_1")
    del customer["payment_methods"]["card_4242"]
    customer["payment_methods"]["gift_3"] = {"source": "gift_card", "id": "gift_3", "balance": 5}
    customer["rentals"].pop(0)
    docs.save(db, "customers", "ana_ruiz_1", customer)
    assert conn.execute("SELECT id FROM customers__payment_methods WHERE customer_id = "
                        "'ana_ruiz_1' ORDER BY rowid").fetchall() == [("wallet_77",), ("gift_3",)]
    assert conn.execute("SELECT position, value FROM customers__rentals").fetchall() == [
        (0, "R1002")]
    assert docs.load(db, "customers", "ana_ruiz_1") == customer


def test_fields_absent_in_some_rows_round_trip(seeded):
    """Items lacking fields (the `_absent` column): a field removed, one added, null kept apart."""
    conn, db, docs = seeded
    ana = docs.load(db, "customers", "ana_ruiz_1")
    del ana["payment_methods"]["card_4242"]["last_four"]
    ana["payment_methods"]["wallet_77"]["brand"] = None
    ana["name"]["middle_name"] = "M"
    docs.save(db, "customers", "ana_ruiz_1", ana)
    assert conn.execute("SELECT id, brand, last_four, _absent FROM customers__payment_methods "
                        "WHERE customer_id = 'ana_ruiz_1' ORDER BY rowid").fetchall() == [
        ("card_4242", "visa", None, '["last_four","balance"]'),
        ("wallet_77", None, None, '["last_four"]')]
    assert conn.execute("SELECT name__middle_name, _absent FROM customers WHERE customer_id = "
                        "'ana_ruiz_1'").fetchone() == ("M", None)
    assert docs.load(db, "customers", "ana_ruiz_1") == ana
    assert docs.load(db, "customers", "tom_baker_2") == DOCUMENT["customers"]["tom_baker_2"]


def test_a_new_entry_is_inserted_with_its_children(seeded):
    conn, db, docs = seeded
    rental = {"rental_id": "R1003", "customer_id": "tom_baker_2", "bike_id": "B-03", "hours": 2,
              "status": "active", "charges": [{"payment_id": "card_1111", "amount": 16.5}],
              "returned_at": None}
    docs.save(db, "rentals", "R1003", rental)
    assert conn.execute("SELECT * FROM rentals__charges WHERE rental_id = 'R1003'").fetchall() == [
        ("R1003", 0, "card_1111", 16.5)]
    expected = copy.deepcopy(DOCUMENT)
    expected["rentals"]["R1003"] = rental
    assert rebuild_document(conn, docs.mapping) == expected
    assert list(docs.load_all(db, "rentals")) == ["R1001", "R1002", "R1003"]


@pytest.mark.parametrize("collection, key, change, message", [
    ("bikes", "B-02", lambda b: b.update(colour="red"),
     "/bikes/B-02/colour: a field the mapping does not know"),
    ("bikes", "B-02", lambda b: b.update(hourly_rate="six"), "/bikes/B-02/hourly_rate: expected real"),
    ("bikes", "B-02", lambda b: b.update(bike_id="B-07"),
     "/bikes/B-02: its field bike_id is 'B-07'; an entry of bikes holds its own key there"),
    ("bicycles", "B-02", lambda b: None, "no collection 'bicycles' in the document; its "
                                         "collections: customers, bikes, rentals"),
])
def test_what_the_mapping_cannot_store_is_named_and_nothing_is_written(seeded, collection, key,
                                                                       change, message):
    conn, db, docs = seeded
    bike = copy.deepcopy(DOCUMENT["bikes"]["B-02"])
    change(bike)
    before = conn.serialize()
    with pytest.raises(MappingError, match=message):
        docs.save(db, collection, key, bike)
    assert conn.serialize() == before


def test_an_array_collection_is_keyed_by_position():
    document = {"bikes": [{"model": "X", "log": {"d1": {"note": "ok"}}, "tags": ["a"]},
                          {"model": "Y", "log": {}, "tags": []}]}
    mapping = infer_mapping(document)
    conn = sqlite3.connect(":memory:")
    conn.executescript(create_statements(mapping))
    insert_document(conn, document, mapping)
    db, docs = Db(conn, "2024-05-15T12:00:00"), Documents(mapping)
    assert docs.load_all(db, "bikes") == document["bikes"]
    bike = docs.load(db, "bikes", 1)
    bike["tags"].append("b")
    bike["log"]["d2"] = {"note": None}
    docs.save(db, "bikes", 1, bike)
    docs.save(db, "bikes", 2, {"model": "Z", "log": {}, "tags": []})
    assert rebuild_document(conn, mapping) == {"bikes": [document["bikes"][0], bike,
                                                         {"model": "Z", "log": {}, "tags": []}]}
