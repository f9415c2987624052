"""What one hot index holds: every field, its initial value, and which columns are kept in parts.

``IndexState`` is the base of every concern of :class:`~mnemon.engine.hot.index.HotIndex` (the
columns, the vocabulary, row identity, postings, entities, the edge graph and list, currency, the
file format): each reads and writes these fields on one object, so they are declared here, once,
with what they mean. Nothing here computes anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mnemon.store.hotindex import Fingerprint

if TYPE_CHECKING:
    import numpy as np

    from mnemon.engine.hot.vocabulary import _SortedTerms

# Arrays whose size grows with the store's tokens or edges: kept as a base part plus small
# appended parts, joined only when something reads the whole array (a merge, a test).
_SEGMENTED = ("r_term", "r_tf", "p_term", "e_ent", "edge_src", "edge_dst", "edge_type", "edge_weight", "edge_backbone")
_SEG_DTYPES = {"r_term": "int32", "r_tf": "int32", "p_term": "int32", "e_ent": "int32", "edge_src": "int32",
               "edge_dst": "int32", "edge_type": "int8", "edge_weight": "float64", "edge_backbone": "bool",
               "id_blob": "S36", "created": "S20"}  # fmt: skip
# The widest per-row arrays (36 + 20 bytes a row) are segmented too: appending a delta's rows to a
# million mapped ids would copy 56 MB per process; readers take a part (_slice/_tail/_item).
_ROW_SEGMENTED = ("id_blob", "created")
_PER_ROW = ("id_blob", "created", "importance", "category", "source", "doc_len", "n_plain")

# Per-row arrays (and the row pointers of the forward CSRs) that a catch-up extends: each lives in a
# buffer with room to grow (``ColumnStore._extend``), so appending a few rows writes those rows instead
# of copying the whole array (3.5 MB at 100k rows, faulted in fresh by every process that appended).
_GROWN = ("importance", "category", "source", "active", "doc_len", "n_plain", "r_ptr", "p_ptr", "e_ptr")


class IndexState:
    """The fields of a hot index (see the module docstring); the concerns add the behaviour."""

    def __init__(self) -> None:
        import numpy as np

        self._parts: dict[str, list[np.ndarray]] = {k: [np.zeros(0, dtype=v)] for k, v in _SEG_DTYPES.items()}
        self.fp = Fingerprint(-1, 0, 0, 0, "")
        self.base_fp = self.fp
        self.build_id = ""  # the base this index extends (a fresh build is its own base)
        self.delta_id = ""  # "" while the index is exactly its base
        self.edge_count_db = 0
        self.edges_verified = True  # edge_count_db was checked against the store's edge count at self.fp
        self.edges_reloaded = False  # the edge list no longer extends the base's: only a merge persists it
        self.any_vector = False  # some row carried an embedding blob when it was indexed
        self.ids: list[str] = []
        self.importance = np.zeros(0, dtype=np.int8)
        self.category = np.zeros(0, dtype=np.int8)
        self.source = np.zeros(0, dtype=np.int32)
        self.active = np.zeros(0, dtype=np.bool_)
        self.base_active = self.active  # the base's flags (to tell which base rows a delta deleted)
        self.doc_len = np.zeros(0, dtype=np.int32)
        self.n_plain = np.zeros(0, dtype=np.int32)
        self.sources: list[str] = []
        self.entities: list[str] = []
        # Term ids: the sorted base terms (a list, or the mapped bytes until a list is needed), then
        # the terms appended since, unsorted (ids n_sorted.., found through _tail_terms).
        self._sorted_terms: list[str] | _SortedTerms = []
        self._tail_vocab: list[str] = []
        self._tail_terms: dict[str, int] = {}
        self.base_n = 0  # rows, terms, edge rows and entities the base postings/CSR cover
        self.base_v = 0
        self.base_m = 0
        self.base_ent = 0
        self.r_ptr = np.zeros(1, dtype=np.int64)
        self.p_ptr = np.zeros(1, dtype=np.int64)
        self.e_ptr = np.zeros(1, dtype=np.int64)
        self._derived: dict[str, Any] = {}
        # Edge rows [0, _csr_m) are in the derived CSR (its ptr may cover fewer rows than n); rows
        # [_csr_m, m) are read from a small second CSR (the delta adjacency) instead of being
        # inserted, which would copy every array of the big one. -1: no CSR derived yet.
        self._csr_m = -1
        self._links_m = -1  # edge rows superseded/prev/next reflect (-1: none)
        self._delta_adj: tuple[tuple[int, int, int], tuple[np.ndarray, ...]] | None = None
        self._row_of: dict[str, int] | None = None
        # Entity -> id, kept in step with ``entities`` (append-only) so a catch-up does not rebuild it
        # over every entity; valid while it has as many keys as ``entities`` has names.
        self._ent_index: dict[str, int] | None = None
        self._known: tuple[tuple[str, str, int], np.ndarray, frozenset[str]] | None = None  # known_entities()
        # name -> (buffer, the view of it the attribute holds): see _GROWN and _extend.
        self._buffers: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._single_lookups = 0
        self._base_sorted: np.ndarray | None = None
        self._id_hashes: tuple[int, np.ndarray, np.ndarray] | None = None  # rows_of's hash order

    if TYPE_CHECKING:  # one concern asks another's derived arrays through this (Derived._get)

        def _get(self, name: str) -> Any: ...
