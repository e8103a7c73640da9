"""`taskgate migrate [--from-sqlite [PATH]]`: the store's schema version and migrations, and the
copy of an embedded store into a team's PostgreSQL database (issue 20, docs/teams.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from taskgate.cli.commands import emit, engine_for
from taskgate.errors import EXIT_OK


def cmd_migrate(args: argparse.Namespace) -> int:
    """Report the schema version, apply pending migrations, copy an embedded store."""
    from taskgate.store.migrate import migrate

    with engine_for(args) as engine:
        source = None
        if args.from_sqlite is not None:
            source = Path(args.from_sqlite) if args.from_sqlite else engine.ws.db_path
        report = migrate(engine.ws, lambda: engine.open_store(create=True), source)
        emit(args, report.to_json(), _text(report, source))
    return EXIT_OK


def _text(report: Any, source: Path | None) -> str:
    names = report.applied_before + report.applied_now
    lines = [
        f"store: {report.where}",
        f"schema version {report.version} of {report.to_json()['latest']} "
        f"({', '.join(names) or 'none'}); applied now: {', '.join(report.applied_now) or 'none'}",
    ]
    if source is not None:
        counts = ", ".join(f"{n} {table}" for table, n in report.copied.items())
        lines += [
            f"copied {source} into it: {counts}",
            f"hint: {source} is no longer read while the database is configured; keep it as a "
            f"backup (mv {source} {source}.embedded) and run 'taskgate audit' to check the trail",
        ]
    return "\n".join(lines)


def register(add: Any) -> None:
    """Issue 20's command."""
    s = add("migrate", cmd_migrate, "schema version and migrations; copy SQLite into PostgreSQL")
    s.add_argument("--from-sqlite", nargs="?", const="", metavar="PATH",
                   help="copy this embedded store (default .taskgate/state.db) into the "
                   "empty PostgreSQL database the workspace is configured with")  # fmt: skip
