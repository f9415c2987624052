"""The gateway's bearer tokens: ``<data-dir>/gateway/tokens.json``, mode 0600 (stdlib only).

A token is 256 random bits (``mnemon_`` + URL-safe base64) shown once by ``mcp token create``;
the file keeps only its SHA-256, so a copy of the file opens nothing. A presented token is hashed
and compared with every entry by ``hmac.compare_digest`` (no early exit, so the time does not say
how much of a hash matched). Each entry names the one store it opens, whether it may write, when
it expires and whether it was revoked; the name is what the gateway's log and the oplog show,
never the token. The gateway re-reads the file when it changes, so a revoke takes effect at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from mnemon.errors import InputError, NotFoundError, StoreError

PREFIX = "mnemon_"
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")
MAX_DAYS = 36_500


@dataclass(frozen=True, slots=True)
class Token:
    """One token's record (everything but the token itself)."""

    name: str
    store: str
    read_only: bool
    created_at: str
    expires_at: str | None
    revoked_at: str | None
    sha256: str

    def public(self) -> dict[str, object]:
        """What ``token list`` shows: never the hash."""
        return {"name": self.name, "store": self.store, "read_only": self.read_only,
                "created_at": self.created_at, "expires_at": self.expires_at, "revoked": self.revoked_at is not None}

    def refusal(self, now: datetime) -> str | None:
        """Why this token opens nothing now, or None when it is valid."""
        if self.revoked_at is not None:
            return "token revoked"
        if self.expires_at is not None and _parse(self.expires_at) <= now:
            return "token expired"
        return None


def path(data_dir: Path) -> Path:
    return data_dir / "gateway" / "tokens.json"


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def _stamp(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(stamp: str) -> datetime:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)


def now_utc() -> datetime:
    return datetime.now(timezone.utc)


def load(data_dir: Path) -> list[Token]:
    """Every record in the file (none when it does not exist)."""
    try:
        raw = json.loads(path(data_dir).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise StoreError(f"cannot read the gateway token file: {exc}") from exc
    try:
        return [Token(**entry) for entry in raw["tokens"]]
    except (KeyError, TypeError) as exc:
        raise StoreError(f"cannot read the gateway token file: unexpected layout ({exc})") from exc


def _save(data_dir: Path, tokens: list[Token]) -> None:
    target = path(data_dir)
    tmp = target.with_name(".tokens.json.tmp")
    body = json.dumps({"tokens": [asdict(t) for t in tokens]}, indent=2) + "\n"
    try:
        fd = os.open(tmp, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(body)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o600)  # a tmp left by a crash keeps its old mode otherwise
        os.replace(tmp, target)
    except OSError as exc:
        raise StoreError(f"cannot write the gateway token file: {exc.strerror}") from exc


@contextlib.contextmanager
def _locked(data_dir: Path) -> Iterator[None]:
    """Serialise writers of the token file (two `token create` at once must not lose one)."""
    folder = path(data_dir).parent
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd = os.open(folder / ".tokens.lock", os.O_CREAT | os.O_RDWR, 0o600)
    except OSError as exc:
        raise StoreError(f"cannot open the gateway token file: {exc.strerror}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def check_name(name: str) -> str:
    if not name or len(name) > 64 or not set(name) <= _NAME_CHARS:
        raise InputError(f'invalid token name "{name}": use 1-64 letters, digits, ".", "_" or "-"')
    return name


def create(data_dir: Path, name: str, store: str, *, read_only: bool, expires_days: int | None,
           now: datetime | None = None) -> tuple[Token, str]:
    """Add a token; return its record and the token itself (the only time it exists in clear)."""
    check_name(name)
    if expires_days is not None and not 1 <= expires_days <= MAX_DAYS:
        raise InputError(f"--expires must be between 1 and {MAX_DAYS} days, got {expires_days}")
    moment = now or now_utc()
    secret = PREFIX + secrets.token_urlsafe(32)
    record = Token(name, store, read_only, _stamp(moment),
                   _stamp(moment + timedelta(days=expires_days)) if expires_days else None, None, digest(secret))
    with _locked(data_dir):
        tokens = load(data_dir)
        if any(t.name == name and t.revoked_at is None for t in tokens):
            raise InputError(f'token "{name}" already exists (revoke it first, or choose another name)')
        # a revoked token's name is free again: its record goes (that token authenticates nothing either way)
        _save(data_dir, [*(t for t in tokens if t.name != name), record])
    return record, secret


def revoke(data_dir: Path, name: str, now: datetime | None = None) -> Token:
    check_name(name)
    with _locked(data_dir):
        tokens = load(data_dir)
        found = next((t for t in tokens if t.name == name), None)
        if found is None:
            raise NotFoundError(f'token "{name}" does not exist')
        if found.revoked_at is not None:
            return found
        revoked = Token(**{**asdict(found), "revoked_at": _stamp(now or now_utc())})
        _save(data_dir, [revoked if t.name == name else t for t in tokens])
    return revoked


def match(tokens: list[Token], presented: str) -> Token | None:
    """The record whose hash is the presented token's; every record is compared (constant time each)."""
    wanted = digest(presented)
    found = None
    for token in tokens:
        if hmac.compare_digest(token.sha256, wanted):
            found = token
    return found


class TokenTable:
    """The gateway's view of the token file, re-read when the file's identity or mtime changes."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._seen: tuple[int, int, int] | None = None
        self._tokens: list[Token] = []

    def current(self) -> list[Token]:
        try:
            st = os.stat(path(self.data_dir))
            seen = (st.st_ino, st.st_size, st.st_mtime_ns)
        except FileNotFoundError:
            seen = None
        if seen != self._seen or seen is None:
            self._tokens = load(self.data_dir) if seen is not None else []
            self._seen = seen
        return self._tokens

    def authenticate(self, presented: str, now: datetime | None = None) -> tuple[Token | None, str]:
        """(token, "") when valid; (None, reason) otherwise. The reason never quotes the token."""
        token = match(self.current(), presented)
        if token is None:
            return None, "unknown token"
        reason = token.refusal(now or now_utc())
        return (None, reason) if reason else (token, "")
