"""``mnemon mcp serve --http``: the memory tools over MCP's Streamable HTTP, behind bearer tokens.

Built on the official MCP SDK (its low-level ``Server`` and ``StreamableHTTPSessionManager`` in
stateless JSON mode: each POST is one self-contained exchange, so any number of gateway processes
can serve one PostgreSQL store behind a load balancer), Starlette routing and uvicorn. In front of
the SDK, one guard per request, in this order:

1. Host and Origin (DNS rebinding, per the MCP spec): on a loopback bind a Host that is not a loopback
   name with the bound port is 421; a browser Origin other than the gateway's own or ``--allow-origin``
   is 403 (the SDK checks both again behind us).
2. ``Authorization: Bearer``: unknown, revoked or expired is 401 (``tokens.TokenTable``).
3. ``/mcp/STORE`` naming another store than the token's is 403.
4. The token's rate limit: 429 with Retry-After.
5. The body: more than ``max_body`` bytes is 413, not whole within ``body_timeout`` is 408; read
   before anything runs. (The request head has its own deadline: ``deadlines.HeaderDeadline``.)
6. A ``tools/call`` that writes (``access.call_writes``) with a read-only token is 403.

Only then is the JSON-RPC looked at: a body that is JSON but no single JSON-RPC message (a batch,
which this MCP revision and the SDK do not take; an id that is neither a string, a number nor null;
any other shape the SDK would refuse) is answered here with one Invalid Request error, 400, instead of
the SDK's pydantic report that quoted the input (``invalid_message``); anything else goes to the SDK,
which parses it (a parse error is its JSON-RPC error, 400) and calls a tool. A tool runs the very
command the shell runs (``commands.execute``: ``mnemon.mcp.run_tool``, or the ``cli`` tool of the
remote CLI) against the token's store, with ``--readonly`` for a read-only token, in one of
``--workers`` command worker processes (``workers.Pool``: several calls at once, as several CLI
processes would run them; ``--workers 0`` runs them one at a time in this process).
Refused requests run nothing, so they store nothing. The log names the token's name, never the token.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import mcp.types as types
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.routing import Route

from mnemon import __version__
from mnemon import mcp as tools
from mnemon.gateway import access, commands, limits
from mnemon.gateway.tokens import Token, TokenTable

if TYPE_CHECKING:
    from mnemon.cli.state import GlobalOptions
    from mnemon.gateway import workers

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
Outcome = commands.Outcome

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
TOKEN_SCOPE_KEY = "mnemon.token"

@dataclass
class GatewayConfig:
    host: str = "127.0.0.1"
    port: int = 7411
    max_body: int = 8 * 1024 * 1024
    rate: float = 50.0  # requests per second per token
    burst: int = 200
    allowed_origins: list[str] = field(default_factory=list)
    tls_cert: str | None = None
    tls_key: str | None = None
    behind_proxy: bool = False
    header_timeout: float = 10.0  # seconds from connecting (or a request's first byte) to its complete head
    body_timeout: float = 60.0  # seconds to receive the whole body once the head is in (408 after)
    call_timeout: float = 540.0  # seconds a tool call may take, waiting included (under the client's 600)
    workers: int = 2  # command worker processes (0: commands run one at a time in the gateway's process)
    test_clock: bool = False  # tests only: the cli tool's "clock" argument fixes the engine's clock (commands.py)

    @property
    def loopback(self) -> bool:
        return self.host in LOOPBACK_HOSTS


def loopback_hosts(config: GatewayConfig) -> list[str]:
    """The Host headers a loopback bind answers: a loopback name with the bound port (bare only on port 80).
    A DNS-rebinding page reaches 127.0.0.1 under its own name, so its Host is that name."""
    names = ("127.0.0.1", "localhost", "[::1]")
    return [f"{name}:{config.port}" for name in names] + (list(names) if config.port == 80 else [])


def _origins(config: GatewayConfig) -> list[str]:
    """Browser origins allowed: this gateway's own loopback origin (same port), then --allow-origin."""
    return [f"{scheme}://{host}" for scheme in ("http", "https") for host in loopback_hosts(config)] + \
        list(config.allowed_origins)


def origin_allowed(origin: str, allowed: list[str]) -> bool:
    for pattern in allowed:
        if origin == pattern or (pattern.endswith(":*") and origin.startswith(pattern[:-1])
                                 and origin[len(pattern) - 1:].isdigit()):
            return True
    return False


def _log(message: str) -> None:
    print(f"mnemon gateway: {message}", file=sys.stderr, flush=True)


class Gateway:
    """The ASGI application: guard, then the SDK's stateless Streamable HTTP transport."""

    def __init__(self, options: GlobalOptions, run: tools.Runner, config: GatewayConfig,
                 pool: workers.Pool | None = None) -> None:
        self.options = options
        self.pool = pool
        self.run = run
        self.config = config
        self.data_dir: Path = options.settings().data_dir
        self.tokens = TokenTable(self.data_dir)
        self.limiter = limits.RateLimiter(config.rate, config.burst)
        self.origins = _origins(config)
        self.hosts = frozenset(loopback_hosts(config)) if config.loopback else None
        self.command_lock = threading.Lock()
        self.server: Server[Any] = Server(
            "mnemon", version=__version__, instructions=tools.INSTRUCTIONS,
            on_list_tools=self._list_tools, on_call_tool=self._call_tool,
        )
        security = None
        if config.loopback:  # the SDK's Host check: a rebinding page's Host is its own name
            security = TransportSecuritySettings(
                enable_dns_rebinding_protection=True,
                allowed_hosts=loopback_hosts(config),
                allowed_origins=self.origins,
            )
        self.manager = StreamableHTTPSessionManager(
            app=self.server, json_response=True, stateless=True, security_settings=security,
            max_request_body_size=config.max_body,
        )
        endpoint = _Endpoint(self)
        self.app = Starlette(
            routes=[Route("/mcp", endpoint=endpoint, methods=["GET", "POST", "DELETE"]),
                    Route("/mcp/{store}", endpoint=endpoint, methods=["GET", "POST", "DELETE"])],
            lifespan=self._lifespan,
        )

    @asynccontextmanager
    async def _lifespan(self, _app: Starlette) -> AsyncIterator[None]:
        try:
            async with self.manager.run():
                yield
        finally:  # here, not after uvicorn returns: it re-raises SIGTERM once the server has stopped
            if self.pool is not None:
                await anyio.to_thread.run_sync(self.pool.shutdown)

    # -- the guard -------------------------------------------------------------------------------

    async def guard(self, scope: Scope, receive: Receive) -> tuple[Token, bytes, Any]:
        """The request's token, its body and the body read as JSON (``_parsed``: once, for the read-only check
        here and the message check after), or Refused."""
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if self.hosts is not None and headers.get("host", "") not in self.hosts:
            raise access.Refused(421, "host not allowed: a loopback gateway answers only 127.0.0.1, localhost or [::1] "
                                 f"with its port {self.config.port} (DNS rebinding)")
        origin = headers.get("origin")
        if origin is not None and not origin_allowed(origin, self.origins):
            raise access.Refused(403, "origin not allowed")
        scheme, _, presented = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not presented.strip():
            raise access.Refused(401, "a bearer token is required")
        token, reason = self.tokens.authenticate(presented.strip())
        if token is None:
            raise access.Refused(401, reason)
        named = scope.get("path_params", {}).get("store")
        if named is not None and named != token.store:
            raise access.Refused(403, f'token "{token.name}" does not open store "{named}"')
        wait = self.limiter.admit(token.name)
        if wait:
            raise _Limited(wait)
        body = await self._body(scope, headers, receive)
        payload = _parsed(body) if scope.get("method") == "POST" else _NOT_JSON
        if token.read_only and _writes(payload):
            raise access.Refused(403, f'token "{token.name}" is read-only')
        return token, body, payload

    async def _body(self, scope: Scope, headers: dict[str, str], receive: Receive) -> bytes:
        if scope.get("method") != "POST":
            return b""
        try:
            declared = int(headers.get("content-length", "0") or 0)
        except ValueError:
            raise access.Refused(400, "bad Content-Length") from None
        if declared > self.config.max_body:
            raise access.Refused(413, f"request body over {self.config.max_body} bytes")
        chunks: list[bytes] = []
        size = 0
        try:
            with anyio.fail_after(self.config.body_timeout):  # a body announced but never sent holds nothing
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        raise access.Refused(400, "client went away")
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > self.config.max_body:
                        raise access.Refused(413, f"request body over {self.config.max_body} bytes")
                    chunks.append(chunk)
                    if not message.get("more_body"):
                        return b"".join(chunks)
        except TimeoutError:
            raise access.Refused(408, f"request body not received within {self.config.body_timeout:g} s") from None

    # -- the tools -------------------------------------------------------------------------------

    def tool_table(self) -> dict[str, dict[str, Any]]:
        return {**tools.TOOLS, "cli": commands.CLI_TOOL}

    async def _list_tools(self, _ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name=name, description=spec["description"], input_schema=spec["inputSchema"])
            for name, spec in self.tool_table().items()
        ])

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        token: Token = ctx.request.scope[TOKEN_SCOPE_KEY]
        name, args = params.name, params.arguments or {}
        if name not in self.tool_table():
            return _result(f"Error: unknown tool: {name}", True)
        started = time.perf_counter()
        caller = commands.Caller(token.name, token.store, token.read_only)
        if self.pool is not None:
            outcome = await self.pool.call(self.config.call_timeout, str(self.data_dir), caller, name, args,
                                           self.config.test_clock)
        else:
            call = _Call()
            with anyio.move_on_after(self.config.call_timeout):
                call.result = await anyio.to_thread.run_sync(self._run_locked, call, caller, name, args,
                                                             abandon_on_cancel=True)
            outcome = call.result or commands.overran(call.abandon(), name, self.config.call_timeout)
        text, is_error, structured = outcome
        _log(f'token={token.name} store={token.store} tool={name} {"error" if is_error else "ok"} '
             f"{(time.perf_counter() - started) * 1000:.1f}ms")
        return _result(text, is_error, structured)

    def _run_locked(self, call: _Call, caller: commands.Caller, name: str, args: dict[str, Any]) -> Outcome:
        """``--workers 0``: one command at a time in this process (``cli.run`` binds its ``sys.std*``)."""
        with self.command_lock:
            if not call.start():  # the client was already told it did not run
                return "", True, None
            return commands.execute(self.run, self.options, str(self.data_dir), caller, name, args,
                                    self.config.test_clock)


class _Call:
    """One tool call's race between its worker starting the command and the deadline giving up on it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = "waiting"  # -> "running" (the worker) or "abandoned" (the deadline), never both
        self.result: Outcome | None = None

    def start(self) -> bool:
        with self._lock:
            if self._state == "waiting":
                self._state = "running"
            return self._state == "running"

    def abandon(self) -> bool:
        """True when the command had not started (and now never will)."""
        with self._lock:
            if self._state == "waiting":
                self._state = "abandoned"
            return self._state == "abandoned"


class _Limited(access.Refused):
    def __init__(self, wait: float) -> None:
        super().__init__(429, "rate limit exceeded")
        self.wait = wait


class _Endpoint:
    """The ``/mcp`` route as an ASGI app: the guard, then the SDK with the body replayed."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            token, body, payload = await self.gateway.guard(scope, receive)
        except access.Refused as exc:
            # The log names the refusal and, past authentication, the token's name (the reasons never
            # quote a token): an operator sees who was turned away, not only who was served.
            _log(f"refused {exc.status} {scope.get('method', '?')} {scope.get('path', '?')}: {exc}")
            await _refuse(send, exc)
            return
        reason = invalid_message(payload)
        if reason is not None:
            _log(f"refused 400 POST {scope.get('path', '?')}: token={token.name} {reason}")
            await _invalid_request(send, reason)
            return
        scope[TOKEN_SCOPE_KEY] = token
        replayed = False

        async def replay() -> MutableMapping[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.gateway.manager.handle_request(scope, replay, send)


async def _refuse(send: Send, exc: access.Refused) -> None:
    # Closed after the answer: a refused request's body may be unread (or never coming), and a connection left
    # waiting for it would be held until the keep-alive timer.
    headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
    if exc.status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="mnemon"'))
    if isinstance(exc, _Limited):
        headers.append((b"retry-after", limits.retry_after(exc.wait).encode()))
    body = json.dumps({"error": str(exc)}).encode()
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": exc.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# A POST body the gateway could not read as JSON (the SDK answers it with its parse error, in a line).
_NOT_JSON = object()
# MCP's request id is a string or an integer, never null (unlike JSON-RPC 2.0's): the SDK took a request with a
# null or fractional id for a notification (202, nothing run, no answer). The stdio server echoes such an id back.
MCP_BAD_ID = "invalid request: an MCP request's id must be a string or an integer"


def _parsed(body: bytes) -> Any:
    """The POST body as JSON (read once per request: the read-only check and the message check both need it; the
    SDK reads the bytes again itself), or _NOT_JSON."""
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return _NOT_JSON


def invalid_message(payload: Any) -> str | None:
    """Why a POST body (``_parsed``) that is JSON is no single JSON-RPC message; None when it is one, or is no
    JSON at all (the SDK's parse error says that in a line). The SDK answers the rest with pydantic's whole
    validation report (about 1.5 KB for a batch, quoting the request back): this is the one line said instead."""
    if payload is _NOT_JSON:
        return None
    if isinstance(payload, list):
        return "invalid request: batch requests are not supported"
    if isinstance(payload, dict) and "id" in payload and not tools.valid_id(payload["id"]):
        # the SDK took {"id": {}, "method": ...} for a notification (202, no answer)
        return tools.BAD_ID
    if isinstance(payload, dict) and "method" in payload and "id" in payload and not _mcp_id(payload["id"]):
        return MCP_BAD_ID
    try:
        types.jsonrpc_message_adapter.validate_python(payload, by_name=False)  # the SDK's own check, word for word
    except ValidationError:
        return "invalid request: not a JSON-RPC 2.0 message"
    return None


async def _invalid_request(send: Send, reason: str) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": tools.INVALID_REQUEST, "message": reason}})
    await send({"type": "http.response.start", "status": 400, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body.encode()})


def _mcp_id(value: Any) -> bool:
    """A string or an integer (a JSON true is no integer, though Python's bool is an int)."""
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def _writes(payload: Any) -> bool:
    """Whether a JSON-RPC body (``_parsed``) holds a tools/call that writes (malformed bodies are left to the SDK)."""
    if payload is _NOT_JSON:
        return False
    for message in payload if isinstance(payload, list) else [payload]:
        if not isinstance(message, dict) or message.get("method") != "tools/call":
            continue
        params = message.get("params")
        if not isinstance(params, dict):
            continue
        if access.call_writes(str(params.get("name")), params.get("arguments") or {}):
            return True
    return False


def _result(text: str, is_error: bool, structured: dict[str, Any] | None = None) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error,
                                structured_content=structured)


def serve(options: GlobalOptions, run: tools.Runner, config: GatewayConfig) -> None:
    """Run the gateway until SIGINT/SIGTERM (uvicorn's handlers)."""
    import uvicorn

    from mnemon.gateway import deadlines, workers

    pool = None
    if config.workers > 0:
        pool = workers.Pool(config.workers, options, run)  # forked and warmed before the gateway has a thread
    else:
        commands.warm(options, run)
    gateway = Gateway(options, run, config, pool)
    _log(f"serving MCP on {'https' if config.tls_cert else 'http'}://{config.host}:{config.port}/mcp "
         f"(store per token; data dir {gateway.data_dir})")
    if config.test_clock:
        _log("--test-clock: clients may fix the clock of every store's commands (tests only, never a real store)")
    server = uvicorn.Server(uvicorn.Config(
        gateway.app, host=config.host, port=config.port, ssl_certfile=config.tls_cert, ssl_keyfile=config.tls_key,
        log_level="warning", access_log=False, timeout_keep_alive=30, timeout_graceful_shutdown=5,
        lifespan="on", proxy_headers=config.behind_proxy, http=deadlines.header_protocol(config.header_timeout),
    ))
    server.run()
