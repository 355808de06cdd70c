"""ObjectBox through its Python API (PyPI objectbox), in the three model-sync variants of the seed.

objectbox 5.0's Store(...) takes a Model; before opening, Store._sync_model() syncs the model's IDs with the model
JSON file (reads it, writes it if it changed) unless that Model object was already synced with that file, and then
the model is passed to the C store, which checks it against the schema stored in the database. So:

  sync   "ObjectBox (sync every open)": a new Model() (same entity class) for every open and create, so the
         model JSON is read and matched on every open, and the C model is built and checked every time.
  cached "ObjectBox (cached model)": one Model object for the process; it is synced with the JSON once (first
         store), later opens skip the JSON but still build the C model and have the store check it (what
         Store(model="default") does by itself through objectbox's model cache).
  skip   "ObjectBox (skip model sync)": the cached Model plus Store(skip_model_sync=True): an existing store is
         opened with the schema stored in its database, no model passed to the C store. New stores (create) get
         the model as usual.

Writes: Box.put(list) puts the objects in one write transaction; ObjectBox syncs each commit to disk by default.
Objects are marshalled with the generic flatbuffers.Builder unless --objectbox-builder picks an experimental one.
"""

from .base import Backend

VARIANTS = {
    "sync": "ObjectBox (sync every open)",
    "cached": "ObjectBox (cached model)",
    "skip": "ObjectBox (skip model sync)",
}

HOW = {
    "sync": "new objectbox.Model() with the entity for every Store(): model JSON synced and C model checked on "
            "every open",
    "cached": "one Model object reused: JSON synced once per process, C model still built and checked on every open",
    "skip": "one Model object reused and Store(skip_model_sync=True): existing stores opened with their stored "
            "schema",
}

_note_class = None


def availability():
    try:
        import objectbox  # noqa: F401
    except Exception as e:
        return f"objectbox does not import: {type(e).__name__}: {e}"
    return None


def _note():
    global _note_class
    if _note_class is None:
        from objectbox import Entity, Id, String, Int64, Date

        @Entity()
        class Note:
            id = Id
            text = String
            value = Int64
            created = Date(py_type=int)  # milliseconds since the epoch, read back as int

        _note_class = Note
    return _note_class


class ObjectBoxBackend(Backend):
    store_is_directory = True

    def __init__(self, work_dir, variant, builder="generic"):
        import objectbox
        from objectbox import Model, Store
        if variant not in VARIANTS:
            raise ValueError(f"unknown ObjectBox variant {variant!r}")
        self.objectbox = objectbox
        self.Store = Store
        self.Model = Model
        self.Note = _note()
        self.variant = variant
        self.label = VARIANTS[variant]
        self.work_dir = work_dir
        self.model_json = f"{work_dir}/objectbox-model.json"
        self.builder = builder
        if builder == "fast":
            from objectbox import experimental
            experimental.enable_fast_flatbuffers_builder()
        elif builder == "codegen":
            from objectbox import experimental
            experimental.enable_flatbuffers_codegen()
        elif builder != "generic":
            raise ValueError(f"unknown ObjectBox builder {builder!r}")
        self.model = Model()
        self.model.entity(self.Note)

    def describe(self):
        from importlib import metadata
        return {
            "objectbox": metadata.version("objectbox"),
            "objectbox_core": str(self.objectbox.version_core),
            "variant": self.variant,
            "how": HOW[self.variant],
            "flatbuffers_builder": self.builder,
            "write": "Box.put(list of 10/1,000 objects): one write transaction, synced on commit (default)",
            "model_json": "one objectbox-model.json per worker process, shared by its stores",
        }

    def store_path(self, root, index):
        return f"{root}/store-{index:06d}"

    def _store(self, path):
        if self.variant == "sync":
            model = self.Model()
            model.entity(self.Note)
            return self.Store(model=model, model_json_file=self.model_json, directory=path)
        if self.variant == "cached":
            return self.Store(model=self.model, model_json_file=self.model_json, directory=path)
        return self.Store(model=self.model, model_json_file=self.model_json, directory=path, skip_model_sync=True)

    def prepare(self, rows):
        Note = self.Note
        return [Note(text=t, value=v, created=c) for (t, v, c) in rows]

    def create(self, path, prepared):
        store = self._store(path)
        store.box(self.Note).put(prepared)
        store.close()

    def open(self, path):
        return self._store(path)

    def read_all(self, store):
        return store.box(self.Note).get_all()

    def count(self, store):
        return store.box(self.Note).count()

    def close(self, store):
        store.close()

    def as_row(self, obj):
        return obj.text, obj.value, obj.created


def create_backend(workload, work_dir, variant="cached", builder="generic", **_ignored):
    return ObjectBoxBackend(work_dir, variant, builder)
