"""``doctor``: check one store for corruption and inconsistency, and repair what is derived.

Checks (each ``{name, ok, detail}``): SQLite ``integrity_check`` and ``foreign_key_check``; edges
pointing at missing or soft-deleted insights; half-written or out-of-contract insight rows;
numeric columns holding no number (``numeric_values``); embedding blobs that are mis-sized, non-finite or of a
minority dimension; oplog sanity; the status counters against a real count (``mnemon.store.counts``), and the triggers and the tables they
write into (counters, entity rows, the hot index's deletion log: a missing one fails every write that fires its
trigger); the ``mnemon_meta`` bookkeeping; file permissions (store directory 0700, database, side files and
derived files 0600, the derived folder 0700); and the derived index files in ``<db>.index/`` (asked whether they are
readable and current when the index module exists, otherwise "not present").

``repair`` removes dangling edges, rewrites malformed numbers (text, a blob, NULL or an infinity in a numeric
column: ``store.numeric``, each as the value every command already reads it as) and the values outside the
contract a valid one can stand for (an importance of 7, a negative access count, a weight of 4.5, tags that
are no JSON array: ``store.ranges``, each rule argued there; an importance lowered to 5 gets the effective
importance 5 gives) in one write transaction, recreates a table the triggers write into that is gone (the
deletion log, the counters, the entity rows), recounts counters that
disagree, deletes every derived file (the next command rebuilds it from SQLite, which stays the truth),
tightens permissions, and then checks again. Beyond those values (and that effective importance) it never touches insight rows: a failing
``integrity_check`` needs a backup, not a guess, and an empty content no value can stand for. Every check still
failing after the repair is listed in the report as "not repaired: <check>: <its detail>".
The SQL lives in ``mnemon.store.check``; this module never prints.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

from mnemon.engine import upkeep
from mnemon.engine.core import EngineBase
from mnemon.errors import NotFoundError, StoreError
from mnemon.store import check, counts, derived, numeric, ranges, registration
from mnemon.store.connection import DIR_MODE, FILE_MODE
from mnemon.store.layout import SIDE_SUFFIXES
from mnemon.store.schema import SCHEMA_VERSION

# SQLite's own companions of the database; everything else named "<db>.*" is ours and derived.
_SQLITE_SUFFIXES = (*SIDE_SUFFIXES, "-journal")


def derived_files(db_path: Path) -> list[Path]:
    """Rebuildable files: everything in the store's derived folder, plus old-layout leftovers."""
    inside: list[Path] = []
    index_folder = derived.folder(db_path)
    if index_folder.is_dir():
        inside = [p for p in index_folder.iterdir() if p.is_file()]
    return sorted([*inside, *derived.legacy_files(db_path)])


def misplaced_entries(db_path: Path) -> list[Path]:
    """What stands where derived files belong and is none: the derived folder's path holding anything
    but a directory, or an entry of the folder that is no regular file (a directory, a dangling link).
    Every command then fails on it ("not a directory"), and only --repair's deletion helps."""
    folder = derived.folder(db_path)
    if folder.is_dir():
        return sorted(p for p in folder.iterdir() if not p.is_file())
    return [folder] if os.path.lexists(folder) else []


def _entry(name: str, problems: list[str], ok_detail: str = "ok") -> dict[str, Any]:
    return {"name": name, "ok": not problems, "detail": ok_detail if not problems else check.json_detail(problems)}


class DoctorPipeline:
    """doctor [--repair]: consistency checks over the store and its derived files, and their repair."""

    def __init__(self, ctx: EngineBase) -> None:
        self.ctx = ctx

    def doctor(self, *, repair: bool = False) -> dict[str, object]:
        """Run every consistency check; with ``repair``, fix what is derived first (§ doctor)."""
        db_path = self.ctx.settings.db_path
        try:
            found = db_path.is_file() or registration.is_postgres(db_path.parent)
        except OSError:  # e.g. a store name longer than the file system allows
            found = False
        if not found:
            raise NotFoundError(f"database not found: {db_path}")
        if repair:
            self.ctx.require_writable("doctor --repair")
        # The local files: a PostgreSQL store has only its derived caches here (under store.path).
        local = self.ctx.store.path
        repaired: list[str] = []
        if repair:
            repaired = self._repair(local)
        checks = self._checks(local)
        report: dict[str, object] = {
            "ok": all(c["ok"] for c in checks),
            "store": self.ctx.settings.store,
            "db_path": str(db_path),
            "checks": checks,
        }
        if repair:
            # What --repair cannot mend is said, never left for the reader to notice (each check's detail
            # names the rows and why: a damaged file needs a backup, an empty content no value can stand for).
            report["repaired"] = [*repaired, *(f"not repaired: {c['name']}: {c['detail']}" for c in checks if not c["ok"])]
        return report

    # --- checks -----------------------------------------------------------------------------

    def _checks(self, db_path: Path) -> list[dict[str, Any]]:
        conn = self.ctx.store.conn
        integrity = check.integrity(conn)
        out = [_entry("integrity", integrity)]
        if integrity:
            # Other queries over a corrupt file may raise or mislead; the integrity rows say it all.
            return out
        out.append(_entry("foreign_keys", check.foreign_keys(conn)))
        out.append(_entry("meta", check.meta_problems(conn, SCHEMA_VERSION)))
        out.append(_entry("dangling_edges", check.describe_edges(check.dangling_edges(conn))))
        out.append(_entry("edge_values", [e.describe() for e in ranges.edges_out_of_range(conn)]))
        out.append(_entry("insights", ranges.insight_findings(conn)))
        out.append(_entry("numeric_values", numeric.describe(numeric.malformed(conn))))
        out.append(_entry("embeddings", check.bad_embeddings(conn, self.ctx.store.embedding_format)))
        out.append(_entry("oplog", check.oplog_problems(conn)))
        out.append(_entry("counters", counts.problems(conn) + self.ctx.store.trigger_problems()))
        out.append(_entry("permissions", self._permission_problems(db_path)))
        out.append(self._index_check(db_path))
        out.append(self._vector_index_check(db_path))
        return out

    def _permission_problems(self, db_path: Path) -> list[str]:
        problems = []
        for folder in (db_path.parent, derived.folder(db_path)):
            try:
                st = folder.stat()
            except FileNotFoundError:
                continue  # no derived folder yet
            if not stat.S_ISDIR(st.st_mode):
                continue  # a file where the folder belongs: the derived-index check names it
            mode = stat.S_IMODE(st.st_mode)
            if mode & ~DIR_MODE:
                problems.append(f"{folder}: mode {mode:o}, expected {DIR_MODE:o}")
        files = [db_path, *(Path(str(db_path) + s) for s in _SQLITE_SUFFIXES), *derived_files(db_path)]
        for path in files:
            try:
                mode = stat.S_IMODE(path.stat().st_mode)
            except OSError:
                continue  # side files come and go with connections
            if mode & ~FILE_MODE:
                problems.append(f"{path.name}: mode {mode:o}, expected {FILE_MODE:o}")
        return problems

    def _index_check(self, db_path: Path) -> dict[str, Any]:
        """Ask the hot-index module whether its file is readable and current; stale is fine (caught up)."""
        misplaced = misplaced_entries(db_path)
        if misplaced:
            folder = derived.folder(db_path)
            return _entry("derived_index", [
                f"{p.name} is not a {'directory' if p == folder else 'regular file'}; --repair deletes it"
                for p in misplaced
            ])  # fmt: skip
        files = derived_files(db_path)
        try:
            from mnemon.store import hotindex
        except ImportError:
            names = ", ".join(p.name for p in files)
            return _entry("derived_index", [], f"not present{': unknown files ' + names if names else ''}")
        path = hotindex.index_path(db_path)
        if not path.exists():
            return _entry("derived_index", [], "not present (built on the next recall)")
        loaded = hotindex.read_index(db_path)
        if loaded is None:
            return _entry("derived_index", [f"{path.name} is unreadable or foreign; --repair deletes it"])
        # every byte read against the checksums written with it: a damaged array is a wrong answer or
        # a crash in recall, whatever the fingerprint says
        damaged = [
            f"{file.name}: {', '.join(bad)} differ from their checksums; --repair deletes it"
            for file in (path, hotindex.delta_path(db_path))
            if (bad := hotindex.damaged_arrays(file))
        ]  # fmt: skip
        if damaged:
            return _entry("derived_index", damaged)
        header = loaded[0]
        current = hotindex.fingerprint(self.ctx.store.conn)
        recorded = header.get("fingerprint") if isinstance(header, dict) else None
        stamp = hotindex.read_stamp(db_path)
        try:
            built = hotindex.Fingerprint.from_json(recorded) if isinstance(recorded, dict) else None
        except (KeyError, TypeError, ValueError):
            built = None
        stamped = stamp is not None and stamp[0] == header.get("build_id") and stamp[1] == current
        if built == current or stamped:
            return _entry("derived_index", [], f"{path.name} current (generation {current.generation})")
        # A stale index is never trusted: the next reader catches it up or rebuilds it.
        return _entry("derived_index", [], f"{path.name} stale (caught up or rebuilt on the next read)")

    def _vector_index_check(self, db_path: Path) -> dict[str, Any]:
        """Ask the vector-index module whether ``<db>.index/vec.json`` describes the database."""
        try:
            from mnemon.store import hotindex, vectors
        except ImportError:
            return _entry("vector_index", [], "not present")
        header_path = derived.path(db_path, "vec.json")
        if not header_path.exists():
            return _entry("vector_index", [], "not present (built on the next vector search)")
        try:
            raw = json.loads(header_path.read_text(encoding="utf-8"))
            built = vectors.Header(**raw).fingerprint()
        except (OSError, ValueError, TypeError):
            return _entry("vector_index", [f"{header_path.name} is unreadable or foreign; --repair deletes it"])
        conn = self.ctx.store.conn
        with hotindex.read_snapshot(conn):  # the fingerprint, the index's catch-up and the rows compared: one state
            live = vectors.fingerprint(conn)
            if not (built == live or built.same_vectors(live)):
                return _entry("vector_index", [], "stale (caught up or rebuilt on the next vector search)")
            # current by its header: every row's bytes against the database (the header vouches for none)
            index = vectors.VectorIndex.open(conn, db_path, readonly=True, dim=int(raw["dim"]),
                                             model=str(raw.get("model", "")), fmt=str(raw.get("fmt", "float64")))
            problems = index.mismatches(conn) if index.mapped else []
        if not index.mapped:
            return _entry("vector_index", ["its files do not match vec.json; --repair deletes them"])
        if problems:
            return _entry("vector_index", [*problems, "--repair deletes the vector index (rebuilt from the database)"])
        return _entry("vector_index", [], f"current ({raw.get('rows')} rows, dim {raw.get('dim')})")

    # --- repair -----------------------------------------------------------------------------

    def _repair(self, db_path: Path) -> list[str]:
        done: list[str] = []
        conn = self.ctx.store.conn
        if not check.integrity(conn):
            # One transaction, and a generation bump so any derived index notices the change. The malformed
            # numbers are found inside it, so what is rewritten is what the transaction sees.
            # The out-of-range values are found after the malformed ones are rewritten (a fallback is in range).
            missing = self.ctx.store.trigger_problems()
            restarted = False
            with self.ctx.store.transaction("doctor --repair") as tx:
                if missing:
                    # First: the statements below fire the triggers, which fail on a table that is gone.
                    # Recreates a dropped table or trigger and recounts every counter; a deletion log
                    # restarted moves its epoch, so every hot index rebuilds (store/sequences.py).
                    restarted = self.ctx.store.reinstall_triggers(tx)
                removed = check.remove_dangling_edges(tx)
                rewritten = numeric.repair(tx, numeric.malformed(tx))
                outside = ranges.out_of_range(tx)
                ranges.repair(tx, outside)
                # An importance above 5 lowered to 5 moves its effective importance base: the stored value is
                # written as upkeep computes it (the row's other inputs already repaired above), not left for
                # the row's next upkeep.
                upkeep.refresh_effective_importance(tx, ranges.lowered_importance(outside), self.ctx.now())
            if removed:
                done.append(f"removed {removed} dangling edge(s)")
            if rewritten:
                done.append(f"rewrote {rewritten} malformed numeric value(s) as the value commands read them as")
            if outside:
                done.append(f"rewrote {len(outside)} value(s) outside the contract: " + check.sample(
                    [f"{o.where()}: {o.column} {check.shown(o.value)} -> {check.shown(o.repair)}" for o in outside]))
            tables = [p.split()[1] for p in missing if p.startswith("table ")]
            if tables:
                done.append(f"recreated the table(s) {', '.join(tables)}")
            entity_triggers = [p.split()[1] for p in missing if p.startswith("trigger insights_entities_")]
            if entity_triggers and "insight_entities" not in tables:
                done.append(f"recreated the trigger(s) {', '.join(entity_triggers)} and rewrote the entity lookup "
                            "from the insights")
            if restarted:
                done.append("restarted the deletion log (every recall index is rebuilt once)")
            if missing:
                done.append("recounted the status counters")
            elif counts.problems(conn):
                with self.ctx.store.transaction("doctor --repair") as tx:
                    self.ctx.store.reinstall_triggers(tx)  # recounts every counter
                done.append("recounted the status counters")
        for path in misplaced_entries(db_path):
            try:
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
            except OSError as exc:
                raise StoreError(f"cannot delete {path}: {exc.strerror}") from exc
            done.append(f"deleted {path.name}, which stood where derived files belong (rebuilt on the next call)")
        for path in derived_files(db_path):
            if path.name.endswith(".lock"):
                continue  # a flock target another process may hold: deleting it would split the lock
            try:
                path.unlink()
                done.append(f"deleted derived file {path.name} (rebuilt on the next call)")
            except FileNotFoundError:
                pass
        targets = [
            (db_path.parent, DIR_MODE), (derived.folder(db_path), DIR_MODE),
            *((Path(str(db_path) + s), FILE_MODE) for s in ("", *_SQLITE_SUFFIXES)),
        ]  # fmt: skip
        for path, wanted in targets:
            try:
                if stat.S_IMODE(path.stat().st_mode) & ~wanted:
                    os.chmod(path, wanted)
                    done.append(f"chmod {wanted:o} {path.name}")
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise StoreError(f"cannot chmod {path}: {exc.strerror}") from exc
        return done
