"""The durable truth (DESIGN.md layer 2): one Store interface, SQLite as the embedded default."""

from taskgate.store.base import Conflict, Store, StoreCorrupt, Tx

__all__ = ["Conflict", "Store", "StoreCorrupt", "Tx"]
