"""One "machine" of the multi-writer PostgreSQL tests: a process with its own data directory
(its own local caches) that runs mnemon commands in-process, one after another, against a shared
PostgreSQL store, and records every acknowledged write (exit status 0) in an fsync'ed file.

    python -m tests.pg_writer DATA_DIR NAME COUNT ACK_FILE

Per step ``i``: ``remember "<NAME> note <i> ..."``; every 5th step also one of ten contents all
writers share (the exact-duplicate rule must store each once); every 10th a ``recall``; every
25th a ``forget`` of one of its own earlier notes. A failed command (a server restart, a lost
connection) is recorded as such and the writer goes on: it must never have half-written.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys

SHARED = [f"shared fact number {k} that every machine learns about the cluster" for k in range(10)]


def run(data_dir: str, *argv: str) -> tuple[int, str, str]:
    from mnemon.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--data-dir", data_dir, "--store", "team", *argv])
    return code, out.getvalue(), err.getvalue()


def main() -> None:
    data_dir, name, count, ack_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    fd = os.open(ack_path, os.O_CREAT | os.O_APPEND | os.O_WRONLY, 0o600)

    def ack(record: dict[str, object]) -> None:
        os.write(fd, (json.dumps(record) + "\n").encode())
        os.fsync(fd)

    mine: list[str] = []
    for i in range(count):
        contents = [f"{name} note {i} about subject {name}{i} and the shared cluster"]
        if i % 5 == 0:
            contents.append(SHARED[(i // 5) % len(SHARED)])
        for content in contents:
            code, out, err = run(data_dir, "remember", content, "--source", name)
            if code == 0:
                row = json.loads(out)
                ack({"op": "remember", "id": row["id"], "action": row["action"], "content": content})
                if row["action"] == "added" and content.startswith(name):
                    mine.append(row["id"])
            else:
                ack({"op": "failed", "content": content, "err": err.strip()})
        if i % 10 == 9:
            code, out, err = run(data_dir, "recall", f"subject {name}{i}")
            ack({"op": "recall", "code": code, "err": err.strip()})
        if i % 25 == 24 and mine:
            victim = mine.pop(0)
            ack({"op": "forget-attempt", "id": victim})
            code, out, err = run(data_dir, "forget", victim)
            if code == 0:
                ack({"op": "forget", "id": victim})
    os.close(fd)


if __name__ == "__main__":
    main()
