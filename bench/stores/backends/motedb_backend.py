"""MoteDB through its Python API (the motedb package of this repository).

One store is one file (store-NNNNNN.mote). The schema lives in the store, so opening an existing store with an
unchanged entity class is one lookup and a hash compare: there is no model file and nothing like ObjectBox's model
sync to skip. create(): motedb.open() creates the file and writes its creation page (no sync), store.box()
finds the entity missing and writes nothing, box.put_many() registers it and writes all objects in one
transaction, the store's first durable commit (one fdatasync and one fsync of the directory), close() writes the
clean-close marker (no sync). open(): 8 system calls (open, fstat, flock, three byte-lock calls, one pread() of the root slots, flock); the ten
small objects of the small workload live inside that slot, so reading them needs no further I/O.

The motedb package is built from this checkout into .bench-venvs/stores/ by `python3 -m bench.stores` before the
run starts (Venv.install_motedb in bench/common/venvs.py, through bench/common/motedb_pkg.py: rebuilt whenever
src/, include/, python/ or the build files changed since the last install there). A failed build is printed; if
motedb then does not import, availability() says why and MoteDB is reported unavailable.
"""

from .base import Backend

_note_class = None


def availability():
    try:
        import motedb  # noqa: F401
    except Exception as e:  # not built or not installed in this environment
        return f"motedb does not import: {type(e).__name__}: {e}"
    return None


def _note():
    global _note_class
    if _note_class is None:
        import motedb

        class Note(motedb.Entity):
            id: int = 0
            text: str = ""
            value: int = 0
            created: int = 0  # milliseconds since the epoch, as for the other engines

        _note_class = Note
    return _note_class


class MoteDBBackend(Backend):
    label = "MoteDB"

    def __init__(self, work_dir):
        import motedb
        self.motedb = motedb
        self.Note = _note()
        self.work_dir = work_dir

    def describe(self):
        return {
            "motedb": self.motedb.__version__,
            "write": "box.put_many(list of 10/1,000 objects): one write transaction, one fdatasync",
            "schema": "stored in the store; no model file",
        }

    def store_path(self, root, index):
        return f"{root}/store-{index:06d}.mote"

    def prepare(self, rows):
        Note = self.Note
        return [Note(text=t, value=v, created=c) for (t, v, c) in rows]

    def create(self, path, prepared):
        store = self.motedb.open(path)
        store.box(self.Note).put_many(prepared)
        store.close()

    def open(self, path):
        return self.motedb.open(path)

    def read_all(self, store):
        return store.box(self.Note).all()

    def count(self, store):
        return store.box(self.Note).count()

    def close(self, store):
        store.close()

    def as_row(self, obj):
        return obj.text, obj.value, obj.created


def create_backend(workload, work_dir, **_ignored):
    return MoteDBBackend(work_dir)
