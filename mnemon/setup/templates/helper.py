# mnemon hook helper: embedded in the hook scripts, run as `python -I -S -c` (stdlib only, no site).
# Modes (the host event arrives as JSON on stdin):
#   recall DATA_DIR LIMIT FLOOR BUDGET   print the recall block for the prompt, or nothing
#   mentions FIELD...                    exit 0 when a field (dotted path) mentions memory, else 1
# Never raises: any failure means no output (and, for mentions, "not mentioned").
# NOTE: this text goes into a single-quoted shell string, so it must not contain a single quote.
import json
import os
import select
import subprocess
import sys
import time

START = time.monotonic()
PROMPT_CHARS = 500
MEMORY_WORDS = ("mnemon", "durable memory", "\u6301\u4e45\u8bb0\u5fc6", "\u5199\u5165\u8bb0\u5fc6")


EVENT_MAX = 16 << 20  # bytes of an event kept; the rest is read and dropped
DRAIN_SECONDS = 10.0  # the longest a hook goes on reading an event whose bytes keep coming
IDLE_SECONDS = 0.3  # a pause this long after the deadline: the host is not writing (it may keep stdin open)
PROMPT_KEYS = ("prompt", "user_prompt", "user_message")
DRAINED = [True]  # False when the read stopped while the host was still writing


def read_event(deadline):
    # The whole event is read, whatever its size: a hook that stops reading leaves the host writing into a
    # closed pipe (EPIPE; 4 MB was once the most read). Up to EVENT_MAX bytes are kept, the rest is dropped
    # as it comes. The deadline bounds only the wait for bytes that do not come (a host that keeps stdin
    # open): while they flow the read goes on, up to DRAIN_SECONDS.
    chunks, size = [], 0
    fd = sys.stdin.fileno()
    if os.isatty(fd):
        return None
    limit = time.monotonic() + DRAIN_SECONDS
    until = deadline
    while True:
        wait = min(until, limit) - time.monotonic()
        if wait <= 0 or not select.select([fd], [], [], wait)[0]:
            DRAINED[0] = time.monotonic() < limit  # stopped at the cap: the shell drains the rest
            break
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        if size < EVENT_MAX:
            chunks.append(chunk[:EVENT_MAX - size])
        size += len(chunk)
        until = max(deadline, time.monotonic() + IDLE_SECONDS)
    text = b"".join(chunks).decode("utf-8", "replace")
    try:
        return json.loads(text)
    except ValueError:
        return head_prompt(text) if size > EVENT_MAX else None


def head_prompt(text):
    # An event past EVENT_MAX is all but certainly a huge prompt (a pasted log or file): recall reads only
    # the first PROMPT_CHARS characters of the prompt anyway, so they are taken from the kept head when the
    # prompt field starts there, as {"prompt": ...}; a field cut short still gives its beginning.
    decoder = json.JSONDecoder()
    for key in PROMPT_KEYS:
        at = text.find(json.dumps(key) + ":")
        while at >= 0:
            start = at + len(key) + 3
            while text[start:start + 1] in (" ", "\t", "\r", "\n"):
                start += 1
            if text[start:start + 1] == "\"":
                piece = text[start:start + PROMPT_CHARS * 16]
                for cut in range(8):  # a cut inside an escape sequence: drop its last characters
                    try:
                        value = decoder.raw_decode(piece[:len(piece) - cut] + "\"")[0]
                    except ValueError:
                        continue
                    return {"prompt": value} if isinstance(value, str) else None
            at = text.find(json.dumps(key) + ":", at + 1)
    return None


def field(event, dotted):
    value = event
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def text_of(content):
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def prompt_of(event):
    # Claude-shaped hosts send "prompt"; Hermes sends extra.user_message (or only the conversation).
    if not isinstance(event, dict):
        return ""
    for key in ("prompt", "user_prompt", "extra.user_message", "message", "input", "query"):
        value = text_of(field(event, key))
        if value.strip():
            return value
    for key in ("extra.conversation_history", "messages", "conversation_history"):
        turns = field(event, key)
        if isinstance(turns, list):
            for turn in reversed(turns):
                if isinstance(turn, dict) and turn.get("role") == "user" and text_of(turn.get("content")).strip():
                    return text_of(turn.get("content"))
    return ""


def recall(data_dir, limit, floor, budget, script=""):
    deadline = START + float(budget) - 0.1
    # The query is the head of the prompt (PROMPT_CHARS, as in the plugins): a huge prompt is cut before its
    # words are split, so a pasted log costs no more than its head.
    prompt = " ".join(prompt_of(read_event(START + min(0.3, float(budget) / 4)))[:PROMPT_CHARS * 16].split())
    prompt = prompt[:PROMPT_CHARS]
    if len(prompt) < 3:
        return
    mnemon = [script] if script and os.access(script, os.X_OK) else [sys.executable, "-m", "mnemon"]
    argv = mnemon + ["--data-dir", data_dir, "recall", "--brief", "--limit", limit, "--", prompt]
    try:
        out = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             timeout=max(0.05, deadline - time.monotonic()), check=True).stdout
        results = json.loads(out.decode("utf-8")).get("results") or []
    except (OSError, ValueError, AttributeError, subprocess.SubprocessError):
        return
    lines = []
    for hit in results:  # the floor is on "relevance", absolute (a hit without one is never injected)
        if not isinstance(hit, dict) or hit.get("superseded") or not isinstance(hit.get("relevance"), (int, float)):
            continue
        if hit["relevance"] < float(floor) or not isinstance(hit.get("excerpt"), str):
            continue
        lines.append("- [%s relevance=%.2f] %s" % (hit.get("category") or "general", hit["relevance"], hit["excerpt"]))
    if lines and time.monotonic() < deadline:
        sys.stdout.write("[mnemon] Relevant memories for this prompt (from mnemon recall):\n"
                         + "\n".join(lines) + "\n")


def mentions(fields):
    event = read_event(START + 1.0)
    if not isinstance(event, dict):
        return 1
    for name in fields:
        value = text_of(field(event, name)).lower()
        if any(word in value for word in MEMORY_WORDS):
            return 0
    return 1


def main(args):
    try:
        if args[:1] == ["recall"] and len(args) in (5, 6):
            recall(*args[1:])
            return 0 if DRAINED[0] else 3  # 3: stdin not read to its end, the shell drains it
        if args[:1] == ["mentions"]:
            return mentions(args[1:])
    except Exception:
        pass
    return 1 if args[:1] == ["mentions"] else 0


sys.exit(main(sys.argv[1:]))
