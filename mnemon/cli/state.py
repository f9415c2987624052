"""Global flags and the engine a command runs against.

Global flags may appear anywhere on the command line, as with Cobra's persistent flags
(``mnemon remember "x" --store work``), so ``split_global`` lifts them out of argv before the
command parser sees it. The engine is imported lazily: ``--help``, ``--version`` and
``store list`` never pay for numpy, numba or apsw.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mnemon import config
from mnemon.errors import InputError

if TYPE_CHECKING:
    from mnemon.engine import Engine
    from mnemon.engine.read import ReadEngine

_VALUE_FLAGS = {"--data-dir": "data_dir", "--store": "store", "--embed-model": "embed_model"}


@dataclass(slots=True)
class GlobalOptions:
    """The persistent flags of §3.1, plus injectable parts for tests (``engine_kwargs``)."""

    data_dir: str | None = None
    store: str | None = None
    readonly: bool = False
    readonly_live: bool = False  # with readonly: the live read-only open (the gateway's calls; no flag sets it)
    embed_model: str | None = None
    version: bool = False
    engine_kwargs: dict[str, Any] = field(default_factory=dict)
    environ: dict[str, str] | None = None

    def settings(self) -> config.Settings:
        resolved = config.resolve(
            data_dir=self.data_dir, store=self.store, readonly=self.readonly, readonly_live=self.readonly_live,
            embed_model=self.embed_model, environ=self.environ,
        )
        for warning in resolved.warnings:
            print(warning, file=sys.stderr)
        return resolved


def split_global(argv: list[str], options: GlobalOptions) -> list[str]:
    """Move global flags from anywhere before ``--`` into ``options``; return the rest."""
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest.extend(argv[i:])
            break
        name, eq, inline = arg.partition("=")
        if name in _VALUE_FLAGS:
            if eq:
                value = inline
            elif i + 1 < len(argv):
                i += 1
                value = argv[i]
            else:
                raise InputError(f"flag needs an argument: {name}")
            setattr(options, _VALUE_FLAGS[name], value)
        elif name == "--readonly":
            options.readonly = parse_bool(inline, name) if eq else True
        elif name == "--version":
            options.version = parse_bool(inline, name) if eq else True
        else:
            rest.append(arg)
        i += 1
    return rest


_TRUE = frozenset(("1", "t", "T", "TRUE", "true", "True"))
_FALSE = frozenset(("0", "f", "F", "FALSE", "false", "False"))


def parse_bool(value: str, flag: str) -> bool:
    """A boolean flag's ``--flag=value``, as the Go program's flag parser (pflag, strconv.ParseBool) reads it."""
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise InputError(f'invalid argument "{value}" for "{flag}" flag: strconv.ParseBool: parsing "{value}": invalid syntax')


def bool_values(rest: list[str], flags: set[str]) -> list[str]:
    """``rest`` with each ``--flag=value`` of a boolean flag in ``flags`` as the bare flag (true) or
    nothing (false): Go scripts may write ``--verbose=true``, which click's flags do not take."""
    out: list[str] = []
    for k, arg in enumerate(rest):
        if arg == "--":
            return out + rest[k:]
        name, eq, value = arg.partition("=")
        if eq and name in flags:
            if parse_bool(value, name):
                out.append(name)
        else:
            out.append(arg)
    return out


@contextmanager
def open_engine(options: GlobalOptions) -> Iterator[Engine]:
    """Build the engine for this command and close it (checkpointing the WAL) afterwards."""
    from mnemon.engine import Engine

    engine = Engine(options.settings(), **options.engine_kwargs)
    try:
        yield engine
    finally:
        engine.close()


def open_read_engine(options: GlobalOptions) -> closing[ReadEngine]:
    """``open_engine`` with the read pipeline only (``status``: the session-start hook's light start-up)."""
    from mnemon.engine.read import ReadEngine

    return closing(ReadEngine(options.settings(), **options.engine_kwargs))


def join_words(words: list[str] | None, *, at_least: int = 1) -> str:
    """Join positional words with single spaces, checking arity with Cobra's wording."""
    words = list(words or [])
    if len(words) < at_least:
        raise InputError(f"requires at least {at_least} arg(s), only received {len(words)}")
    return " ".join(words)


def exactly(words: list[str] | None, n: int) -> list[str]:
    words = list(words or [])
    if len(words) != n:
        raise InputError(f"accepts {n} arg(s), received {len(words)}")
    return words


def read_stdin_text() -> str:
    """Read all of stdin as strict UTF-8 (``remember -``, Decision 10)."""
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("content is not valid UTF-8") from None
