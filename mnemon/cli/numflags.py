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

from typing import Any

from typer._click import core as click_core
from typer._click import types as click_types

from mnemon.validate import flag_error, parse_flag_float, parse_flag_int


class GoInt(click_types.ParamType):
    name = "integer"

    def convert(self, value: Any, param: click_core.Parameter | None, ctx: click_core.Context | None) -> int:
        if type(value) is int:  # the option's default, given as an int
            return value
        text = str(value)
        try:
            return parse_flag_int(text)
        except ValueError as exc:
            flag = (param.opts or [param.name or ""])[0] if param is not None else ""
            raise flag_error(text, flag, str(exc)) from None


GO_INT = GoInt()


class GoFloat(click_types.ParamType):
    name = "float"

    def convert(self, value: Any, param: click_core.Parameter | None, ctx: click_core.Context | None) -> float:
        if type(value) is float:  # the option's default
            return value
        text = str(value)
        try:
            return parse_flag_float(text)
        except ValueError as exc:
            flag = (param.opts or [param.name or ""])[0] if param is not None else ""
            raise flag_error(text, flag, str(exc), "ParseFloat") from None


GO_FLOAT = GoFloat()
