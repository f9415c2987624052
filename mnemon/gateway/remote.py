"""The CLI on a remote store: a memory command sent to a mnemon gateway (stdlib only).

``cli.main`` asks :func:`dispatch` first: when the resolved store's directory holds
``remote.json`` and the command is a memory command, its argv goes to the gateway's ``cli`` tool
as one MCP ``tools/call`` over Streamable HTTP (stateless: no initialize round trip) and the
command's stdout, stderr and exit status come back as the gateway ran them, so a hook sees the
same bytes as on a local store. Paths stay on this machine: ``import FILE`` sends the file's
contents, ``export --output FILE`` writes the returned draft here. Commands with no remote form
say so. Plain ``http.client`` rather than the SDK's client: a hook pays this on every prompt, and
the SDK (pydantic, anyio, httpx) costs hundreds of milliseconds to import; the exchange is one
JSON POST of the protocol the SDK's server answers (the tests drive the same gateway with the SDK).
An unreachable gateway is an error within :data:`CONNECT_TIMEOUT` seconds; one that accepted the
connection and does not answer, after :func:`answer_timeout` (30 s; 600 s for import, export and gc).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mnemon import config
from mnemon.errors import InputError, StoreError
from mnemon.gateway import access
from mnemon.store import layout, registration

if TYPE_CHECKING:
    from mnemon.cli.state import GlobalOptions

CONNECT_TIMEOUT = 2.0
ANSWER_TIMEOUT = 600.0  # an import of a large draft runs this long on the gateway at most
# Every other command answers in about a second even on a loaded 1M store; a gateway that accepted
# the connection and then hangs (wedged, stopped) must not hold an agent's hook for ten minutes.
COMMAND_ANSWER_TIMEOUT = 30.0
_LONG_COMMANDS = frozenset(("import", "export", "gc"))


def answer_timeout(command: str) -> float:
    """How long a command's call waits for the gateway's answer once connected."""
    return ANSWER_TIMEOUT if command in _LONG_COMMANDS else COMMAND_ANSWER_TIMEOUT
PROTOCOL_VERSION = "2025-06-18"
# Flags that take a value, per command: the words after them are not positional arguments.
_VALUE_FLAGS = {
    "remember": ("--cat", "--imp", "--tags", "--entities", "--entity-mode", "--source"),
    "export": ("--output", "-o"),
}


class GatewayUnreachable(StoreError):
    """The gateway did not accept a connection (or answer) in time."""


def remote_store(argv: list[str], options: GlobalOptions) -> registration.RemoteRegistration | None:
    """The remote registration when ``argv`` is a store command on a remote store, else None."""
    found = _remote_and_root(argv, options)
    return None if found is None else found[0]


def _remote_and_root(argv: list[str], options: GlobalOptions) -> tuple[registration.RemoteRegistration, Path] | None:
    """:func:`remote_store` and the data dir it was resolved under (export's local output is checked against it)."""
    if not argv or argv[0] not in access.REMOTE_COMMANDS | access.LOCAL_ONLY_COMMANDS:
        return None
    if any(a in ("-h", "--help") for a in _before_dashes(argv)):
        return None  # help is local
    settings = config.resolve(data_dir=options.data_dir, store=options.store, readonly=options.readonly,
                              embed_model=options.embed_model, environ=options.environ)
    if not config.valid_store_name(settings.store):
        return None  # the local path words the error
    store_dir = settings.data_dir / "data" / settings.store
    if not registration.is_remote(store_dir):
        return None
    for warning in settings.warnings:
        print(warning, file=sys.stderr)
    return registration.read_remote(store_dir), settings.data_dir


def dispatch(argv: list[str], options: GlobalOptions) -> int | None:
    """Run ``argv`` on its remote store and return the exit status; None when the store is local."""
    found = _remote_and_root(argv, options)
    if found is None:
        return None
    remote, data_dir = found
    command = argv[0]
    if command in access.LOCAL_ONLY_COMMANDS or (command == "gc" and "--compact" in _before_dashes(argv)):
        shown = "gc --compact" if command == "gc" else command
        raise InputError(f'{shown} has no remote form: store "{remote.name}" lives behind a mnemon gateway '
                         f"({remote.url}); run it on the gateway's machine")
    if options.embed_model:
        # The gateway embeds with the model its operator set: vectors recorded under a model each client picks
        # would split one store's vector space. --readonly travels (arguments["readonly"]); --data-dir and
        # --store chose this registration; --version never reaches a store command.
        raise InputError(f'--embed-model has no remote form: store "{remote.name}" embeds with its gateway\'s model '
                         "(set MNEMON_EMBED_MODEL where the gateway runs)")
    sent, stdin, output = _prepare(argv)
    if output is not None:  # the local file, before the call: never over a store's own files
        layout.check_outside(data_dir, output)
    arguments: dict[str, Any] = _wire(sent, stdin)
    if options.readonly:
        arguments["readonly"] = True
    clock = options.engine_kwargs.get("clock")
    if clock is not None:
        # A test's injected clock (engine_kwargs: never set by the CLI) travels with the call; only a gateway
        # started with --test-clock accepts it, any other refuses the call.
        arguments["clock"] = clock().isoformat()
    result = call(remote, "cli", arguments, options, answer=answer_timeout(command))
    structured = result.get("structuredContent")
    if not isinstance(structured, dict) or not isinstance(structured.get("exit_code"), int):
        texts = [c.get("text", "") for c in result.get("content", []) if isinstance(c, dict)]
        raise StoreError(f'the mnemon gateway for store "{remote.name}" answered without a command status: '
                         + " ".join(texts)[:200])
    code, out, err = structured["exit_code"], str(structured.get("stdout", "")), str(structured.get("stderr", ""))
    if code == 0 and output is not None:
        _write_local(output, out)
        out = ""
    from mnemon.cli import render

    render.emit_raw(out)
    if err:
        sys.stderr.write(err)
    return int(code)


def _before_dashes(argv: list[str]) -> list[str]:
    return argv[: argv.index("--")] if "--" in argv else argv


def _positionals(argv: list[str]) -> tuple[list[int], list[str]]:
    """Indexes and values of the positional words of ``argv[1:]`` (after ``--`` everything is one)."""
    flags = _VALUE_FLAGS.get(argv[0], ())
    found: list[int] = []
    i = 1
    while i < len(argv):
        word = argv[i]
        if word == "--":
            found.extend(range(i + 1, len(argv)))
            break
        if word in flags:
            i += 2
            continue
        if not (word.startswith("-") and word != "-"):
            found.append(i)
        i += 1
    return found, [argv[i] for i in found]


def _prepare(argv: list[str]) -> tuple[list[str], str, str | None]:
    """(argv to send, stdin to send, local --output file or None)."""
    command = argv[0]
    index, words = _positionals(argv)
    if command == "remember" and words == ["-"]:
        return argv, _read_stdin(), None
    if command == "import":
        from mnemon.drafts import read_draft_text

        if len(words) != 1:
            raise InputError(f"accepts 1 arg(s), received {len(words)}")
        argv = list(argv)
        argv[index[0]] = "-"
        return argv, _read_stdin() if words[0] == "-" else read_draft_text(words[0]), None
    if command == "export":
        sent = [command]
        output: str | None = None
        words_left = iter(argv[1:])
        for word in words_left:
            name, eq, value = word.partition("=")
            if name not in ("--output", "-o"):
                sent.append(word)
            elif eq:
                output = value
            else:
                output = next(words_left, None)
                if output is None:
                    raise InputError(f"flag needs an argument: {name}")
        return sent, "", (output if output and output != "-" else None)
    return argv, "", None


def _wire(argv: list[str], stdin: str) -> dict[str, Any]:
    """argv and stdin as the cli tool's arguments. Bytes that are not UTF-8 (in a local process they reach the
    command as lone surrogates, which it refuses with its own wording) cannot be a JSON string the gateway's
    parser accepts; then the words and stdin travel as base64 of their bytes (``raw``), so the gateway's command
    meets the same bytes and words the same error."""
    try:
        for text in (*argv, stdin):
            text.encode("utf-8")
    except UnicodeEncodeError:
        return {"argv": [_b64(word) for word in argv], "stdin": _b64(stdin), "raw": True}
    return {"argv": argv, "stdin": stdin}


def _b64(text: str) -> str:
    import base64

    try:
        data = text.encode("utf-8", "surrogateescape")  # the bytes the OS gave (or stdin held)
    except UnicodeEncodeError:
        data = text.encode("utf-8", "surrogatepass")  # another lone surrogate: still not UTF-8 on the other side
    return base64.b64encode(data).decode("ascii")


def _read_stdin() -> str:
    try:
        data = sys.stdin.buffer.read()
    except (OSError, ValueError) as exc:
        raise InputError(f"read file: {exc}: -") from None
    # Undecodable bytes become lone surrogates here and travel as the bytes they were (_wire), so the
    # gateway's command words the error exactly as a local run does.
    return data.decode("utf-8", "surrogateescape")


def _write_local(output: str, text: str) -> None:
    try:
        with open(output, "w", encoding="utf-8") as fh:
            fh.write(text)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path (as a local export says it)
        raise InputError(f"write file: {getattr(exc, 'strerror', None) or exc}: {output}") from None
    print(f"written to {output}", file=sys.stderr)


def call(remote: registration.RemoteRegistration, tool: str, arguments: dict[str, Any],
         options: GlobalOptions, *, answer: float | None = None) -> dict[str, Any]:
    """One ``tools/call`` on the gateway; the JSON-RPC result, or a one-line error. ``answer``: how long to
    wait for it once connected (``answer_timeout`` of the tool's command by default)."""
    token = config.gateway_token(remote.token_env, options.environ)
    if not token:
        raise InputError(f'store "{remote.name}" lives behind a mnemon gateway: set {remote.token_env} to its token')
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": tool, "arguments": arguments}}, ensure_ascii=False)
    status, reply = post(remote, body.encode("utf-8", "surrogatepass"), token,
                         answer=answer_timeout(tool) if answer is None else answer)
    if status != 200:
        raise StoreError(f'the mnemon gateway for store "{remote.name}" refused the request ({status}): '
                         f"{_reason(reply)}")
    try:
        message = json.loads(reply)
    except ValueError:
        raise StoreError(f'the mnemon gateway for store "{remote.name}" answered with something other than JSON') \
            from None
    if isinstance(message, dict) and isinstance(message.get("error"), dict):
        raise StoreError(f'the mnemon gateway for store "{remote.name}": {message["error"].get("message")}')
    result = message.get("result") if isinstance(message, dict) else None
    if not isinstance(result, dict):
        raise StoreError(f'the mnemon gateway for store "{remote.name}" answered without a result')
    return result


def _reason(reply: bytes) -> str:
    try:
        payload = json.loads(reply)
        if isinstance(payload, dict):
            if isinstance(payload.get("error"), str):
                return payload["error"]
            if isinstance(payload.get("error"), dict):
                return str(payload["error"].get("message"))
    except ValueError:
        pass
    return reply[:200].decode("utf-8", "replace").strip() or "no reason given"


def post(remote: registration.RemoteRegistration, body: bytes, token: str,
         answer: float = ANSWER_TIMEOUT) -> tuple[int, bytes]:
    """POST one JSON-RPC message; (status, body). Connecting is bounded by CONNECT_TIMEOUT, the answer by
    ``answer`` seconds."""
    # Imported here: every store command asks dispatch() first, and http.client (with the email package it
    # loads) would cost each local command several milliseconds.
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(remote.url)
    https = parts.scheme == "https"
    host, port = parts.hostname or "", parts.port or (443 if https else 80)
    target = (parts.path or "/mcp") + (f"?{parts.query}" if parts.query else "")
    conn: http.client.HTTPConnection
    if https:
        import ssl

        conn = http.client.HTTPSConnection(host, port, timeout=CONNECT_TIMEOUT, context=ssl.create_default_context())
    else:
        conn = http.client.HTTPConnection(host, port, timeout=CONNECT_TIMEOUT)
    try:
        try:
            conn.connect()
        except (OSError, http.client.HTTPException) as exc:
            raise GatewayUnreachable(f'cannot reach the mnemon gateway for store "{remote.name}": '
                                     f"{_why(exc)} ({remote.url})") from None
        if conn.sock is not None:
            conn.sock.settimeout(answer)
        try:
            conn.request("POST", target, body=body, headers={
                "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                "Authorization": f"Bearer {token}", "MCP-Protocol-Version": PROTOCOL_VERSION,
            })
            response = conn.getresponse()
            return response.status, response.read()
        except (OSError, http.client.HTTPException) as exc:
            # Sent but not answered: the command may or may not have run on the gateway.
            raise GatewayUnreachable(f'the mnemon gateway for store "{remote.name}" did not answer: {_why(exc)} '
                                     "(the command may or may not have run)") from None
    finally:
        conn.close()


def _why(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):  # socket.timeout is TimeoutError since Python 3.10
        return "timed out"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
