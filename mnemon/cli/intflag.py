"""The integer flags' type: a value read as the Go program's flags read it (pflag over strconv).

click's INT is Python's ``int()``, which also takes " 2", "٣" (another script's digit) and "1_000": the Go
program refuses each, and a script that passes one gets an error there. Every ``int`` option names this type
(``click_type=GO_INT``); the error is Cobra's wording, the value quoted, with strconv's reason.
"""

from __future__ import annotations

from typing import Any

from typer._click import core as click_core
from typer._click import types as click_types

from mnemon.config import parse_go_int
from mnemon.errors import InputError


class GoInt(click_types.ParamType):
    name = "integer"

    def convert(self, value: Any, param: click_core.Parameter | None, ctx: click_core.Context | None) -> int:
        if type(value) is int:  # the option's default, given as an int
            return value
        text = str(value)
        try:
            return parse_go_int(text)
        except ValueError as exc:
            flag = (param.opts or [param.name or ""])[0] if param is not None else ""
            raise InputError(f'invalid argument "{text}" for "{flag}" flag: {exc}') from None


GO_INT = GoInt()
