"""``mnemon mcp serve``: a Model Context Protocol server over stdio (contract §3.19, issue #124).

Newline-delimited JSON-RPC 2.0 on stdin/stdout: ``initialize``, ``notifications/initialized``,
``ping``, ``tools/list`` and ``tools/call``. The tools are the memory commands (remember, recall,
search, show, link, related, forget, status). A call runs the very command the shell would run,
in-process through the CLI's runner (``mnemon.cli.run``, handed to :func:`serve` by the ``mcp``
command, so this module never imports the CLI package) with an empty stdin and the arguments placed
after ``--`` or as ``--flag=value`` (so no value can be mistaken for a flag), and returns its
stdout as one text content item: same
Engine method, same JSON, same ``Error: <msg>`` text (then ``isError: true``). Only ``remember`` is
called on the Engine directly, because the CLI's ``remember -`` would read the protocol stream.
Unknown methods and malformed requests are JSON-RPC errors. Nothing but protocol messages is ever
written to stdout: command output is captured and stray prints go to stderr.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
import re
import sys
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from mnemon import __version__

if TYPE_CHECKING:
    from mnemon.cli.state import GlobalOptions

Runner = Callable[..., int]  # mnemon.cli.run: (argv, *, stdin, stdout, stderr, options) -> exit status

PROTOCOL_VERSIONS = ("2025-06-18", "2025-03-26", "2024-11-05")
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603

INSTRUCTIONS = (
    "mnemon is a persistent memory. Call recall before answering when earlier decisions, preferences or "
    "project facts may matter; call remember for durable insights (never secrets), then review its "
    "semantic_candidates and causal_candidates and link (supersedes for replaced facts) where they truly apply."
)


def _schema(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


_STR = {"type": "string"}
_ID = {"type": "string", "description": "insight id"}
_LIMIT = {"type": "integer", "minimum": 1, "default": 10}
_CATEGORY = {"type": "string", "enum": ["preference", "decision", "fact", "insight", "context", "general"]}
_EDGE = {"type": "string", "enum": ["temporal", "semantic", "causal", "entity", "supersedes"]}

TOOLS: dict[str, dict[str, Any]] = {
    "remember": {
        "description": "Store an insight (one self-contained statement). Returns action, diff_suggestion and "
        "semantic/causal candidates to review.",
        "inputSchema": _schema({
            "content": _STR, "category": _CATEGORY, "importance": {"type": "integer", "minimum": 1, "maximum": 5},
            "tags": {"type": "array", "items": _STR}, "entities": {"type": "array", "items": _STR},
            "entity_mode": {"type": "string", "enum": ["merge", "provided", "auto"]}, "source": _STR,
            "no_diff": {"type": "boolean"},
        }, ("content",)),
    },
    "recall": {
        "description": "Recall insights relevant to a query (keywords, entities, meaning and graph links).",
        "inputSchema": _schema({
            "query": _STR, "limit": _LIMIT, "category": _CATEGORY, "source": _STR,
            "intent": {"type": "string", "enum": ["WHY", "WHEN", "ENTITY", "GENERAL"]},
            "basic": {"type": "boolean"}, "verbose": {"type": "boolean"}, "brief": {"type": "boolean"},
            "excerpt_chars": {"type": "integer", "minimum": 1},
        }, ("query",)),
    },
    "search": {
        "description": "Keyword search over every active insight.",
        "inputSchema": _schema({"query": _STR, "limit": _LIMIT, "brief": {"type": "boolean"}}, ("query",)),
    },
    "show": {"description": "One insight in full.", "inputSchema": _schema({"id": _ID}, ("id",))},
    "link": {
        "description": "Relate two insights; use type supersedes (new → old, weight 1.0) for a replaced fact.",
        "inputSchema": _schema({
            "source_id": _ID, "target_id": _ID, "type": _EDGE,
            "weight": {"type": "number", "minimum": 0, "maximum": 1},
            "meta": {"type": "object", "additionalProperties": {"type": "string"}},
        }, ("source_id", "target_id")),
    },
    "related": {
        "description": "Insights reachable from one insight through the graph.",
        "inputSchema": _schema({"id": _ID, "edge": _EDGE, "depth": {"type": "integer", "minimum": 1}}, ("id",)),
    },
    "forget": {"description": "Retire a wrong insight (soft delete).", "inputSchema": _schema({"id": _ID}, ("id",))},
    "status": {"description": "Counts, categories, top entities and the database path.", "inputSchema": _schema({})},
    "import": {
        "description": "Import a memory draft in bulk (schema_version \"1\": insights and explicit edges), validated "
        "first; dry_run validates only.",
        "inputSchema": _schema({
            "draft": {"type": ["object", "string"], "description": "the draft (an object, or its JSON text)"},
            "dry_run": {"type": "boolean"}, "no_diff": {"type": "boolean"},
        }, ("draft",)),
    },
    "export": {"description": "Export the store as an import draft (insights and edges).", "inputSchema": _schema({})},
}


class ToolInputError(Exception):
    """Arguments that do not match the tool's schema (reported as a tool error, like a CLI usage error)."""


def _get(args: dict[str, Any], name: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
    value = args.get(name, default)
    if value is None:
        return default
    # bool is an int in Python; a JSON true must not pass as a limit
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple)
                                                                                  else (kind,))):
        raise ToolInputError(f'argument "{name}" has the wrong type')
    return value


def _required(args: dict[str, Any], name: str) -> str:
    value = _get(args, name, str)
    if value is None:
        raise ToolInputError(f'argument "{name}" is required')
    return str(value)


def _flag(argv: list[str], args: dict[str, Any], name: str, flag: str, kind: type | tuple[type, ...]) -> None:
    value = _get(args, name, kind)
    if value is None or value is False:
        return
    argv.append(flag if value is True else f"{flag}={value}")


def _draft_text(args: dict[str, Any]) -> str:
    draft = args.get("draft")
    if isinstance(draft, str):
        return draft
    if isinstance(draft, dict):
        return json.dumps(draft, ensure_ascii=False)
    raise ToolInputError('argument "draft" must be an object or a JSON string')


def _argv(tool: str, args: dict[str, Any]) -> list[str]:
    """The shell command line for a tool call; user text only after ``--`` or inside ``--flag=value``."""
    argv = [tool]
    if tool == "import":
        _flag(argv, args, "dry_run", "--dry-run", bool)
        _flag(argv, args, "no_diff", "--no-diff", bool)
        return [*argv, "-"]
    if tool in ("recall", "search"):
        query = _required(args, "query")
        _flag(argv, args, "limit", "--limit", int)
        if tool == "recall":
            for name, flag in (("category", "--cat"), ("source", "--source"), ("intent", "--intent")):
                _flag(argv, args, name, flag, str)
            for name in ("basic", "verbose"):
                _flag(argv, args, name, f"--{name}", bool)
            _flag(argv, args, "excerpt_chars", "--excerpt-chars", int)
        _flag(argv, args, "brief", "--brief", bool)
        return [*argv, "--", query]
    if tool in ("show", "forget", "related"):
        if tool == "related":
            _flag(argv, args, "edge", "--edge", str)
            _flag(argv, args, "depth", "--depth", int)
        return [*argv, "--", _required(args, "id")]
    if tool == "link":
        _flag(argv, args, "type", "--type", str)
        _flag(argv, args, "weight", "--weight", (int, float))
        meta = _get(args, "meta", dict)
        if meta:
            argv.append("--meta=" + json.dumps(meta, ensure_ascii=False))
        return [*argv, "--", _required(args, "source_id"), _required(args, "target_id")]
    return argv  # status, export


def _forward(remote: Any, tool: str, args: dict[str, Any], options: GlobalOptions) -> tuple[str, bool]:
    """One tool call run by the gateway of a remote store, with its arguments as they came (the
    structured content and lists, not a command line); its text and error flag as the gateway gave them."""
    from mnemon.errors import MnemonError
    from mnemon.gateway import remote as gateway

    try:
        result = gateway.call(remote, tool, args, options)
    except MnemonError as exc:
        return f"Error: {exc}", True
    text = "".join(str(c.get("text", "")) for c in result.get("content", []) if isinstance(c, dict))
    return text, bool(result.get("isError", False))


def _remember(options: GlobalOptions, args: dict[str, Any]) -> str:
    from mnemon.cli import render
    from mnemon.cli.state import open_engine

    content = _required(args, "content")
    tags = _get(args, "tags", list, [])
    entities = _get(args, "entities", list, [])
    if not all(isinstance(t, str) for t in [*tags, *entities]):
        raise ToolInputError('arguments "tags" and "entities" must be lists of strings')
    with open_engine(options) as engine:
        result = engine.remember(
            content, category=_get(args, "category", str, "general"), importance=_get(args, "importance", int, 3),
            tags=[t.strip() for t in tags if t.strip()], entities=[e.strip() for e in entities if e.strip()],
            entity_mode=_get(args, "entity_mode", str, "merge"), source=_get(args, "source", str, "user"),
            no_diff=_get(args, "no_diff", bool, False),
        )
    return render.to_json(result) + "\n"


class Server:
    """One MCP session; ``options`` are the global flags ``mnemon mcp serve`` was started with."""

    def __init__(self, options: GlobalOptions, out: IO[str], run: Runner) -> None:
        self.options = options
        self.out = out
        self.run = run
        self.methods: dict[str, Callable[[dict[str, Any]], Any]] = {
            "initialize": self.initialize, "ping": lambda _: {}, "tools/list": self.list_tools,
            "tools/call": self.call_tool,
        }

    def tools(self) -> dict[str, dict[str, Any]]:
        """The tool table; recall and search only when this build's engine has them."""
        from mnemon.engine import Engine

        return {name: spec for name, spec in TOOLS.items() if name not in ("recall", "search") or hasattr(Engine, name)}

    def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        asked = params.get("protocolVersion")
        version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
        return {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "mnemon", "version": __version__},
            "instructions": INSTRUCTIONS,
        }

    def list_tools(self, _params: dict[str, Any]) -> dict[str, Any]:
        return {"tools": [{"name": name, **spec} for name, spec in self.tools().items()]}

    def run_command(self, tool: str, args: dict[str, Any]) -> tuple[str, bool]:
        """Run one tool; return (text, is_error)."""
        return run_tool(self.run, self.options, tool, args)

    def call_tool(self, params: dict[str, Any]) -> dict[str, Any]:
        name = params.get("name")
        args = params.get("arguments")
        args = {} if args is None else args  # absent or null: no arguments; [] or "" is no object (said below)
        if not isinstance(name, str) or name not in self.tools():
            raise RpcError(INVALID_PARAMS, f"unknown tool: {name}")
        if not isinstance(args, dict):
            raise RpcError(INVALID_PARAMS, "arguments must be an object")
        text, is_error = self.run_command(name, args)
        return {"content": [{"type": "text", "text": text}], "isError": is_error}

    def handle(self, message: Any) -> dict[str, Any] | None:
        """Answer one JSON-RPC message; ``None`` for notifications."""
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or not isinstance(
            message.get("method"), str
        ):
            if isinstance(message, dict) and "method" not in message and ("result" in message or "error" in message):
                return None  # a response to a request we never send; ignore
            echoed = message.get("id") if isinstance(message, dict) and valid_id(message.get("id")) else None
            return _error(echoed, INVALID_REQUEST, "invalid request")
        if "id" in message and not valid_id(message["id"]):  # answered with id null: an id that is no id
            return _error(None, INVALID_REQUEST, BAD_ID)
        is_notification = "id" not in message
        method = message["method"]
        handler = self.methods.get(method)
        if is_notification:
            return None  # notifications/initialized, notifications/cancelled: nothing to answer
        if handler is None:
            return _error(message["id"], METHOD_NOT_FOUND, f"method not found: {method}")
        params = message.get("params") or {}
        if not isinstance(params, dict):
            return _error(message["id"], INVALID_PARAMS, "params must be an object")
        try:
            with contextlib.redirect_stdout(sys.stderr):
                result = handler(params)
        except RpcError as exc:
            return _error(message["id"], exc.code, str(exc))
        except Exception as exc:  # a bug must cost one request, not the agent's whole session
            print(f"mnemon mcp: {method} failed: {exc!r}", file=sys.stderr)
            return _error(message["id"], INTERNAL_ERROR, f"internal error: {type(exc).__name__}")
        return {"jsonrpc": "2.0", "id": message["id"], "result": result}

    def serve(self, lines: IO[str]) -> None:
        for line in lines:
            if not line.strip():
                continue
            try:
                if _LONE_SURROGATE.search(line):  # bytes that are no UTF-8 (serve() reads them escaped): no JSON
                    raise ValueError("not UTF-8")
                message = json.loads(line, parse_constant=_not_json)
            except (ValueError, RecursionError):  # RecursionError: a line nested past the parser's depth
                self.send(_error(None, PARSE_ERROR, "parse error"))
                continue
            if isinstance(message, list):  # JSON-RPC batch (protocol 2025-03-26)
                if not message:  # JSON-RPC 2.0: an empty batch is answered with one Invalid Request, not silence
                    self.send(_error(None, INVALID_REQUEST, "invalid request: empty batch"))
                    continue
                replies = [r for r in (self.handle(m) for m in message) if r is not None]
                if replies:
                    self.send(replies)
                continue
            reply = self.handle(message)
            if reply is not None:
                self.send(reply)

    def send(self, payload: object) -> None:
        line = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
        # A lone surrogate a request sent as "\ud800" (its id, its method named in an error) cannot be written
        # as UTF-8: the write raised and ended the session. Written back as the same JSON escape, it echoes
        # the value exactly.
        line = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", line)
        self.out.write(line + "\n")
        self.out.flush()


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def run_tool(run: Runner, options: GlobalOptions, tool: str, args: dict[str, Any]) -> tuple[str, bool]:
    """Run one tool of :data:`TOOLS` the way its command runs in the shell; return (text, is_error).

    Shared by the stdio server and the HTTP gateway (``mnemon.gateway``): the text is the command's
    stdout, or its ``Error:`` line. Arguments outside the tool's schema are a tool error, not a crash."""
    from mnemon.errors import MnemonError

    try:
        unknown = sorted(set(args) - set(TOOLS[tool]["inputSchema"]["properties"]))
        if unknown:
            raise ToolInputError(f"unknown argument(s): {', '.join(unknown)}")
        if tool == "remember":
            from mnemon.errors import ReadonlyModeError
            from mnemon.gateway import remote

            try:
                far = remote.remote_store(["remember"], options)
                if far is None:
                    return _remember(dataclasses.replace(options), args), False
                if options.readonly:  # this side's refusal, as for a local store
                    raise ReadonlyModeError("remember")
            except MnemonError as exc:
                return f"Error: {exc}", True
            # a store behind a gateway (Decision 21): its own remember tool, the arguments as they came
            return _forward(far, tool, args, options)
        argv = _argv(tool, args)
        code, out, err = run_argv(run, options, argv, _draft_text(args) if tool == "import" else "")
    except ToolInputError as exc:
        return f"Error: {exc}", True
    if code != 0:
        return error_line(err, tool), True
    return out, False


def run_argv(run: Runner, options: GlobalOptions, argv: list[str], stdin: str | bytes = "") -> tuple[int, str, str]:
    """Run one command line in-process with ``stdin`` (text, or the bytes a client sent) as its input; return
    (status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    # never the protocol stream: the command reads only what the request carried
    data = stdin if isinstance(stdin, bytes) else stdin.encode("utf-8", "surrogatepass")
    given = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
    code = run(argv, stdin=given, stdout=out, stderr=err, options=dataclasses.replace(options))
    return code, out.getvalue(), err.getvalue()


def error_line(stderr: str, tool: str) -> str:
    """The command's ``Error:`` line (the last one), as the tool's error text."""
    lines = [ln for ln in stderr.splitlines() if ln.startswith("Error: ")]
    return lines[-1] if lines else f"Error: {tool} failed"


class RpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


BAD_ID = "invalid request: id must be a string, a number or null"


def valid_id(value: Any) -> bool:
    """JSON-RPC 2.0's request id: a string, a number or null. A JSON true is no number (Python's bool is an
    int), and an object or array id cannot be echoed back for the client to match. (Shared with the gateway.)
    A number past a double's range (1e400) reads as infinity, which would be echoed back as ``Infinity``: no
    JSON, so the client could not read the reply at all."""
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or (isinstance(value, (str, int)) and not isinstance(value, bool))


def _not_json(constant: str) -> Any:
    """Python's json reads NaN, Infinity and -Infinity, which JSON has not; an id of NaN was echoed back as
    NaN, so the reply was no JSON either. Such a line is a parse error."""
    raise ValueError(f"{constant} is not JSON")


def _error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def serve(options: GlobalOptions, run: Runner) -> None:
    """Serve MCP on this process's stdin/stdout until stdin closes; tools run through ``run``."""
    # surrogateescape, not replace: a line with bytes that are no UTF-8 is a parse error (Server.serve), where
    # "replace" stored a remember's content with U+FFFD in their place, silently changed
    stdin = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="surrogateescape", newline="\n")
    Server(options, sys.stdout, run).serve(stdin)
