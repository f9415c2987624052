"""``HotIndex``: the derived token/edge index of one store, composed of its concerns.

Each concern is a module of this package with one job (see the package docstring); this class only
puts them together. Build or load one with :func:`mnemon.engine.hot.index_for`.
"""

from __future__ import annotations

from mnemon.engine.hot.catchup import Currency
from mnemon.engine.hot.fileformat import FileFormat


class HotIndex(Currency, FileFormat):
    """The hot index of one store; get one with :func:`mnemon.engine.hot.index_for` (loads, catches up, persists)."""

    @property
    def state_id(self) -> str:
        """Names what this index holds (the stamp file refers to it)."""
        return f"{self.build_id}+{self.delta_id}" if self.delta_id else self.build_id
