"""The MnemonError tree: every user-facing failure is one of these.

``str(e)`` is exactly the message the contract prescribes; ``mnemon.cli.main`` prints it as
``Error: <msg>`` and exits 1 (contract §3.1, Decision 9). stdlib only.

    MnemonError
    ├── InputError              bad flag value, content too long, bad category (before opening the DB)
    ├── NotFoundError           insight / edge / store not found
    ├── ReadonlyModeError       mutating command under --readonly
    ├── StoreError              unexpected SQLite failure (chained from the apsw exception)
    │   ├── StoreBusyError      the database stayed locked past the busy timeout
    │   └── SchemaVersionError  database newer than this code, or not a mnemon database
    ├── LibraryMissingError     a library of the base install is absent (a broken or partial install)
    └── EmbedderError           (chained from the httpx exception)
        ├── EmbedderUnavailable     connect error / timeout / probe failure: transient
        └── EmbedderResponseError   bad status, bad JSON, wrong dimension: permanent
"""

from __future__ import annotations


class MnemonError(Exception):
    """Base of every error mnemon reports to a user."""


class InputError(MnemonError):
    """A flag, argument or input file is invalid; nothing was written."""


class NotFoundError(MnemonError):
    """An insight, edge or store does not exist (or is no longer active)."""


class ReadonlyModeError(MnemonError):
    """A mutating command was refused because --readonly is set."""

    def __init__(self, action: str) -> None:
        super().__init__(f"{action} is unavailable with --readonly: database writes are disabled")
        self.action = action


class StoreError(MnemonError):
    """SQLite failed in a way the user cannot fix by changing the input."""


class StoreBusyError(StoreError):
    """Another process held the write lock past the busy timeout."""


class SchemaVersionError(StoreError):
    """The file is not a mnemon database, or was written by a newer version."""


class LibraryMissingError(MnemonError):
    """A library the base install depends on cannot be imported: the install is broken or partial
    (an upgrade in place that skipped a new dependency); reinstalling mnemon fixes it."""


class EmbedderError(MnemonError):
    """The embedding server could not produce a vector."""


class EmbedderUnavailable(EmbedderError):
    """The server is not reachable (connect error, time-out, failed probe)."""


class EmbedderResponseError(EmbedderError):
    """The server answered, but with an error status or an unusable payload."""


def go_quote(s: str) -> str:
    """Quote like Go's ``%q`` for the common cases (escapes quotes, backslashes, controls): a value shown in
    an error as the Go program shows it, on one line whatever it holds."""
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif not ch.isprintable():
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'
