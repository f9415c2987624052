# Session start: store counts from `mnemon status`, then the guide (contract §3.18).
mnemon_payload >/dev/null
status=$(mnemon_run status) || exit 0
insights=$(printf '%s\n' "$status" | sed -n 's/^ *"total_insights": *\([0-9][0-9]*\).*/\1/p' | head -n 1)
edges=$(printf '%s\n' "$status" | sed -n 's/^ *"edge_count": *\([0-9][0-9]*\).*/\1/p' | head -n 1)
[ -n "$insights" ] || exit 0
guide="$MNEMON_HOOK_DATA_DIR/prompt/guide.md"
{
    printf '[mnemon] Memory active (%s insights, %s edges).\n' "$insights" "${edges:-0}"
    if [ -r "$guide" ]; then
        printf '\n'
        cat "$guide" 2>/dev/null
    fi
} | mnemon_emit_context additional_context
exit 0
