"""Settings: the one table of configurable values and the only reader of ``os.environ``.

Resolution order (contract §2.2, §3.2): command-line flag > environment variable >
``<data-dir>/active`` (store name only) > default. Invalid values of the spec'd variables produce
the contract's stderr warning and fall back to the default; the warnings are collected here and
printed by the CLI. stdlib only: imported on every CLI start.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from mnemon.errors import InputError
from mnemon.lifecycle import format_go_duration
from mnemon.records import DEFAULT_MAX_INSIGHTS, DEFAULT_PRUNE_MIN_AGE_SECONDS
from mnemon.validate import check_text

STORE_NAME_RE = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_-]*")
STORE_NAME_MAX = 255
DEFAULT_STORE = "default"
DEFAULT_EMBED_ENDPOINT = "http://localhost:11434"
DEFAULT_EMBED_MODEL = "nomic-embed-text"
DEFAULT_KEEP_ALIVE = "30m"
EMBED_PROTOCOLS = ("auto", "ollama", "openai", "local")


@dataclass(frozen=True, slots=True)
class SettingSpec:
    """One configurable value: its name, environment variable and help text."""

    name: str
    env: str | None
    help: str


SETTINGS: tuple[SettingSpec, ...] = (
    SettingSpec("data_dir", "MNEMON_DATA_DIR", "base directory (default ~/.mnemon; no ~ expansion)"),
    SettingSpec("store", "MNEMON_STORE", "store name (below --store, above <data-dir>/active)"),
    SettingSpec("embed_endpoint", "MNEMON_EMBED_ENDPOINT", "embedding server URL"),
    SettingSpec("embed_model", "MNEMON_EMBED_MODEL", "embedding model name"),
    SettingSpec("embed_dimensions", "MNEMON_EMBED_DIMENSIONS", "positive int sent as `dimensions`"),
    SettingSpec("embed_protocol", "MNEMON_EMBED_PROTOCOL", "ollama | openai | local | auto"),
    SettingSpec("embed_model_path", "MNEMON_EMBED_MODEL_PATH", "local protocol: model directory (model.onnx + tokenizer.json)"),
    SettingSpec("embed_api_key", "MNEMON_EMBED_API_KEY", "bearer key (openai protocol only)"),
    SettingSpec("embed_keep_alive", "MNEMON_EMBED_KEEP_ALIVE", "Ollama keep_alive"),
    SettingSpec("max_insights", "MNEMON_MAX_INSIGHTS", "auto-prune ceiling; <= 0 disables"),
    SettingSpec("auto_prune_min_age", "MNEMON_AUTO_PRUNE_MIN_AGE", "auto-prune grace (Go duration, <n>d, 0)"),
)
ENV_NAMES: dict[str, str] = {s.name: s.env for s in SETTINGS if s.env}


@dataclass(frozen=True, slots=True)
class Settings:
    """Resolved configuration for one command; the engine never reads the environment itself."""

    data_dir: Path
    store: str
    readonly: bool = False
    # Read-only over a store others are writing (the gateway's read-only calls): the live read-only open,
    # not --readonly's immutable snapshot (store/connection.open_readonly). Never set from a flag.
    readonly_live: bool = False
    embed_endpoint: str = DEFAULT_EMBED_ENDPOINT
    embed_model: str = DEFAULT_EMBED_MODEL
    embed_dimensions: int | None = None
    embed_protocol: str = "auto"
    embed_model_path: str | None = None  # local protocol: overrides <data-dir>/models/<model>
    embed_api_key: str | None = None
    embed_keep_alive: str = DEFAULT_KEEP_ALIVE
    max_insights: int = DEFAULT_MAX_INSIGHTS
    auto_prune_min_age: float = float(DEFAULT_PRUNE_MIN_AGE_SECONDS)
    warnings: tuple[str, ...] = field(default=(), compare=False)

    @property
    def store_dir(self) -> Path:
        return self.data_dir / "data" / self.store

    @property
    def db_path(self) -> Path:
        return self.store_dir / "mnemon.db"


# Thread pools numpy's BLAS would start at import: mnemon's vector work is one matrix-vector scan
# (memory-bound; einsum, not BLAS) and the numba kernels bring their own threads, so a second pool
# only costs start-up (≈80 ms of CPU per CLI call here) and contends with numba (targets.md).
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def limit_blas_threads() -> None:
    """Default the BLAS thread pools to one thread unless the user chose otherwise; call before numpy loads."""
    for name in BLAS_THREAD_VARIABLES:
        os.environ.setdefault(name, "1")


def valid_store_name(name: str) -> bool:
    """Return whether ``name`` is a legal store name (§2.2); fullmatch, so no trailing newline slips by."""
    # A directory name longer than NAME_MAX (255 bytes) can never exist: refuse it up front.
    return len(name) <= STORE_NAME_MAX and STORE_NAME_RE.fullmatch(name) is not None


def quote_name(name: str) -> str:
    """Quote a user-given name like Go's ``%q``: control characters escaped, so a hostile name
    (``a\\n``) cannot split the one-line error message."""
    return json.dumps(name, ensure_ascii=False)


def check_store_name(name: str) -> str:
    """Return ``name`` or raise the contract's error for a name that is not a valid store name."""
    if not valid_store_name(name):
        raise InputError(f"invalid store name {quote_name(name)}")
    return name


def default_data_dir(environ: dict[str, str]) -> Path:
    """Return ``$MNEMON_DATA_DIR`` as given, else ``~/.mnemon``."""
    value = environ.get("MNEMON_DATA_DIR", "")
    if value:
        return Path(value)
    return Path(environ.get("HOME") or os.path.expanduser("~")) / ".mnemon"


def read_active(data_dir: Path) -> str | None:
    """Return the trimmed, valid store name in ``<data-dir>/active``, or None."""
    try:
        name = (data_dir / "active").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    return name if name and valid_store_name(name) else None


# --- Go durations (§3.2 MNEMON_AUTO_PRUNE_MIN_AGE, §3.12 prune detail) ----------------------

_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
# [0-9], not \d: Go's ParseDuration reads ASCII digits only (\d took "٣h", float() read it as 3)
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h)")
# Go's longest Duration (int64 nanoseconds, about 292 years): its ParseDuration refuses more. A longer
# grace made the prune cutoff (now - grace) overflow a datetime: the remember that pruned crashed.
_MAX_DURATION_SECONDS = (2**63 - 1) / 1e9


def parse_duration(text: str) -> float:
    """Parse a Go duration (``24h``, ``1h30m``, ``90s``), ``<n>d`` or ``0`` into seconds.

    Raises ValueError for anything else, including negative values (the caller warns and
    falls back to the default, as the contract says).
    """
    s = text.strip()
    if s == "0":
        return 0.0
    day = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)d", s)
    if day:
        return _bounded(float(day.group(1)) * 86400.0, text)
    if not s or s.startswith("-"):
        raise ValueError(text)
    s = s.lstrip("+")
    pos, total = 0, 0.0
    while pos < len(s):
        m = _DURATION_PART.match(s, pos)
        if not m:
            raise ValueError(text)
        total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    if pos == 0:
        raise ValueError(text)
    return _bounded(total, text)


def _bounded(seconds: float, text: str) -> float:
    if seconds > _MAX_DURATION_SECONDS:
        raise ValueError(text)
    return seconds


# Go's strconv.Atoi (and pflag's int flags): an optional sign, then ASCII digits only. Python's int() also takes
# surrounding spaces, other scripts' digits ("٣") and underscores ("1_000"), which Go refuses.
_GO_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_INT64_DIGITS = len(str(2**63))  # 19: more significant digits than this are out of range whatever they are


def parse_go_int(text: str) -> int:
    """``text`` read as Go's strconv.Atoi reads it into an int64 (decimal only); ValueError("invalid syntax") or
    ValueError("value out of range") (strconv's own reasons) otherwise. The integer variables read here use it: an
    unparsable one (a value past int64 included) gets the warning and the default (§3.2) instead of being used as
    given (sent to the embedding server, shown). The flags are pflag's, base 0 (``validate.parse_flag_int``)."""
    if _GO_INT.fullmatch(text) is None:
        raise ValueError("invalid syntax")
    # (counted before int(): Python refuses to convert more than 4,300 digits with an error of its own)
    if len(text.lstrip("+-").lstrip("0")) > _INT64_DIGITS:
        raise ValueError("value out of range")
    value = int(text)
    if not -(2**63) <= value <= 2**63 - 1:
        raise ValueError("value out of range")
    return value


def resolve(
    *,
    data_dir: str | None = None,
    store: str | None = None,
    readonly: bool = False,
    readonly_live: bool = False,
    embed_model: str | None = None,
    environ: dict[str, str] | None = None,
) -> Settings:
    """Resolve flags and environment into Settings (flag > env > active file > default)."""
    env = dict(os.environ) if environ is None else environ
    warnings: list[str] = []
    base = Path(data_dir) if data_dir else default_data_dir(env)
    # SQLite opens paths given as UTF-8: an undecodable byte (a bad argv or environment) is refused
    # here, before any directory is created, not by a traceback once they are
    check_text(str(base), "the data directory path")

    name = store if store else env.get("MNEMON_STORE", "")
    if not name:
        name = read_active(base) or DEFAULT_STORE

    dimensions: int | None = None
    raw_dims = env.get("MNEMON_EMBED_DIMENSIONS", "").strip()
    if raw_dims:
        try:
            dimensions = parse_go_int(raw_dims)
            if dimensions <= 0:
                raise ValueError(raw_dims)
        except ValueError:
            dimensions = None
            warnings.append(f'mnemon: ignoring invalid MNEMON_EMBED_DIMENSIONS "{raw_dims}"')

    protocol = env.get("MNEMON_EMBED_PROTOCOL", "").strip().lower() or "auto"
    if protocol not in EMBED_PROTOCOLS:
        warnings.append(f'mnemon: ignoring invalid MNEMON_EMBED_PROTOCOL "{protocol}"; using auto')
        protocol = "auto"

    max_insights = DEFAULT_MAX_INSIGHTS
    raw_max = env.get("MNEMON_MAX_INSIGHTS", "").strip()
    if raw_max:
        try:
            max_insights = parse_go_int(raw_max)
        except ValueError:
            warnings.append(
                f'mnemon: ignoring invalid MNEMON_MAX_INSIGHTS "{raw_max}"; using default {DEFAULT_MAX_INSIGHTS}'
            )

    min_age = float(DEFAULT_PRUNE_MIN_AGE_SECONDS)
    raw_age = env.get("MNEMON_AUTO_PRUNE_MIN_AGE", "").strip()
    if raw_age:
        try:
            min_age = parse_duration(raw_age)
        except ValueError:
            warnings.append(
                f'mnemon: ignoring invalid MNEMON_AUTO_PRUNE_MIN_AGE "{raw_age}"; using default '
                f"{format_go_duration(DEFAULT_PRUNE_MIN_AGE_SECONDS)}"
            )

    return Settings(
        data_dir=base,
        store=name,
        readonly=readonly,
        readonly_live=readonly and readonly_live,
        embed_endpoint=env.get("MNEMON_EMBED_ENDPOINT", "").strip() or DEFAULT_EMBED_ENDPOINT,
        embed_model=(embed_model or env.get("MNEMON_EMBED_MODEL", "").strip() or DEFAULT_EMBED_MODEL),
        embed_dimensions=dimensions,
        embed_protocol=protocol,
        embed_model_path=env.get("MNEMON_EMBED_MODEL_PATH", "").strip() or None,
        embed_api_key=env.get("MNEMON_EMBED_API_KEY") or None,
        embed_keep_alive=env.get("MNEMON_EMBED_KEEP_ALIVE", "").strip() or DEFAULT_KEEP_ALIVE,
        max_insights=max_insights,
        auto_prune_min_age=min_age,
        warnings=tuple(warnings),
    )


# Variables that move an agent host's config dir (setup-targets.md): `setup` gets them from here, so
# that this module stays the only reader of the environment.
HOST_DIR_VARIABLES = ("KIMI_CODE_HOME", "OPENCODE_CONFIG_DIR", "PI_CODING_AGENT_DIR")


def host_dir_environment() -> dict[str, str]:
    return {name: os.environ[name] for name in HOST_DIR_VARIABLES if name in os.environ}


def process_environment() -> dict[bytes, bytes]:
    """This process's environment as bytes (the warm server's socket key and its child's env)."""
    return dict(os.environb)


def server_idle_text() -> str:
    """``MNEMON_SERVER_IDLE`` as given (parsed by ``mnemon.server.daemon.idle_seconds``)."""
    return os.environ.get("MNEMON_SERVER_IDLE", "")


def gateway_token(variable: str, environ: dict[str, str] | None = None) -> str:
    """The bearer token of a remote store, read from its variable at each call (never stored)."""
    env = os.environ if environ is None else environ
    return env.get(variable, "").strip()
