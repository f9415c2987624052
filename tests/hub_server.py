"""A stand-in for the Hugging Face hub on 127.0.0.1: serves files of fake repositories.

``huggingface_hub.hf_hub_download`` asks ``HEAD <endpoint>/<repo>/resolve/<revision>/<file>`` for
the commit and ETag, then GETs the same URL. This server answers both from a dict
``{"owner/name": {"path/in/repo": bytes}}``; unknown repositories and files get the 404s (with the
hub's ``X-Error-Code``) the client maps to its not-found errors. Point the client at it with
``HF_ENDPOINT=<server.url>``. Every request is recorded (``requests``: (method, path)).
"""

from __future__ import annotations

import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

COMMIT = "0123456789abcdef0123456789abcdef01234567"


class HubServer:
    def __init__(self, repos: dict[str, dict[str, bytes]]) -> None:
        self.repos = repos
        self.requests: list[tuple[str, str]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_HEAD(self) -> None:
                self._answer(head=True)

            def do_GET(self) -> None:
                self._answer(head=False)

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _answer(self, *, head: bool) -> None:
                owner.requests.append((self.command, self.path))
                status, headers, body = owner._resolve(unquote(self.path.split("?", 1)[0]))
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _resolve(self, path: str) -> tuple[int, dict[str, str], bytes]:
        parts = path.strip("/").split("/")
        if len(parts) < 5 or parts[2] != "resolve":
            return 404, {"X-Error-Code": "RepoNotFound"}, b"not found"
        repo, filename = "/".join(parts[:2]), "/".join(parts[4:])
        files = self.repos.get(repo)
        if files is None:
            return 404, {"X-Error-Code": "RepoNotFound", "X-Error-Message": "Repository not found"}, b"{}"
        if filename not in files:
            headers = {"X-Error-Code": "EntryNotFound", "X-Error-Message": "Entry not found", "X-Repo-Commit": COMMIT}
            return 404, headers, b"{}"
        body = files[filename]
        etag = hashlib.sha256(body).hexdigest()
        return 200, {"ETag": f'"{etag}"', "X-Repo-Commit": COMMIT, "Content-Type": "application/octet-stream"}, body

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> HubServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
