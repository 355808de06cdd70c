"""Stored data is never dropped implicitly: classes that lack stored properties,
renames back and forth, explicit drops, and two classes of one entity name."""

from __future__ import annotations

import os
from typing import Annotated

import pytest

import motedb


def define(src: str, module: str = "app"):
    """The last class defined by src, as if it were in module `module`."""
    ns = {"__name__": module, "motedb": motedb, "Annotated": Annotated}
    exec(src, ns)
    return [v for v in ns.values() if isinstance(v, type) and issubclass(v, motedb.Entity)][-1]


FULL = "class C(motedb.Entity):\n id: int = 0\n name: Annotated[str, motedb.Index] = ''\n n: int = 0\n"
NICK = "class C(motedb.Entity):\n id: int = 0\n nick: str = ''\n"
ONLY_N = "class C(motedb.Entity):\n id: int = 0\n n: int = 0\n"


def test_opening_with_a_class_that_lacks_a_property_keeps_its_data(tmp_path):
    """The user trial's reproducer: a box opened by a class without `name`."""
    path = tmp_path / "e.mote"
    full = define(FULL)
    with motedb.open(path) as s:
        s.box(full).put(full(name="Ada"))
    nick = define(NICK)
    with motedb.open(path) as s:
        assert s.box(nick).count() == 1  # only opens the box
    with motedb.open(path) as s:
        assert s.box(full).get(1).name == "Ada"


def test_a_lacking_class_carries_kept_values_through_updates(tmp_path):
    path = tmp_path / "carry.mote"
    full, only_n = define(FULL), define(ONLY_N)
    with motedb.open(path) as s:
        s.box(full).put_many([full(name="Ada", n=1), full(name="Bob", n=2)])
    with motedb.open(path) as s:
        box = s.box(only_n)
        ada, bob = box.get_many([1, 2])
        ada.n = 10
        box.put(ada)
        bob.n = 20
        box.put_many([bob, only_n(n=30)])  # an update and a new object
        box.remove(box.put(only_n(n=40)))
    with motedb.open(path) as s:
        box = s.box(full)
        assert [(o.name, o.n) for o in box.all()] == [("Ada", 10), ("Bob", 20), ("", 30)]
        assert box.query(full.name == "Bob").ids() == [2]  # the kept index followed
        assert box.query(full.name.is_null()).ids() == [3]  # stored as NULL, reads as default


def test_rename_round_trip_keeps_every_value(tmp_path):
    path = tmp_path / "rt.mote"
    v1 = define("class P(motedb.Entity):\n id: int = 0\n name: str = ''\n")
    v2 = define("class P(motedb.Entity):\n id: int = 0\n"
                " full_name: str = motedb.field(default='', renamed_from='name')\n")
    with motedb.open(path) as s:
        s.box(v1).put(v1(name="Ada"))
    with motedb.open(path) as s:
        s.box(v2).put(v2(full_name="Grace"))
    with motedb.open(path) as s:
        box = s.box(v1)
        assert [o.name for o in box.all()] == ["Ada", "Grace"]
        box.put(v1(name="Linus"))
    with motedb.open(path) as s:
        assert [o.full_name for o in s.box(v2).all()] == ["Ada", "Grace", "Linus"]


def test_two_classes_of_one_entity_name_are_refused_at_box_time(tmp_path):
    item_a = define("class Item(motedb.Entity):\n id: int = 0\n a: int = 0\n", "shop.a")
    item_b = define("class Item(motedb.Entity):\n id: int = 0\n b: str = ''\n", "shop.b")
    with motedb.open(tmp_path / "two.mote") as s:
        box_a = s.box(item_a)
        box_a.put(item_a(a=5))
        with pytest.raises(motedb.SchemaError, match=r"entity Item is already used in this "
                                                     r"store by the class shop\.a\.Item"):
            s.box(item_b)
        assert [o.a for o in box_a.all()] == [5]  # nothing changed
        box_a.put(item_a(a=6))
    with motedb.open(tmp_path / "two.mote") as s:  # another store session: b is fine
        box_b = s.box(item_b)
        box_b.put(item_b(b="x"))
        assert s.box(item_b).count() == 3
    with motedb.open(tmp_path / "two.mote") as s:
        assert [o.a for o in s.box(item_a).all()] == [5, 6, 0]


def test_drop_property_is_explicit(tmp_path):
    path = tmp_path / "drop.mote"
    full, only_n = define(FULL), define(ONLY_N)
    with motedb.open(path) as s:
        s.box(full).put_many([full(name="Ada", n=1), full(name="Bob", n=2)])
        with pytest.raises(ValueError, match="C.name is declared by the class"):
            s.drop_property(full, "name")
    with motedb.open(path) as s:
        box = s.box(only_n)
        with pytest.raises(motedb.SchemaError, match="no stored property nope"):
            s.drop_property(only_n, "nope")
        with pytest.raises(motedb.SchemaError, match="does not exist"):
            s.drop_property("Nope", "name")
        with pytest.raises(TypeError):
            s.drop_property(3, "name")
        with pytest.raises(motedb.TransactionError):
            with s.read():
                s.drop_property("C", "name")
        try:  # rolled back with its transaction
            with s.write():
                s.drop_property(only_n, "name")
                raise KeyError("no")
        except KeyError:
            pass
        s.drop_property("C", "name")
        assert [o.n for o in box.all()] == [1, 2]  # the box goes on
    with motedb.open(path) as s:
        assert [(o.name, o.n) for o in s.box(full).all()] == [("", 1), ("", 2)]


def test_drop_property_rolls_back_with_its_transaction(tmp_path):
    path = tmp_path / "droprb.mote"
    full, only_n = define(FULL), define(ONLY_N)
    with motedb.open(path) as s:
        s.box(full).put(full(name="Ada", n=1))
    with motedb.open(path) as s:
        s.box(only_n)
        with pytest.raises(KeyError):
            with s.write():
                s.drop_property(only_n, "name")
                raise KeyError("changed my mind")
    with motedb.open(path) as s:
        assert s.box(full).get(1).name == "Ada"


def test_read_only_store_opens_a_lacking_class_and_explains_a_changed_one(tmp_path):
    path = tmp_path / "ro.mote"
    full = define(FULL)
    with motedb.open(path) as s:
        s.box(full).put(full(name="Ada", n=1))
    with motedb.open(path, readonly=True) as s:
        assert [o.n for o in s.box(define(ONLY_N)).all()] == [1]
        more = define("class C(motedb.Entity):\n id: int = 0\n name: str = ''\n n: int = 0\n"
                      " email: str | None = None\n")
        with pytest.raises(motedb.SchemaError) as e:
            s.box(more)
        msg = str(e.value)
        assert "new property email" in msg and "name loses its index" in msg
        assert "readonly=False" in msg and "write transaction" not in msg


def test_values_an_object_never_had_stay_defaults(tmp_path):
    """A property added after an object was stored reads as its default; writing
    the object again without that property (a lacking class, a partial update of
    another property) must not turn it into a stored zero."""
    path = tmp_path / "absent.mote"
    v1 = define("class A(motedb.Entity):\n id: int = 0\n a: int = 0\n")
    v2 = define("class A(motedb.Entity):\n id: int = 0\n a: int = 0\n stars: int = 5\n"
                " tag: str = 'none'\n")
    with motedb.open(path) as s:
        s.box(v1).put_many([v1(a=1), v1(a=2)])
    with motedb.open(path) as s:
        assert [(o.stars, o.tag) for o in s.box(v2).all()] == [(5, "none"), (5, "none")]
    with motedb.open(path) as s:
        box = s.box(v1)
        box.put(box.get(1))                    # stars and tag are kept: carried
    with motedb.open(path) as s:
        box = s.box(v2)
        box.update(2, a=20)                    # stars and tag left alone
        assert [(o.a, o.stars, o.tag) for o in box.all()] == [(1, 5, "none"), (20, 5, "none")]


# ---- Registering a new entity rides on the first write ------------------------------------------
# store.box() of a class whose entity the store lacks writes nothing: the first single write that
# uses the box registers it in the same commit (creating a store, box(), put_many() and close() make
# one commit). A read transaction or a store.write() block registers it first, in a commit of its
# own with every other new box, as box() did before; so does close() for a box never used.
# (Threads: test_motedb_threads.)


def test_box_of_a_new_entity_writes_nothing_until_the_first_write(tmp_path):
    path = tmp_path / "new.mote"
    full = define(FULL)
    s = motedb.open(path)
    box = s.box(full)
    assert os.path.getsize(path) == 0  # creation writes nothing; a registration would write
    # the creation page and slot 1
    box.put_many([full(name="Ada", n=1), full(name="Bob", n=2)])
    assert os.path.getsize(path) >= 8192  # its commit: both slots
    s.close()
    with motedb.open(path, readonly=True) as r:
        b = r.box(full)
        assert b.count() == 2 and b.query(full.name == "Bob").find()[0].n == 2


def test_a_read_before_any_write_finds_the_new_entity_empty(tmp_path):
    path = tmp_path / "read-first.mote"
    full = define(FULL)
    with motedb.open(path) as s:
        box = s.box(full)
        assert box.count() == 0 and box.get(1) is None
        assert box.query(full.name == "Ada").find() == []
        with s.read():
            assert box.count() == 0 and box.all() == []
        box.put(full(name="Ada"))
        with s.read():
            assert [o.name for o in box.all()] == ["Ada"]
    with motedb.open(path, readonly=True) as r:
        assert r.box(full).get(1).name == "Ada"


def test_a_first_write_rolled_back_leaves_the_box_usable(tmp_path):
    path = tmp_path / "rollback.mote"
    full = define(FULL)
    with motedb.open(path) as s:
        box = s.box(full)
        with pytest.raises(KeyError):
            with s.write():
                box.put(full(name="gone"))
                raise KeyError("rolled back")
        assert box.count() == 0
        with pytest.raises(KeyError):
            with s.write():
                box.put(full(name="gone too"))
                raise KeyError("rolled back")
        box.put(full(name="kept"))
    with motedb.open(path, readonly=True) as r:
        assert [o.name for o in r.box(full).all()] == ["kept"]


def test_a_box_never_used_is_registered_at_close(tmp_path):
    path = tmp_path / "unused.mote"
    full, nick = define(FULL, "one"), define(NICK.replace("class C", "class D"), "two")
    with motedb.open(path) as s:
        s.box(full)
        box = s.box(nick)  # (a second new class: the first is not registered for it)
        assert os.path.getsize(path) == 0
        box.put(nick(nick="x"))  # registers its own entity only
    with motedb.open(path, readonly=True) as r:
        assert r.box(full).count() == 0 and r.box(nick).get(1).nick == "x"


def test_a_read_registers_every_new_box_in_one_commit(tmp_path):
    """A read (or a write block) after several box() calls of new entities registers them
    all in one commit (one each before 2026-12-07: a new MoteSaver made three)."""
    path = tmp_path / "three.mote"
    classes = [define(FULL, "one"), define(NICK.replace("class C", "class D"), "two"),
               define(ONLY_N.replace("class C", "class E"), "three")]
    with motedb.open(path) as s:
        before = s.commit
        boxes = [s.box(cls) for cls in classes]
        with s.read():
            assert [b.count() for b in boxes] == [0, 0, 0]
        assert s.commit == before + 1
        boxes[2].put(classes[2](n=7))
    with motedb.open(path, readonly=True) as r:
        assert [r.box(cls).count() for cls in classes] == [0, 0, 1]


def test_a_box_made_in_a_write_block_rolled_back_reads_empty(tmp_path):
    """store.box() inside a store.write() block creates the entity in it; if the block
    rolls back, the box is as one made outside (deferred): reads find it empty (they
    raised SchemaError "entity ... does not exist" before 2026-12-07), the next write
    registers it."""
    path = tmp_path / "block-rollback.mote"
    full = define(FULL)
    with motedb.open(path) as s:
        with pytest.raises(KeyError):
            with s.write():
                box = s.box(full)
                box.put(full(name="gone"))
                raise KeyError("rolled back")
        assert box.count() == 0 and box.get(1) is None and s.box(full).all() == []
        box.put(full(name="kept"))
    with motedb.open(path, readonly=True) as r:
        assert [o.name for o in r.box(full).all()] == ["kept"]
