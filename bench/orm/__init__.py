"""bench.orm: the ORM benchmark (MoteDB, ObjectBox, sqlite3 and the Python ORMs on SQLite).

Run from the repository root: python3 -m bench.orm --help (see README.md).
"""
