# Fail-open: whatever goes wrong (mnemon missing, store locked, bad data) this hook exits 0 and
# prints nothing that could mislead the agent. Absolute paths only: hosts run hooks from any cwd.
MNEMON_PYTHON=@PYTHON@
MNEMON_PYTHONPATH=@PYTHONPATH@
MNEMON_DEFAULT_DATA_DIR=@DATA_DIR@
MNEMON_HOOK_DATA_DIR=${MNEMON_DATA_DIR:-$MNEMON_DEFAULT_DATA_DIR}
MNEMON_OUTPUT=@OUTPUT@
MNEMON_EVENT=@EVENT@

mnemon_run() {
    [ -x "$MNEMON_PYTHON" ] || return 1
    if [ -n "$MNEMON_PYTHONPATH" ]; then
        PYTHONPATH="$MNEMON_PYTHONPATH${PYTHONPATH:+:$PYTHONPATH}"
        export PYTHONPATH
    fi
    # A store locked by another writer must not make the agent wait for the 30 s busy timeout.
    if command -v timeout >/dev/null 2>&1; then
        timeout 10 "$MNEMON_PYTHON" -m mnemon --data-dir "$MNEMON_HOOK_DATA_DIR" "$@" </dev/null 2>/dev/null
    else
        "$MNEMON_PYTHON" -m mnemon --data-dir "$MNEMON_HOOK_DATA_DIR" "$@" </dev/null 2>/dev/null
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

# stdin text → one JSON string literal (quotes, backslashes, tabs, CR escaped; lines joined by \n).
mnemon_json_string() {
    LC_ALL=C awk 'BEGIN { ORS = ""; printf "\"" }
        { gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); gsub(/\t/, "\\t"); gsub(/\r/, "\\r");
          gsub(/[\001-\010\013\014\016-\037]/, ""); if (NR > 1) printf "\\n"; printf "%s", $0 }
        END { printf "\"" }'
}

# Print context the way this host reads it: plain stdout (Claude Code), hookSpecificOutput (Codex),
# or the field Cursor reads for this event.
mnemon_emit_context() {
    case "$MNEMON_OUTPUT" in
    claude) cat ;;
    codex)
        printf '{"hookSpecificOutput":{"hookEventName":"%s","additionalContext":' "$MNEMON_EVENT"
        mnemon_json_string
        printf '}}\n'
        ;;
    cursor)
        printf '{"%s":' "$1"
        mnemon_json_string
        printf '}\n'
        ;;
    esac
}
