"""``with embedder:`` for every embedder: enter returns the embedder, exit calls its ``close()``.

One mixin instead of the same ``__enter__``/``__exit__`` pair in each embedder class. stdlib only,
imported by ``embed/__init__``, ``fake`` and ``local`` alike (no import of either).
"""

from __future__ import annotations

from types import TracebackType
from typing import TypeVar

_Self = TypeVar("_Self", bound="ClosingContext")


class ClosingContext:
    """Mixin: the class defines ``close()``; ``with`` closes it on the way out."""

    def close(self) -> None:
        """Release what the embedder holds (subclasses override; nothing here)."""

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
