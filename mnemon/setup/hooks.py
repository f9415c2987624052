"""Render the hook scripts from the templates in ``templates/`` with absolute paths baked in.

Every script is POSIX sh: ``common.sh`` (fail-open runner, bounded stdin read, JSON string escaping
with awk, per-host output dialect) followed by one hook body (Hermes has its own bodies: its session
and post hooks are observational and hand their text to ``pre_llm_call`` through state files). Only
``prime`` starts mnemon unconditionally; the prompt hook recalls only with recall on prompt. What sh
cannot parse (the prompt inside the event, recall's JSON) goes to ``templates/helper.py``, embedded
in the script and run as ``python -I -S -c`` (stdlib only, ~15 ms). mnemon runs as the installed
``mnemon`` console script beside ``sys.executable`` when there is one for this interpreter (no runpy:
``-m`` costs about 5 ms a call), else as ``sys.executable -m mnemon``; the package's parent directory
goes on PYTHONPATH when it is not importable from site-packages (a source checkout), so hooks work
from any directory. stdlib only.
"""

from __future__ import annotations

import os
import shlex
import sys
import sysconfig
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from mnemon.relevance import PROMPT_FLOOR
from mnemon.setup import files

if TYPE_CHECKING:
    from mnemon.setup import Placement

# Recall on prompt: at most this many hits, only those whose relevance reaches the floor, and nothing
# at all past the budget (seconds, the whole helper). The relevance is absolute (mnemon.relevance:
# how much of the prompt the best memories carry against this store's background), unlike recall's
# score, which is relative to the best candidate and so high for the top hit of any prompt. Limit and
# floor were chosen on the development conversations with bench/relevance.py (bench/README.md): with
# 3 lines a question's evidence is injected nearly as often (58% vs 61%) as with the old 5 lines at
# score 0.65, and an unrelated prompt injects something 4% of the time instead of 87%.
RECALL_LIMIT = 3
RECALL_FLOOR = PROMPT_FLOOR
RECALL_BUDGET_SECONDS = 1.5


def _template(name: str) -> str:
    return resources.files(__package__).joinpath("templates", name).read_text(encoding="utf-8")


def mnemon_import_root() -> str:
    """The directory to put on PYTHONPATH, or "" when the interpreter finds mnemon by itself."""
    import mnemon

    root = Path(mnemon.__file__).resolve().parent.parent
    site_dirs = {Path(p).resolve() for p in (sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"])}
    return "" if root in site_dirs else str(root)


def interpreter() -> str:
    # Not resolved: a venv's python is a symlink whose target would lose the venv's site-packages.
    return str(Path(sys.executable).absolute())


def console_script() -> str:
    """The ``mnemon`` console script beside the interpreter when it is this interpreter's entry
    point (its ``#!`` names a python in the same directory, it calls ``mnemon.client``); else ""."""
    python = Path(interpreter())
    script = python.with_name("mnemon")
    try:
        with script.open("rb") as f:
            head = f.read(4096)
    except OSError:
        return ""
    lines = head.split(b"\n")
    shebang = lines[0][2:].strip() if lines[0].startswith(b"#!") else b""
    if not shebang or Path(shebang.decode(errors="replace")).parent != python.parent:
        return ""
    if b"from mnemon.client import main" not in head or not script.is_file() or not os.access(script, os.X_OK):
        return ""
    return str(script)


def helper_source() -> str:
    source = _template("helper.py")
    if "'" in source:  # it is embedded in a single-quoted sh string
        raise AssertionError("templates/helper.py must not contain a single quote")
    return source


def _body(target_name: str, hook: str, file_name: str) -> str:
    if target_name == "hermes":
        return _template(f"hermes_{hook}.sh")
    return _template(file_name)


def render(placement: Placement, hook: str, data_dir: Path, *, recall: bool) -> str:
    target = placement.target
    values = {
        "@PYTHON@": shlex.quote(interpreter()),
        "@MNEMON@": shlex.quote(console_script()),
        "@PYTHONPATH@": shlex.quote(mnemon_import_root()),
        "@DATA_DIR@": shlex.quote(str(data_dir.absolute())),
        "@OUTPUT@": shlex.quote(target.output),
        "@EVENT@": shlex.quote(target.events[hook]),
        "@RECALL@": "1" if recall else "0",
        "@RECALL_LIMIT@": str(RECALL_LIMIT),
        "@RECALL_FLOOR@": str(RECALL_FLOOR),
        "@RECALL_BUDGET@": str(RECALL_BUDGET_SECONDS),
    }
    common = _template("common.sh")
    for key, value in values.items():
        common = common.replace(key, value)
    header = (
        "#!/bin/sh\n"
        f"# mnemon {hook} hook for {target.name} ({target.events[hook]}).\n"
        "# Written by `mnemon setup`; `mnemon setup --eject` removes it. Edits are overwritten by setup.\n"
    )
    helper = f"MNEMON_HELPER_PY='{helper_source()}'\n"
    return header + common + "\n" + helper + "\n" + _body(target.name, hook, target.files[hook])


def write_scripts(placement: Placement, scripts: dict[str, Path], data_dir: Path, *, recall: bool) -> None:
    """Write each enabled hook's script (mode 0755, atomically) at the path ``scripts`` names."""
    for hook, path in scripts.items():
        text = render(placement, hook, data_dir, recall=recall and hook == "remind")
        files.write_text(path, text, mode=files.SCRIPT_MODE, keep_mode=False)
