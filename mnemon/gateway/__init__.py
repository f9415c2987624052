"""The memory gateway (issue 25): MCP over Streamable HTTP with bearer tokens, and remote stores.

``tokens`` (the 0600 token file: hashes only), ``access`` (what a request may run: the remote CLI's
commands, which calls write), ``limits`` (per-token rate limits) and ``remote`` (the CLI's client
for a store that lives behind a gateway) are stdlib only; ``app`` (the ASGI gateway on the MCP
SDK, Starlette and uvicorn) needs the ``mnemon[gateway]`` extra and is imported only by
``mcp serve --http``.
"""
