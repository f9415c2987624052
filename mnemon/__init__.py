"""mnemon: persistent memory for AI agents, driven from the shell.

The public library API is :class:`mnemon.engine.Engine` with :class:`mnemon.config.Settings`;
they are imported lazily so that ``import mnemon`` (and ``mnemon --help``) stays cheap.
"""

from __future__ import annotations

__version__ = "0.3.0"

__all__ = ["__version__"]
