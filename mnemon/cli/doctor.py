"""``mnemon doctor [--repair]``: the consistency check as a command users can run.

Prints the JSON report ``{ok, store, db_path, checks: [{name, ok, detail}], repaired?}`` on
stdout in every case. Exit status 0 when every check passes; otherwise the report is still
printed and ``Error: doctor found problems: <names>`` goes to stderr with exit 1, so a script
can test ``mnemon doctor`` like any other command. ``--repair`` (refused under --readonly)
removes dangling edges in one transaction, deletes derived index files (rebuilt on the next
call) and tightens permissions before checking.
"""

from __future__ import annotations

import typer

from mnemon.cli import render
from mnemon.cli.state import open_engine
from mnemon.errors import StoreError


class DoctorFoundProblems(StoreError):
    """The report was printed; at least one check failed."""


def doctor(
    ctx: typer.Context,
    repair: bool = typer.Option(False, "--repair", help="remove dangling edges, rebuild derived files, fix modes"),
) -> None:
    """Check the store for corruption and inconsistency (exit 1 if any check fails)."""
    with open_engine(ctx.obj) as engine:
        report = engine.doctor(repair=repair)
    render.emit_json(report)
    if not report["ok"]:
        failed = [str(c["name"]) for c in report["checks"] if not c["ok"]]  # type: ignore[attr-defined]
        raise DoctorFoundProblems(f"doctor found problems: {', '.join(failed)}")


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)
