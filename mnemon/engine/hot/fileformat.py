"""The hot index's on-disk form: the base file's header and arrays, the delta segment, loading both.

Owns what is written (``store.hotindex`` writes and maps the files; this module decides their
contents): a base (``<db>.index/hot``: every column, the sorted vocabulary as ``\\n``-joined bytes,
every derived array as ``d_*``) and a delta segment (``hot.delta``: rows, terms and edge rows beyond
the base, the base rows deleted since, tied to the base's build id), and rebuilding an index from
them (the base's arrays stay mapped; a delta that does not fit its base is refused, never trusted).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from mnemon.engine.hot.arrays import _headroom
from mnemon.engine.hot.derived import Derived
from mnemon.engine.hot.graph import _CSR_KEYS, _LINK_KEYS
from mnemon.engine.hot.state import _PER_ROW, _ROW_SEGMENTED, _SEG_DTYPES, _SEGMENTED
from mnemon.engine.hot.vocabulary import _SortedTerms
from mnemon.store.hotindex import Fingerprint

if TYPE_CHECKING:
    import numpy as np

# 2: Chinese text adds its Han characters to its BM25 terms (text.recall_sequence); an index of
# version 1 lacks them, so it is rebuilt, never read. 3: the recall stemmer became Porter2 (text.stem):
# the BM25 terms of an index of version 2 are the light stemmer's, so it is rebuilt too. 4: a camel-case
# identifier's words are among a row's terms (text.identifier_terms); version 3 lacks them.
FORMAT_VERSION = 4

_Index = TypeVar("_Index", bound="FileFormat")


class FileFormat(Derived):
    """The base file's and the delta segment's contents, and an index rebuilt from them."""

    def header(self) -> dict[str, Any]:
        return {
            "version": FORMAT_VERSION, "fingerprint": self.fp.to_json(), "build_id": self.build_id,
            "edge_count_db": self.edge_count_db, "sources": self.sources, "entities": self.entities,
            "any_vector": self.any_vector,
        }  # fmt: skip

    def arrays(self) -> dict[str, np.ndarray]:
        import numpy as np

        vocab = "\n".join(self.vocab).encode("utf-8")
        out = {
            "id_blob": self.id_blob, "created": self.created, "importance": self.importance,
            "category": self.category, "source": self.source, "active": self.active,
            "doc_len": self.doc_len, "n_plain": self.n_plain, "vocab": np.frombuffer(vocab, dtype=np.uint8),
            "r_ptr": self.r_ptr, "r_term": self.r_term, "r_tf": self.r_tf, "p_ptr": self.p_ptr,
            "p_term": self.p_term, "e_ptr": self.e_ptr, "e_ent": self.e_ent, "edge_src": self.edge_src,
            "edge_dst": self.edge_dst, "edge_type": self.edge_type, "edge_weight": self.edge_weight,
            "edge_backbone": self.edge_backbone,
        }  # fmt: skip
        self._derive()
        out.update({f"d_{k}": v for k, v in self._derived.items()})
        return out

    def delta_header(self) -> dict[str, Any]:
        return {
            "version": FORMAT_VERSION, "base_id": self.build_id, "delta_id": self.delta_id,
            "fingerprint": self.fp.to_json(), "edge_count_db": self.edge_count_db,
            "edges_verified": self.edges_verified, "any_vector": self.any_vector, "sources": self.sources,
            "entities_tail": self.entities[self.base_ent :], "base_n": self.base_n, "base_v": self.base_v,
            "base_m": self.base_m, "base_ent": self.base_ent,
        }  # fmt: skip

    def delta_arrays(self) -> dict[str, np.ndarray]:
        """The delta segment: rows, terms and edges beyond the base, and base rows deleted since."""
        import numpy as np

        k = self.base_n
        out: dict[str, np.ndarray] = {
            name: self._tail(name, k) if name in _ROW_SEGMENTED else getattr(self, name)[k:] for name in _PER_ROW
        }
        out["active_tail"] = self.active[k:]
        out["deleted"] = np.flatnonzero(np.asarray(self.base_active) & ~self.active[:k]).astype(np.int32)
        for ptr_name, values in (("r_ptr", ("r_term", "r_tf")), ("p_ptr", ("p_term",)), ("e_ptr", ("e_ent",))):
            ptr = getattr(self, ptr_name)
            out[ptr_name] = ptr[k:] - ptr[k]
            for name in values:
                out[name] = self._tail(name, int(ptr[k]))
        for name in ("edge_src", "edge_dst", "edge_type", "edge_weight", "edge_backbone"):
            out[name] = self._tail(name, self.base_m)
        out["vocab_tail"] = np.frombuffer("\n".join(self._vocab_from(self.base_v)).encode("utf-8"), dtype=np.uint8)
        return out

    def apply_delta(self, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> bool:
        """Extend this (freshly loaded) base by a persisted delta segment; False if it does not fit."""
        import numpy as np

        if header.get("version") != FORMAT_VERSION or header.get("base_id") != self.build_id or self.delta_id:
            return False
        sizes = (int(header["base_n"]), int(header["base_v"]), int(header["base_m"]), int(header["base_ent"]))
        if sizes != (self.n, self.n_terms, self.m, len(self.entities)):
            return False
        deleted = arrays["deleted"].astype(np.int64)
        if deleted.size and int(deleted.max()) >= self.n:
            return False
        self._rebuffer("active", _headroom(self.n + int(arrays["active_tail"].shape[0])))  # base_active stays
        self.active[deleted] = False
        for name in _PER_ROW:
            tail = arrays[name]
            if name in _ROW_SEGMENTED:
                self._append_part(name, tail)
                continue
            mine = getattr(self, name)
            if mine.dtype.kind == "S":
                width = max(mine.dtype.itemsize, tail.dtype.itemsize)
                wide = f"S{width}"  # no astype copy when the widths agree (36 MB of ids at 1M rows)
                setattr(self, name, np.concatenate([mine.astype(wide, copy=False), tail.astype(wide, copy=False)]))
            else:
                self._extend(name, tail.astype(mine.dtype))
        self._extend("active", arrays["active_tail"].astype(np.bool_))
        for ptr_name in ("r_ptr", "p_ptr", "e_ptr"):
            ptr = getattr(self, ptr_name)
            self._extend(ptr_name, arrays[ptr_name][1:] + ptr[-1])
        for name in _SEGMENTED:
            self._append_part(name, arrays[name].astype(_SEG_DTYPES[name]))
        raw = arrays["vocab_tail"].tobytes().decode("utf-8")
        for term in raw.split("\n") if raw else []:
            self._tail_terms[term] = self.n_terms
            self._tail_vocab.append(term)
        self.entities = self.entities + list(header["entities_tail"])
        self._ent_index = None
        self.sources = list(header["sources"])
        self.any_vector = bool(header["any_vector"])
        self.edge_count_db = int(header["edge_count_db"])
        self.edges_verified = bool(header["edges_verified"])
        self.fp = Fingerprint.from_json(header["fingerprint"])
        self.delta_id = str(header["delta_id"])
        self.ids = []
        return True

    @classmethod
    def from_file(cls: type[_Index], header: dict[str, Any], arrays: dict[str, np.ndarray]) -> _Index | None:
        if header.get("version") != FORMAT_VERSION:
            return None
        index = cls()
        base_header = header.get("base_header", header)
        index.fp = Fingerprint.from_json(base_header["fingerprint"])
        index.base_fp = index.fp
        index.build_id = str(base_header["build_id"])
        index.edge_count_db = int(base_header["edge_count_db"])
        index.any_vector = bool(base_header.get("any_vector", True))
        index.sources = list(base_header["sources"])
        index.entities = list(base_header["entities"])
        index._sorted_terms = _SortedTerms(arrays["vocab"])
        delta_arrays: dict[str, np.ndarray] = {}
        for name, arr in arrays.items():
            if name.startswith("x_"):
                delta_arrays[name[2:]] = arr
            elif name.startswith("d_"):
                index._derived[name[2:]] = arr
            elif name != "vocab":
                setattr(index, name, arr)
        index.base_n, index.base_v, index.base_m, index.base_ent = index.n, index.n_terms, index.m, len(index.entities)
        index.base_active = index.active
        if all(k in index._derived for k in _CSR_KEYS):
            index._csr_m = index.m  # the mapped base CSR; the delta's edges are read beside it
        if all(k in index._derived for k in _LINK_KEYS):
            index._links_m = index.m
        delta = header.get("delta")
        if isinstance(delta, dict):
            try:
                index.apply_delta(delta, delta_arrays)
            except (KeyError, TypeError, ValueError):
                return None
        return index
