"""Render the hook scripts from the templates in ``templates/`` with absolute paths baked in.

Every script is POSIX sh: ``common.sh`` (fail-open runner, bounded stdin read, JSON string
escaping with awk, per-host output) followed by one hook body. Only ``prime`` starts mnemon
(``mnemon status``, parsed with sed on ``"total_insights": <n>``, contract §3.1); the others
print fixed text, so they cost a shell start. The interpreter is ``sys.executable -m mnemon``,
with the package's parent directory on PYTHONPATH when it is not already importable from
site-packages (a source checkout), so hooks work from any directory (issue #52). stdlib only.
"""

from __future__ import annotations

import shlex
import sys
import sysconfig
from importlib import resources
from pathlib import Path

from mnemon.setup.targets import HOOK_FILES, Target


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


def render(target: Target, hook: str, data_dir: Path) -> str:
    values = {
        "@PYTHON@": shlex.quote(interpreter()),
        "@PYTHONPATH@": shlex.quote(mnemon_import_root()),
        "@DATA_DIR@": shlex.quote(str(data_dir.absolute())),
        "@OUTPUT@": shlex.quote(target.output),
        "@EVENT@": shlex.quote(target.events[hook]),
    }
    common = _template("common.sh")
    for key, value in values.items():
        common = common.replace(key, value)
    header = (
        "#!/bin/sh\n"
        f"# mnemon {hook} hook for {target.name} ({target.events[hook]}).\n"
        "# Written by `mnemon setup`; `mnemon setup --eject` removes it. Edits are overwritten by setup.\n"
    )
    return header + common + "\n" + _template(HOOK_FILES[hook])


def write_scripts(target: Target, hooks: list[str], hook_dir: Path, data_dir: Path) -> dict[str, Path]:
    """Write the enabled hooks' scripts (mode 0755) and return hook → absolute script path."""
    hook_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    for hook in hooks:
        path = hook_dir / HOOK_FILES[hook]
        path.write_text(render(target, hook, data_dir), encoding="utf-8")
        path.chmod(0o755)
        written[hook] = path
    return written
