"""mnemon: persistent memory for AI agents, driven from the shell.

The public library API is :class:`mnemon.engine.Engine` with :class:`mnemon.config.Settings`;
they are imported lazily so that ``import mnemon`` (and ``mnemon --help``) stays cheap. (No
``from __future__`` import either: every served call imports this package first.)
"""

__version__ = "0.3.0"

__all__ = ["__version__"]
