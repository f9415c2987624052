"""EngineBase: the context every pipeline works over, and the one thing they share.

A pipeline (``write``, ``retrieve``, ``read``, ``upkeep``, ``bulk``, ``embedding``, ``doctor``,
``graphview``) is an object holding one ``EngineBase``, its context, and nothing else it could share:
settings, the clock, the open store, the embedder, and the derived indexes (the hot index, and the
vector index through :attr:`EngineBase.vectors`), which ``after_write`` keeps current after every
committed write. ``Engine`` (``mnemon.engine.composed``) is the context plus every pipeline and the
one facade the CLI, the servers and library users call.

The engine owns transaction boundaries and I/O order; it never prints. The clock is injectable
(``now``) so the contract's time rules are testable. The embedder is probed lazily and at most
once per engine: an unreachable server is a state (embedding-free mode), not an error.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from mnemon import text
from mnemon.config import Settings, check_store_name
from mnemon.errors import EmbedderError, EmbedderUnavailable, ReadonlyModeError
from mnemon.store import Store
from mnemon.store.layout import migrate_legacy
from mnemon.store.registration import is_loopback_host

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from mnemon.embed import Embedder
    from mnemon.engine.hot import HotIndex
    from mnemon.engine.vectors import Vectors
    from mnemon.records import SimilarityScale


def utc_now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


def format_ts(moment: datetime) -> str:
    """RFC 3339 UTC with second precision (§2.3): ``2026-02-18T10:00:00Z``."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


_LOOPBACK_CONNECT_S = 0.2


def _loopback_refused(endpoint: str) -> bool:
    """Return True when the endpoint is on this machine and nothing listens on its port.

    A refused local connection is a definite "unavailable", learnt in well under a millisecond
    with a bare socket; the HTTP probe would say the same after importing httpx (~100 ms of a
    short CLI run such as ``remember`` without Ollama). Anything else, remote hosts included,
    goes to the real 2 s probe.
    """
    import socket
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(endpoint.strip())
        host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return False
    if not is_loopback_host(host):
        return False
    try:
        with socket.create_connection((host, port), timeout=_LOOPBACK_CONNECT_S):
            return False
    except ConnectionRefusedError:
        return True
    except OSError:
        return False


class EngineBase:
    """The context of the pipelines: settings, clock, store, embedder, hot index and vector index."""

    def __init__(
        self,
        settings: Settings,
        *,
        clock: Callable[[], datetime] = utc_now,
        embedder: Embedder | None = None,
        notice: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self._clock = clock
        self._store: Store | None = None
        self._embedder = embedder
        self._embedder_checked = embedder is not None
        self._embedder_ok = embedder is not None
        self._notice = notice or (lambda msg: print(msg, file=sys.stderr))
        self._vectors: Vectors | None = None

    # --- time -------------------------------------------------------------------------------

    def now(self) -> datetime:
        return self._clock()

    def now_ts(self) -> str:
        return format_ts(self._clock())

    # --- store ------------------------------------------------------------------------------

    @property
    def store(self) -> Store:
        """The open store, opened (and created, unless read-only) on first use."""
        if self._store is None:
            self._store = self._open_store()
        return self._store

    def _open_store(self) -> Store:
        settings = self.settings
        check_store_name(settings.store)
        if not settings.readonly:
            moved = migrate_legacy(settings.data_dir)
            if moved is not None:
                self._notice(f"mnemon: migrated database to {moved}")
        return Store.open(settings.db_path, readonly=settings.readonly, now=self.now_ts(), live=settings.readonly_live)

    def notice(self, message: str) -> None:
        """A one-line notice for the user (stderr by default; the engine itself never prints)."""
        self._notice(message)

    # --- derived indexes --------------------------------------------------------------------

    def hot_index(self) -> HotIndex:
        """The token/edge index describing the database now (loaded, caught up or rebuilt)."""
        from mnemon.engine.hot import index_for

        store = self.store
        return index_for(store.conn, store.path, readonly=store.readonly)

    @property
    def vectors(self) -> Vectors:
        """The vector side of the engine (embedding for writes, the vector index, cosine search)."""
        if self._vectors is None:
            from mnemon.engine.vectors import Vectors

            self._vectors = Vectors(self)
        return self._vectors

    def after_write(self) -> None:
        """Called after every committed write: the derived indexes this process holds catch up.

        The write is committed by then, so a failure here (a full disk growing an index file) must not turn the
        command into an error: its caller (an agent) would take the memory for lost and store it again. The
        indexes this process held are dropped instead, with a notice; derived files are rebuildable, and the next
        user of each finds from its fingerprint that it lags and catches it up (as after a kill at this point).
        A KeyboardInterrupt or SystemExit still ends the command."""
        from mnemon.engine import hot

        store = self._store
        try:
            if self._vectors is not None:
                self._vectors.after_write()
            if store is None or store.readonly:
                return
            # Only an index this process already holds is caught up (O(delta): the new rows, their
            # edges, and a small ``hot.delta`` write); other processes catch up from the fingerprint.
            # An access-only write (show) leaves the index alone and never imports numpy.
            if hot.cached(store.conn) is not None:
                hot.index_for(store.conn, store.path, readonly=False, edges=False)
        except Exception as e:  # noqa: BLE001 - any failure of a derived index after the commit, by design
            if self._vectors is not None:
                self._vectors.forget_index()
            if store is not None:
                hot.forget(store.conn)
            self._notice(f"mnemon: the write is stored, but an index beside the database could not catch up "
                         f"({type(e).__name__}: {e}); it is caught up or rebuilt on next use")

    def require_writable(self, action: str) -> None:
        """Refuse a mutating command early under --readonly (§2.3 newest)."""
        if self.settings.readonly:
            raise ReadonlyModeError(action)
        # every write may catch the hot index up after its commit, which stems the new memories' words:
        # a partial install without the stemmer is refused here, before anything is written
        text.require_stemmer()

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
        if self._embedder is not None:
            self._embedder.close()

    def __enter__(self) -> EngineBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- embedder ---------------------------------------------------------------------------

    def make_embedder(self) -> Embedder:
        """Build (without contacting) the embedder the settings describe."""
        from mnemon.embed import make_embedder

        s = self.settings
        model, model_dir = s.embed_model, None
        if s.embed_protocol == "local":
            from mnemon.embed.local import resolve_model

            model, model_dir = resolve_model(s.embed_model, s.embed_model_path, s.data_dir)
        return make_embedder(
            endpoint=s.embed_endpoint,
            model=model,
            protocol=s.embed_protocol,
            api_key=s.embed_api_key,
            keep_alive=s.embed_keep_alive,
            dimensions=s.embed_dimensions,
            model_dir=model_dir,
        )

    def similarity_scale(self) -> SimilarityScale:
        """The configured embedding model's thresholds (records.similarity_scale)."""
        from mnemon.records import similarity_scale

        if self._embedder is not None:
            return similarity_scale(self._embedder.model)
        s = self.settings
        model = s.embed_model
        if s.embed_protocol == "local":
            from mnemon.embed.local import resolve_model

            model = resolve_model(s.embed_model, s.embed_model_path, s.data_dir)[0]
        return similarity_scale(model)

    def _server_refused(self) -> bool:
        """A local server endpoint that refuses connections (never asked of the in-process model)."""
        return self.settings.embed_protocol != "local" and _loopback_refused(self.settings.embed_endpoint)

    def embed_text(self, text: str, *, query: bool = False) -> NDArray[np.float64] | None:
        """Embed ``text`` if the provider is available; None in embedding-free mode or on failure.

        ``query``: ``text`` is a recall query, embedded on the query side where the model has one
        (E5's "query: " prefix, ``LocalEmbedder.embed_query``); memories are embedded as passages.

        The first call of an engine lets the embed request stand in for the 2 s availability
        probe (``Embedder.probe_embed``): a healthy server answers one request instead of two.
        A refused or silent server makes it unavailable as the probe would; a server that
        answered but could not embed is probed for real, so availability means what it did.
        """
        if self._embedder_checked:
            embedder = self.embedder()
            if embedder is None:
                return None
            try:
                return _side(embedder, query)(text)
            except EmbedderError:
                return None
        self._embedder_checked = True
        if self._server_refused():
            self._embedder_ok = False
            return None
        try:
            self._embedder = self.make_embedder()
            combined = getattr(self._embedder, "probe_embed", None)
            if combined is None:  # an embedder without the combined call: probe, then embed
                self._embedder_ok = self._embedder.probe()
                return self.embed_text(text) if self._embedder_ok else None
            vector: NDArray[np.float64] = combined(text, query=True) if query and _has_sides(self._embedder) else combined(text)
            self._embedder_ok = True
            return vector
        except EmbedderUnavailable:
            self._embedder_ok = False
            return None
        except EmbedderError:  # the server answered, but not with a usable vector
            self._embedder_ok = self._embedder is not None and self._embedder.probe()
            return None

    @property
    def current_embedder(self) -> Embedder | None:
        """The embedder made so far (None before the first embed or probe), answering or not."""
        return self._embedder

    def embedder(self) -> Embedder | None:
        """Return a reachable embedder after one 2 s probe, or None (embedding-free mode)."""
        if not self._embedder_checked:
            self._embedder_checked = True
            if self._server_refused():
                self._embedder_ok = False
                return None
            try:
                self._embedder = self.make_embedder()
                self._embedder_ok = self._embedder.probe()
            except EmbedderError:
                self._embedder_ok = False
        return self._embedder if self._embedder_ok else None


def _has_sides(embedder: Embedder) -> bool:
    """An embedder that embeds queries and memories differently (``embed_query``)."""
    return callable(getattr(embedder, "embed_query", None))


def _side(embedder: Embedder, query: bool) -> Callable[[str], NDArray[np.float64]]:
    """The embed call for a query or for a memory."""
    return embedder.embed_query if query and _has_sides(embedder) else embedder.embed  # type: ignore[attr-defined]
