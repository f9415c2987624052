"""The hot index's growable column store: per-row arrays and the token/edge columns.

Owns how the columns are held and grown, never what they mean: segmented columns (a base part,
usually mapped from the file, plus small appended parts; read whole through ``_Seg``, or in part
through ``_tail``/``_slice``/``_item``/``row_values`` without joining), and per-row arrays that grow
in buffers with spare room (``_extend``: only elements past the current end are written, so a view
handed out earlier never changes; ``reserve`` leaves room ahead for a forked worker's catch-up).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mnemon.engine.hot.arrays import _headroom
from mnemon.engine.hot.state import _GROWN, _SEG_DTYPES, IndexState

if TYPE_CHECKING:
    import numpy as np


class _Seg:
    """A segmented array attribute: reading joins the parts once; ``tail`` reads only a suffix."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> np.ndarray:
        import numpy as np

        parts: list[np.ndarray] = obj._parts[self.name]
        if len(parts) != 1:
            parts[:] = [np.concatenate(parts) if parts else np.zeros(0, dtype=_SEG_DTYPES[self.name])]
        return parts[0]

    def __set__(self, obj: Any, value: np.ndarray) -> None:
        obj._parts[self.name] = [value]


class ColumnStore(IndexState):
    """Rows and columns: their sizes, partial reads of segmented columns, growth in place."""

    r_term = _Seg()
    r_tf = _Seg()
    p_term = _Seg()
    e_ent = _Seg()
    edge_src = _Seg()
    edge_dst = _Seg()
    edge_type = _Seg()
    edge_weight = _Seg()
    edge_backbone = _Seg()
    id_blob = _Seg()
    created = _Seg()


    @property
    def n(self) -> int:
        return int(self.active.shape[0])

    @property
    def m(self) -> int:
        return sum(int(p.shape[0]) for p in self._parts["edge_src"])

    def _tail(self, name: str, start: int) -> np.ndarray:
        """Elements ``start:`` of a segmented array without joining the parts."""
        return self._slice(name, start, None)

    def _slice(self, name: str, start: int, stop: int | None) -> np.ndarray:
        """Elements ``start:stop`` of a segmented array without joining the parts."""
        import numpy as np

        out, off = [], 0
        for part in self._parts[name]:
            end = off + int(part.shape[0])
            if end > start and (stop is None or off < stop):
                out.append(part[max(0, start - off) : None if stop is None else max(0, stop - off)])
            off = end
        if not out:
            return np.zeros(0, dtype=_SEG_DTYPES[name])
        return out[0] if len(out) == 1 else np.concatenate(out)

    def row_values(self, name: str, rows: np.ndarray) -> np.ndarray:
        """Elements ``rows`` of a segmented array (``id_blob``, ``created``) without joining its parts:
        a ranking of a few candidate rows reads their ids and times, not every row's."""
        import numpy as np

        parts = self._parts[name]
        if len(parts) == 1:
            return parts[0][rows]
        dtype = np.result_type(*parts)  # bytes: the widest part's width
        first = parts[0]
        base = int(first.shape[0])
        # Nearly every row lies in the base part (the parts after it are a delta's few rows): one
        # gather there, then the rows past it; no pass over ``rows`` per part (a million-row gather).
        out = first[np.minimum(rows, max(base - 1, 0))].astype(dtype, copy=False) if base else np.empty(rows.shape[0], dtype=dtype)
        late = np.flatnonzero(rows >= base)
        if late.size:
            tail = np.concatenate(parts[1:])
            out[late] = tail[rows[late] - base]
        return out

    def _item(self, name: str, index: int) -> Any:
        """Element ``index`` of a segmented array without joining the parts."""
        off = 0
        for part in self._parts[name]:
            end = off + int(part.shape[0])
            if index < end:
                return part[index - off]
            off = end
        raise IndexError(index)

    def _append_part(self, name: str, values: np.ndarray) -> None:
        if values.shape[0]:
            self._parts[name].append(values)

    def _extend(self, name: str, values: np.ndarray) -> None:
        """Append ``values`` to the per-row array ``name`` (one of _GROWN) in its buffer's spare room.

        Only elements past the current end are written, so a view handed out earlier (the array
        as a caller read it) never changes; the buffer is reallocated with headroom when full, when
        the attribute was replaced since, or when it is not ours to write (a mapped base file)."""
        k = int(values.shape[0])
        if not self._room(name, k):
            self._rebuffer(name, _headroom(int(getattr(self, name).shape[0]) + k))
        buf, cur = self._buffers[name]
        size = int(cur.shape[0])
        buf[size : size + k] = values
        view = buf[: size + k]
        setattr(self, name, view)
        self._buffers[name] = (buf, view)

    def _room(self, name: str, k: int) -> bool:
        buf, view = self._buffers.get(name, (None, None))
        return buf is not None and view is getattr(self, name) and buf.shape[0] >= view.shape[0] + k

    def _rebuffer(self, name: str, capacity: int) -> None:
        """Move ``name`` into a fresh buffer of ``capacity`` elements (a private, writable copy)."""
        import numpy as np

        cur = getattr(self, name)
        buf = np.empty(capacity, dtype=cur.dtype)
        buf[: cur.shape[0]] = cur
        view = buf[: cur.shape[0]]
        setattr(self, name, view)
        self._buffers[name] = (buf, view)

    def reserve(self, rows: int) -> None:
        """Room for ``rows`` more rows in every per-row array, so that appending them (a forked
        worker's catch-up after a write) copies nothing: the warm server calls it once per load."""
        for name in _GROWN:
            if not self._room(name, rows):
                size = int(getattr(self, name).shape[0])
                self._rebuffer(name, max(_headroom(size), size + rows))
