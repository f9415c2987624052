"""``mnemon server start|stop|status``: explicit control of the warm command server (issue 10).

These always run in-process (the client never forwards them). Each prints one JSON object:
``{"running", "pid", "socket", "fingerprint", "current", "started_at", "idle_exit_seconds"}``
(``current`` says whether the server runs this installation's files; a stale one is not used).
``start`` waits until the server listens; ``stop`` waits until it has exited (``--wait`` seconds at most: a server still finishing a long
command is reported as ``{"stopped": false, "stopping": true, "pid"}``).
"""

from __future__ import annotations

import os
import sys
import time

import typer

from mnemon import config
from mnemon.cli import render
from mnemon.errors import InputError
from mnemon.validate import check_finite

server_app = typer.Typer(
    help="Start, stop or inspect the warm command server (MNEMON_SERVER, MNEMON_SERVER_IDLE).", add_completion=False,
    rich_markup_mode=None, no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]},
)

START_TIMEOUT = 120.0  # preloading numba's kernels on a busy 2-core machine takes seconds


def _report(info: object | None) -> dict[str, object]:
    from mnemon.server import paths
    from mnemon.server.fingerprint import fingerprint

    report: dict[str, object] = {"running": info is not None,
                                 "socket": os.fsdecode(paths.server_path(config.process_environment(), "sock"))}
    if info is not None:
        report.update({
            "pid": info.pid, "fingerprint": info.fingerprint,  # type: ignore[attr-defined]
            "current": info.fingerprint == fingerprint(),  # type: ignore[attr-defined]
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(info.started)),  # type: ignore[attr-defined]
            "idle_exit_seconds": info.idle_seconds,  # type: ignore[attr-defined]
        })
    return report


def _check_socket_directory() -> None:
    """Refuse at once, saying why, when the socket directory is unsafe: the server would refuse it too, and
    start only waited out its timeout (two minutes) to say "did not start"."""
    from mnemon.server import paths

    directory = paths.runtime_dir(config.process_environment())
    problem = paths.prepare_private_dir(directory)
    if problem is not None:
        raise InputError(f"mnemon server cannot use its socket directory {os.fsdecode(directory)}: it {problem}")


@server_app.command("start")
def start() -> None:
    """Start the server for this installation unless one runs (waits until it listens)."""
    from mnemon.server import control

    try:
        control.idle_seconds(config.server_idle_text())
    except ValueError:
        raise InputError("invalid MNEMON_SERVER_IDLE (use a duration such as 30m, or seconds)") from None
    _check_socket_directory()
    control.spawn(config.process_environment())
    info = control.wait_ready(config.process_environment(), START_TIMEOUT)
    if info is None:
        raise InputError("mnemon server did not start")
    render.emit_json(_report(info))


@server_app.command("stop")
def stop(
    wait: float = typer.Option(30.0, "--wait", min=0.0, help="Seconds to wait for running commands to finish."),
) -> None:
    """Stop this installation's server (running commands finish first)."""
    from mnemon.server import control

    check_finite(wait, "--wait")  # NaN or inf made the deadline "never": a stop that could wait forever
    result = control.stop(config.process_environment(), timeout=wait)
    if result is None:
        render.emit_json({"stopped": False})
    elif result.gone:
        render.emit_json({"stopped": True, "pid": result.server.pid})
    else:
        # Said as it is: the server no longer takes commands, but a long one (an import, say) is
        # still running in it and it exits when that ends; "stopped": true would be untrue here.
        render.emit_json({"stopped": False, "stopping": True, "pid": result.server.pid})
        print(f"mnemon server {result.server.pid} no longer takes commands and exits when its running "
              f"commands end (still running after {wait:g} s)", file=sys.stderr)


@server_app.command("status")
def status() -> None:
    """Whether a server runs for this installation, and which code it runs."""
    from mnemon.server import control

    render.emit_json(_report(control.info(config.process_environment())))


def register(app: typer.Typer) -> None:
    app.add_typer(server_app, name="server")
