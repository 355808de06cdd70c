"""Relations: motedb.ToOne["Other"] / motedb.ToMany["Other"], backlinks, link queries."""

import pytest

import motedb


class RelAuthor(motedb.Entity):
    id: int = 0
    name: str = ""


class RelTag(motedb.Entity):
    id: int = 0
    label: str = ""


class RelBook(motedb.Entity):
    id: int = 0
    title: str = ""
    year: int = 0
    author: motedb.ToOne["RelAuthor"]
    tags: motedb.ToMany["RelTag"]


class RelNode(motedb.Entity):  # self-references (ORM benchmark, test 2)
    id: int = 0
    name: str = ""
    level: int = 0
    parent: motedb.ToOne["RelNode"] | None = None
    related: motedb.ToMany["RelNode"]


@pytest.fixture
def store(tmp_path):
    with motedb.open(tmp_path / "rel.mote") as s:
        yield s


def test_relation_slots_are_shown_to_the_collector(store):
    """Relation slots may hold objects: ent_traverse visits them (entity.c)."""
    import gc
    a, b = RelNode(name="a"), RelNode(name="b")
    store.box(RelNode).put_many([a, b])
    a.parent = b
    assert any(x is b for x in gc.get_referents(a)) or \
        any(x is b for r in gc.get_referents(a) if isinstance(r, (list, dict)) for x in r)


def test_to_one_set_get_none_dangling(store):
    authors, books = store.box(RelAuthor), store.box(RelBook)
    ann = RelAuthor(name="Ann")
    authors.put(ann)
    b = RelBook(title="One", author=ann)
    assert b.author is ann and b.author_id == ann.id
    books.put(b)
    got = books.get(b.id)
    assert got.author_id == ann.id
    assert got.author == ann and got.author is got.author  # loaded once, then cached
    assert got == books.get(b.id)  # a loaded to-one compares as its id
    assert "author=%d" % ann.id in repr(got) and "tags" not in repr(got)
    got.author = None
    assert got.author is None and got.author_id is None
    books.put(got)
    assert books.get(b.id).author is None
    # set by id
    got.author_id = ann.id
    books.put(got)
    assert books.get(b.id).author.name == "Ann"
    assert books.query(RelBook.author == ann).ids() == [b.id]
    assert books.query(RelBook.author.is_null()).count() == 0
    # dangling: the target was removed
    authors.remove(ann)
    again = books.get(b.id)
    assert again.author_id == ann.id and again.author is None
    # an object that is not attached to a store cannot load its target
    with pytest.raises(RuntimeError, match="store"):
        RelBook(title="x", author=5).author


def test_to_many_add_remove_reload(store):
    tags, books = store.box(RelTag), store.box(RelBook)
    t1, t2, t3 = RelTag(label="a"), RelTag(label="b"), RelTag(label="c")
    tags.put_many([t1, t2, t3])
    b = RelBook(title="B")
    assert b.tags == []  # a new object: empty list
    b.tags.append(t1)
    b.tags.append(t2)
    books.put(b)
    got = books.get(b.id)
    assert [t.label for t in got.tags] == ["a", "b"]
    got.tags.remove(t1)
    got.tags.append(t3)
    books.put(got)
    assert [t.label for t in books.get(b.id).tags] == ["b", "c"]
    got.tags = [t1, t1]  # assigning replaces the set of links (duplicates: one link)
    books.put(got)
    assert [t.label for t in books.get(b.id).tags] == ["a"]
    # an object whose list was never read keeps its links when put
    other = books.get(b.id)
    other.title = "renamed"
    books.put(other)
    assert [t.label for t in books.get(b.id).tags] == ["a"]
    # put_many writes links too; constructor lists work
    more = [RelBook(title=f"m{i}", tags=[t2, t3]) for i in range(3)]
    books.put_many(more)
    assert all(len(books.get(m.id).tags) == 2 for m in more)


def test_backlinks(store):
    authors, tags, books = store.box(RelAuthor), store.box(RelTag), store.box(RelBook)
    ann, bob = RelAuthor(name="Ann"), RelAuthor(name="Bob")
    authors.put_many([ann, bob])
    t1, t2 = RelTag(label="x"), RelTag(label="y")
    tags.put_many([t1, t2])
    b1 = RelBook(title="1", author=ann, tags=[t1])
    b2 = RelBook(title="2", author=ann, tags=[t1, t2])
    b3 = RelBook(title="3", author=bob)
    books.put_many([b1, b2, b3])
    assert [b.title for b in books.backlinks(RelBook.author, ann)] == ["1", "2"]
    assert [b.title for b in books.backlinks(RelBook.author, bob.id)] == ["3"]
    assert [b.title for b in books.backlinks(RelBook.tags, t1)] == ["1", "2"]
    assert [b.title for b in books.backlinks(RelBook.tags, t2)] == ["2"]
    assert books.backlinks(RelBook.tags, 999) == []
    with pytest.raises(TypeError):
        books.backlinks(RelBook.title, ann)
    with pytest.raises(TypeError):
        books.backlinks(RelBook.author, t1)  # not a RelAuthor


def test_remove_cleans_to_many_links(store):
    tags, books = store.box(RelTag), store.box(RelBook)
    t1, t2 = RelTag(label="x"), RelTag(label="y")
    tags.put_many([t1, t2])
    b = RelBook(title="b", tags=[t1, t2])
    c = RelBook(title="c", tags=[t1])
    books.put_many([b, c])
    tags.remove(t1)  # removing a target removes the links to it
    assert [t.label for t in books.get(b.id).tags] == ["y"]
    assert books.get(c.id).tags == []
    books.remove(b)  # removing a source removes its links
    assert books.backlinks(RelBook.tags, t2) == []


def test_queries_across_links(store):
    authors, tags, books = store.box(RelAuthor), store.box(RelTag), store.box(RelBook)
    ann, bob = RelAuthor(name="Ann"), RelAuthor(name="Bob")
    authors.put_many([ann, bob])
    t1, t2 = RelTag(label="sf"), RelTag(label="crime")
    tags.put_many([t1, t2])
    books.put_many([RelBook(title="1", year=1990, author=ann, tags=[t1]),
                    RelBook(title="2", year=2000, author=bob, tags=[t1, t2]),
                    RelBook(title="3", year=2010, author=bob)])
    q = books.query(RelBook.author.has(RelAuthor.name == "Bob"))
    assert [b.title for b in q.order_by(RelBook.title).find()] == ["2", "3"]
    assert books.query(RelBook.tags.has(RelTag.label == "crime")).count() == 1
    q = books.query(RelBook.tags.has(RelTag.label.in_(["sf", "crime"])) & (RelBook.year > 1995))
    assert [b.title for b in q.find()] == ["2"]
    assert "has(" in repr(RelBook.author.has(RelAuthor.name == "Bob"))
    # the query sees later changes (it is built per run)
    books.put(RelBook(title="4", author=bob))
    assert books.query(RelBook.author.has(RelAuthor.name == "Bob")).count() == 3
    with pytest.raises(TypeError):
        RelBook.author.has(RelTag.label == "sf")  # a condition on the wrong entity
    with pytest.raises(TypeError):
        RelBook.title.has(RelAuthor.name == "x")
    with pytest.raises(TypeError):
        ~RelBook.author.has(RelAuthor.name == "x")


def test_self_references(store):
    nodes = store.box(RelNode)
    root = RelNode(name="root", level=0)
    nodes.put(root)
    kids = [RelNode(name=f"k{i}", level=1, parent=root) for i in range(3)]
    nodes.put_many(kids)
    kids[0].related = [kids[1], kids[2], root]
    nodes.put(kids[0])
    k0 = nodes.get(kids[0].id)
    assert k0.parent.name == "root" and k0.parent.parent is None
    assert [n.name for n in k0.related] == ["root", "k1", "k2"]  # loaded in id order
    assert [n.name for n in nodes.backlinks(RelNode.parent, root)] == ["k0", "k1", "k2"]
    assert [n.name for n in nodes.backlinks(RelNode.related, root)] == ["k0"]
    assert nodes.query(RelNode.parent.has(RelNode.level == 0)).count() == 3
    assert nodes.query(RelNode.related.has(RelNode.name == "k2")).ids() == [kids[0].id]


def test_string_annotations_forward_references(store):
    ns = {}
    exec("from __future__ import annotations\n"
         "import motedb\n"
         "class RelFwdA(motedb.Entity):\n"
         "    id: int = 0\n"
         "    b: motedb.ToOne['RelFwdB']\n"
         "    bs: motedb.ToMany[RelFwdB]\n"
         "    me: ToOne[RelFwdA] | None\n"
         "class RelFwdB(motedb.Entity):\n"
         "    id: int = 0\n"
         "    n: int = 0\n", ns)
    A, B = ns["RelFwdA"], ns["RelFwdB"]
    assert A.b.target == "RelFwdB" and A.bs.target == "RelFwdB" and A.me.target == "RelFwdA"
    b = B(n=7)
    store.box(B).put(b)
    a = A(b=b, bs=[b])
    store.box(A).put(a)
    a.me = a
    store.box(A).put(a)
    got = store.box(A).get(a.id)
    assert got.b.n == 7 and [x.n for x in got.bs] == [7] and got.me.id == a.id


def test_errors(store):
    authors, tags, books = store.box(RelAuthor), store.box(RelTag), store.box(RelBook)
    tag = RelTag(label="t")
    tags.put(tag)
    b = RelBook(title="b")
    with pytest.raises(TypeError, match="expected a RelAuthor"):
        b.author = tag  # wrong entity
    with pytest.raises(ValueError, match="put it first"):
        b.author = RelAuthor(name="unsaved")
    with pytest.raises(TypeError, match="expected a RelTag"):
        b.tags = [RelAuthor(name="x")]
    with pytest.raises(TypeError):
        b.tags = "abc"
    with pytest.raises(ValueError):
        b.author = -1
    # constructor values are checked by put; nothing is written on error
    with pytest.raises(ValueError, match="put it first"):
        books.put(RelBook(title="c", author=RelAuthor(name="unsaved")))
    with pytest.raises(TypeError, match="expected a RelAuthor"):
        books.put(RelBook(title="c", author=tag))
    with pytest.raises(ValueError, match="put it first"):
        books.put(RelBook(title="d", tags=[RelTag(label="unsaved")]))
    assert books.count() == 0
    # inside a transaction, a failed put dooms it: nothing is committed
    with pytest.raises(ValueError):
        with store.write():
            books.put(RelBook(title="e"))
            books.put(RelBook(title="f", tags=[RelTag(label="unsaved")]))
    assert books.count() == 0
    with pytest.raises(TypeError, match="relation"):
        exec("class RelBad(motedb.Entity):\n    id: int = 0\n    x: motedb.ToMany['A'] = 5\n",
             {"motedb": motedb})
    with pytest.raises(TypeError, match="relation"):
        exec("class RelBad(motedb.Entity):\n    id: int = 0\n    x: motedb.ToOne\n",
             {"motedb": motedb})
    assert authors.count() == 0


def test_links_in_transactions(store):
    tags, books = store.box(RelTag), store.box(RelBook)
    with store.write():
        t = RelTag(label="t")
        tags.put(t)
        b = RelBook(title="b", tags=[t])
        books.put(b)
        assert [x.label for x in books.get(b.id).tags] == ["t"]
    assert [x.label for x in books.get(b.id).tags] == ["t"]
    with pytest.raises(RuntimeError):
        with store.write():
            got = books.get(b.id)
            got.tags = []
            books.put(got)
            raise RuntimeError("roll back")
    assert [x.label for x in books.get(b.id).tags] == ["t"]
