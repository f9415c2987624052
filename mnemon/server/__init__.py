"""The warm command server behind ``mnemon`` (issue 10, after Mercurial's chg).

A long-lived parent that has already imported numpy, numba's kernels, apsw, typer and the engine
forks one worker per client request; the worker adopts the client's stdio descriptors, working
directory, environment and umask and runs the same in-process CLI. Modules, one job each:

- ``paths``: where the per-user socket, lock and pid files live (stdlib, used by the client);
- ``fingerprint``: which installed code a process runs (stdlib, used by the client);
- ``protocol``: the wire format of a request and of the replies (stdlib, used by the client);
- ``control``: start, stop and status of a server from outside (no heavy imports);
- ``preload``: the one list of warm-up steps the parent runs before it listens;
- ``warm``: per-store state kept warm in the parent (each recently used store's hot index);
- ``worker``: what a forked child does with one request;
- ``daemon``: the listener, the fork per request, reaping and idle exit.

This package's ``__init__`` stays empty of imports: the client imports ``paths``, ``fingerprint``
and ``protocol`` on every call.
"""
