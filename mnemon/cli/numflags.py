"""The number flags' types: a value read as the Go program's flags read it (pflag over strconv).

click's INT is Python's ``int()``, which also takes " 2" and "٣" (another script's digit); the Go program's
Cobra flags are pflag's, whose ints are ``strconv.ParseInt(s, 0, 64)``: base 0, so "0x10", "0o17", "0b11",
"010" (octal: 8) and "1_000" are read there, and " 2" or "٣" refused. A script written for it passes the
same values here. Every ``int`` option names this type (``click_type=GO_INT``); the error is Cobra's wording
around strconv's: ``invalid argument "x" for "--limit" flag: strconv.ParseInt: parsing "x": invalid syntax``.
A float option names ``GO_FLOAT`` (``strconv.ParseFloat``: no space, no other script's digit, no "1_0"; "1e400"
out of range).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from typer._click import core as click_core
from typer._click import types as click_types

from mnemon.validate import flag_error, parse_flag_float, parse_flag_int


class _GoNumber(click_types.ParamType):
    """A number flag read by ``parse`` (strconv's syntax); its default, already a number, passes as given."""

    parse: Callable[[str], Any]
    strconv: str  # the strconv function Cobra's message names

    def convert(self, value: Any, param: click_core.Parameter | None, ctx: click_core.Context | None) -> Any:
        if type(value) in (int, float):  # the option's default
            return value
        text = str(value)
        try:
            return self.parse(text)
        except ValueError as exc:
            flag = (param.opts or [param.name or ""])[0] if param is not None else ""
            raise flag_error(text, flag, str(exc), self.strconv) from None


class GoInt(_GoNumber):
    name, strconv = "integer", "ParseInt"
    parse = staticmethod(parse_flag_int)


class GoFloat(_GoNumber):
    name, strconv = "float", "ParseFloat"
    parse = staticmethod(parse_flag_float)


GO_INT = GoInt()
GO_FLOAT = GoFloat()
