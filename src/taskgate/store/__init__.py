"""The durable truth (DESIGN.md layer 2): one Store interface (store/base.py), SQLite as the
embedded default (store/sqlite.py). Nothing is imported here, so that the hook process can read
store/snapshot.py without loading the rest."""
