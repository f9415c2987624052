"""The one numba decorator policy for every kernel, applied lazily so that numba is imported late.

``import kernels`` and every ``*_numpy`` path must not import numba: its import alone costs about
250 ms (targets.md), more than a small store's whole recall. So ``@jit(...)`` does not call numba;
it wraps the Python function in a :class:`LazyKernel`. The first call of any lazy kernel imports
numba, turns that kernel *and every lazy kernel reachable through module globals* into real numba
dispatchers, and rebinds those module globals to the dispatchers. Jitted code calling a jitted
helper therefore sees a numba ``Dispatcher`` at compile time, and public wrappers pay no
indirection after the first call.

Policy (architecture.md §6): ``cache=True`` (a new process loads the machine code instead of
compiling for over a second), ``fastmath=False`` (parity: similarities are compared with
thresholds and printed), ``nogil=True``, ``error_model="numpy"`` (division by zero gives inf/nan
instead of raising; every kernel handles its zero cases explicitly anyway).

Parallel kernels write ``prange`` in their source; modules import the placeholder ``prange`` from
here (plain ``range``) and it is rebound to ``numba.prange`` together with the kernels.

Environment (read by numba itself, never set here): ``NUMBA_NUM_THREADS`` (honoured only if set
before numba is imported; ``numba.set_num_threads`` can only lower it), ``NUMBA_CACHE_DIR``,
``NUMBA_DISABLE_JIT=1`` (kernels run as plain Python; used for coverage), ``NUMBA_BOUNDSCHECK=1``,
``NUMBA_THREADING_LAYER``. When the last one is unset we select the ``workqueue`` layer: the
default (OpenMP here) was measured to stall for milliseconds between calls (targets.md), and our
parallel loops are single flat ``prange`` loops that need nothing more.

Imports only the standard library at module level; numba only inside :func:`numba_module`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

POLICY: dict[str, Any] = {"cache": True, "fastmath": False, "nogil": True, "error_model": "numpy"}

# Placeholder for numba.prange; rebound in each kernel module when it is materialised.
prange = range

_numba: ModuleType | None = None
_bound_namespaces: set[int] = set()


def numba_module() -> ModuleType:
    """Import numba (once), choosing the workqueue threading layer unless the user chose one."""
    global _numba
    if _numba is None:
        import numba

        # numba.config sets its options from the environment at import time: its stubs cannot list them
        if numba.config.THREADING_LAYER == "default":  # type: ignore[attr-defined]
            numba.config.THREADING_LAYER = "workqueue"  # type: ignore[attr-defined]
        _numba = numba
    return _numba


def numba_loaded() -> bool:
    """Return True if numba has been imported in this process (by us or anyone else)."""
    return "numba" in sys.modules


class LazyKernel:
    """A Python function that becomes a numba dispatcher on first use.

    Calling it compiles (or loads from cache) and runs the jitted function. ``py_func`` is the
    original Python function, handy for debugging and coverage.
    """


    def __init__(self, py_func: Callable[..., Any], options: dict[str, Any]) -> None:
        self.py_func = py_func
        self.options = options
        self._dispatcher: Any = None
        self.__name__ = py_func.__name__
        self.__qualname__ = py_func.__qualname__
        self.__doc__ = py_func.__doc__
        self.__module__ = py_func.__module__

    @property
    def dispatcher(self) -> Any:
        """Return the numba dispatcher, creating it (and binding module globals) if needed."""
        if self._dispatcher is None:
            _materialise(self)
        return self._dispatcher

    def __call__(self, *args: Any) -> Any:
        return self.dispatcher(*args)

    def __repr__(self) -> str:
        state = "compiled" if self._dispatcher is not None else "lazy"
        return f"<LazyKernel {self.__module__}.{self.__qualname__} ({state})>"


def jit(**options: Any) -> Callable[[Callable[..., Any]], LazyKernel]:
    """Return a decorator applying :data:`POLICY` (plus ``options``, e.g. ``parallel=True``) lazily."""

    def decorate(func: Callable[..., Any]) -> LazyKernel:
        return LazyKernel(func, {**POLICY, **options})

    return decorate


def _materialise(kernel: LazyKernel) -> None:
    numba = numba_module()
    if kernel._dispatcher is None:
        kernel._dispatcher = numba.njit(**kernel.options)(kernel.py_func)
    _bind_namespace(kernel.py_func.__globals__, numba)


def _bind_namespace(namespace: dict[str, Any], numba: ModuleType) -> None:
    """Replace every LazyKernel (and the prange placeholder) in a module namespace, recursively."""
    if id(namespace) in _bound_namespaces:
        return
    _bound_namespaces.add(id(namespace))
    if namespace.get("prange") is range:
        namespace["prange"] = numba.prange
    for name, value in list(namespace.items()):
        if isinstance(value, LazyKernel):
            if value._dispatcher is None:
                value._dispatcher = numba.njit(**value.options)(value.py_func)
            namespace[name] = value._dispatcher
            _bind_namespace(value.py_func.__globals__, numba)
