"""The command line: a Typer app whose commands parse, call one Engine method and render.

``main(argv)`` is the single place where a usage error or a ``MnemonError`` becomes
``Error: <msg>`` on stderr and exit status 1 (contract §3.1, Decision 9). Command modules import
the engine lazily, so ``--help``, ``--version`` and ``store list`` never import numpy or numba.
``run(argv, stdin=, stdout=, stderr=)`` is the one way to run a command in-process against given
streams: the warm server's worker and the MCP server both use it (the MCP command receives it at
registration, so ``mnemon.mcp`` never imports this package and no import circle exists).

This package is not the console script's entry point: ``mnemon.client`` is (it hands the command
to a warm server, or calls ``main`` here when none is used).
"""

from __future__ import annotations

import functools
import sys
from typing import TextIO

import typer
from typer._click import core as click_core
from typer._click import exceptions as click_exceptions

from mnemon import __version__, config
from mnemon.cli import agent, bulk, doctor, embed, graph, maint, memory, retrieve, server, stores
from mnemon.cli.state import GlobalOptions, bool_values, split_global
from mnemon.errors import MnemonError
from mnemon.gateway import access

HELP = """mnemon: persistent memory for AI agents.

Global flags (anywhere on the line): --data-dir PATH, --store NAME, --readonly,
--embed-model NAME, --version."""

app = typer.Typer(
    name="mnemon",
    help=HELP,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def run(argv: list[str], *, stdin: TextIO, stdout: TextIO, stderr: TextIO,
        options: GlobalOptions | None = None) -> int:
    """Run one command in this process with ``sys.stdin/stdout/stderr`` bound to the given streams
    for its duration; return its exit status. Exceptions that ``main`` does not map (a bug) propagate."""
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
    try:
        return main(argv, options=options)
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved


for module in (memory, graph, maint, stores, doctor, retrieve, embed, bulk, server):
    module.register(app)
agent.register(app, run)


def _usage_message(exc: click_exceptions.UsageError) -> str:
    """Word framework usage errors the way Cobra does (§3.1)."""
    if isinstance(exc, click_exceptions.NoSuchOption):
        return f"unknown flag: {exc.option_name}"
    if isinstance(exc, click_exceptions.BadOptionUsage) and "requires an argument" in exc.message:
        return f"flag needs an argument: {exc.option_name}"
    if isinstance(exc, click_exceptions.BadParameter) and exc.param is not None:
        flag = (exc.param.opts or [exc.param.name or ""])[0]
        return f'invalid argument for "{flag}" flag: {exc.message}'
    message = exc.message
    if message.startswith("No such command"):
        name = message.split("'")[1] if "'" in message else message
        return f'unknown command "{name}" for "mnemon"'
    return message


@functools.cache
def _command() -> click_core.Command:
    """Build the click command tree once per process: typer rebuilds it from every command's
    signature on each ``app()`` call (~15 ms), which an MCP server or a loop of ``main`` calls pays
    again and again."""
    return typer.main.get_command(app)


def _bool_flags(root: click_core.Command, rest: list[str]) -> set[str]:
    """The boolean flags (``--verbose``, ``--no-diff``, ...) of the command ``rest`` names."""
    command = root
    for token in rest:
        sub = getattr(command, "commands", {}).get(token)
        if sub is None:
            break
        command = sub
    return {
        opt for param in command.params if getattr(param, "is_bool_flag", False)
        for opt in (*param.opts, *param.secondary_opts) if opt.startswith("--")
    }  # fmt: skip


def _one_line(message: str) -> str:
    """Keep an error on one line even when it quotes user input that holds line breaks."""
    flat = message.replace("\r", "\\r").replace("\n", "\\n").translate(_OTHER_BREAKS)
    # Lone surrogates (undecodable argv bytes) would make the print itself fail.
    return flat.encode("utf-8", "backslashreplace").decode("utf-8")


# Everything else str.splitlines() breaks on: vertical tab, form feed, file/group/record separators, NEL, U+2028/9.
_OTHER_BREAKS = str.maketrans({c: f"\\u{ord(c):04x}" for c in "\v\f\x1c\x1d\x1e\x85\u2028\u2029"})


# Commands that act on a store, checked by name so that other commands never import the remote client.
_STORE_COMMANDS = access.REMOTE_COMMANDS | access.LOCAL_ONLY_COMMANDS


def main(argv: list[str] | None = None, *, options: GlobalOptions | None = None) -> int:
    """Run the CLI and return the exit status (0 ok, 1 any error)."""
    args = list(sys.argv[1:] if argv is None else argv)
    opts = options or GlobalOptions()
    config.limit_blas_threads()
    try:
        rest = split_global(args, opts)
        if opts.version:
            print(f"mnemon version {__version__}")
            return 0
        if rest and rest[0] in _STORE_COMMANDS:
            from mnemon.gateway import remote

            remote_status = remote.dispatch(rest, opts)  # a store behind a gateway: the command runs there
            if remote_status is not None:
                return remote_status
        command = _command()
        rest = bool_values(rest, _bool_flags(command, rest))
        result = command(args=rest, prog_name="mnemon", standalone_mode=False, obj=opts)
        return result if isinstance(result, int) else 0
    except click_exceptions.NoArgsIsHelpError as exc:
        # a bare `mnemon` (or `mnemon store`): the help, as --help prints it, and success, as the Go
        # program's cobra does for a command with subcommands and no action of its own
        print(exc.ctx.get_help())
        return 0
    except click_exceptions.UsageError as exc:
        print(f"Error: {_one_line(_usage_message(exc))}", file=sys.stderr)
        return 1
    except MnemonError as exc:
        print(f"Error: {_one_line(str(exc))}", file=sys.stderr)
        return 1
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        print("Error: aborted", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("Error: interrupted", file=sys.stderr)
        return 130
    except click_exceptions.ClickException as exc:
        print(f"Error: {_one_line(exc.format_message())}", file=sys.stderr)
        return 1
    except Exception as exc:
        # An apsw error from a read outside write_tx (a corrupt page, an I/O error) is still a
        # one-line store error; matched by module so the CLI never imports apsw (the PostgreSQL
        # backend's statement errors subclass apsw's).
        if any(cls.__module__ == "apsw" for cls in type(exc).__mro__):
            print(f"Error: database error: {_one_line(str(exc))}", file=sys.stderr)
            return 1
        raise
