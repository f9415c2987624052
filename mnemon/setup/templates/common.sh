# Fail-open: whatever goes wrong (mnemon missing, store locked, bad data) this hook exits 0 and
# prints nothing that could mislead the agent. Absolute paths only: hosts run hooks from any cwd.
MNEMON_PYTHON=@PYTHON@
# The console script of that interpreter's mnemon ("" when none is installed): no runpy on each call.
MNEMON_SCRIPT=@MNEMON@
MNEMON_PYTHONPATH=@PYTHONPATH@
MNEMON_DEFAULT_DATA_DIR=@DATA_DIR@
MNEMON_HOOK_DATA_DIR=${MNEMON_DATA_DIR:-$MNEMON_DEFAULT_DATA_DIR}
MNEMON_OUTPUT=@OUTPUT@
MNEMON_EVENT=@EVENT@
# Recall on prompt (setup --recall-on-prompt): hits at or above the relevance floor (absolute), within a time budget.
MNEMON_RECALL=@RECALL@
MNEMON_RECALL_LIMIT=${MNEMON_RECALL_LIMIT:-@RECALL_LIMIT@}
MNEMON_RECALL_FLOOR=${MNEMON_RECALL_FLOOR:-@RECALL_FLOOR@}
MNEMON_RECALL_BUDGET=${MNEMON_RECALL_BUDGET:-@RECALL_BUDGET@}

mnemon_env() {
    if [ -n "$MNEMON_PYTHONPATH" ]; then
        PYTHONPATH="$MNEMON_PYTHONPATH${PYTHONPATH:+:$PYTHONPATH}"
        export PYTHONPATH
    fi
}

mnemon_run() {
    [ -x "$MNEMON_PYTHON" ] || return 1
    mnemon_env
    if [ -n "$MNEMON_SCRIPT" ] && [ -x "$MNEMON_SCRIPT" ]; then
        set -- "$MNEMON_SCRIPT" --data-dir "$MNEMON_HOOK_DATA_DIR" "$@"
    else
        set -- "$MNEMON_PYTHON" -m mnemon --data-dir "$MNEMON_HOOK_DATA_DIR" "$@"
    fi
    # A store locked by another writer must not make the agent wait for the 30 s busy timeout.
    if command -v timeout >/dev/null 2>&1; then
        timeout 10 "$@" </dev/null 2>/dev/null
    else
        "$@" </dev/null 2>/dev/null
    fi
}

# The host's event payload (JSON on stdin). Bounded: a host that keeps stdin open cannot hang us.
mnemon_payload() {
    if [ -t 0 ]; then
        return 0
    fi
    if command -v timeout >/dev/null 2>&1; then
        timeout 2 cat 2>/dev/null
    else
        cat 2>/dev/null
    fi
}

# The JSON helper (stdlib Python, isolated and without site: ~15 ms) for what sh cannot parse: the
# prompt inside the event, recall's --brief output, a field's text. Reads the event on stdin.
mnemon_helper() {
    [ -x "$MNEMON_PYTHON" ] || return 1
    mnemon_env
    "$MNEMON_PYTHON" -I -S -c "$MNEMON_HELPER_PY" "$@" 2>/dev/null
}

# stdin (the event) → the recall block for its prompt, or nothing. The helper keeps to the budget
# itself; `timeout` is the backstop that also ends a stuck mnemon (it signals the process group).
mnemon_recall_hits() {
    if [ "$MNEMON_RECALL" != 1 ] || [ ! -x "$MNEMON_PYTHON" ]; then
        mnemon_payload >/dev/null
        return 0
    fi
    if command -v timeout >/dev/null 2>&1; then
        timeout -k 1 "$MNEMON_RECALL_BUDGET" "$MNEMON_PYTHON" -I -S -c "$MNEMON_HELPER_PY" recall \
            "$MNEMON_HOOK_DATA_DIR" "$MNEMON_RECALL_LIMIT" "$MNEMON_RECALL_FLOOR" "$MNEMON_RECALL_BUDGET" \
            "$MNEMON_SCRIPT" 2>/dev/null
    else
        mnemon_helper recall "$MNEMON_HOOK_DATA_DIR" "$MNEMON_RECALL_LIMIT" "$MNEMON_RECALL_FLOOR" \
            "$MNEMON_RECALL_BUDGET" "$MNEMON_SCRIPT"
    fi
    # 0: the helper read the event to its end. Otherwise (stopped while the host was still writing, killed
    # at the budget, no interpreter) the rest is read here: a host writing into a closed pipe gets EPIPE.
    [ $? -eq 0 ] || mnemon_payload >/dev/null
    return 0
}

# "[mnemon] Memory active (N insights, M edges)." and the guide; fails (prints nothing) when mnemon does.
mnemon_status_text() {
    status=$(mnemon_run status) || return 1
    insights=$(printf '%s\n' "$status" | sed -n 's/^ *"total_insights": *\([0-9][0-9]*\).*/\1/p' | head -n 1)
    edges=$(printf '%s\n' "$status" | sed -n 's/^ *"edge_count": *\([0-9][0-9]*\).*/\1/p' | head -n 1)
    [ -n "$insights" ] || return 1
    guide="$MNEMON_HOOK_DATA_DIR/prompt/guide.md"
    printf '[mnemon] Memory active (%s insights, %s edges).\n' "$insights" "${edges:-0}"
    if [ -r "$guide" ]; then
        printf '\n'
        cat "$guide" 2>/dev/null
    fi
    return 0
}

# stdin text → one JSON string literal (quotes, backslashes, tabs, CR escaped; lines joined by \n).
mnemon_json_string() {
    LC_ALL=C awk 'BEGIN { ORS = ""; printf "\"" }
        { gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); gsub(/\t/, "\\t"); gsub(/\r/, "\\r");
          gsub(/[\001-\010\013\014\016-\037]/, ""); if (NR > 1) printf "\\n"; printf "%s", $0 }
        END { printf "\"" }'
}

# Print context the way this host reads it: plain stdout (Claude Code), the field Cursor reads for
# this event, {"context": …} (Hermes), or hookSpecificOutput.additionalContext (Codex, ZCode, TRAE,
# Qoder, CodeBuddy, WorkBuddy, Kimi: the Claude-compatible JSON form, which the hosts that also take
# plain text accept as well and the Qoder IDE requires).
mnemon_emit_context() {
    case "$MNEMON_OUTPUT" in
    claude) cat ;;
    cursor)
        printf '{"%s":' "$1"
        mnemon_json_string
        printf '}\n'
        ;;
    hermes)
        printf '{"context":'
        mnemon_json_string
        printf '}\n'
        ;;
    *)
        printf '{"hookSpecificOutput":{"hookEventName":"%s","additionalContext":' "$MNEMON_EVENT"
        mnemon_json_string
        printf '}}\n'
        ;;
    esac
}
