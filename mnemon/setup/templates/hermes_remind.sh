# pre_llm_call: the pending session context and nudge (consumed), the recall hits for the user's
# message when recall is on, and the one-line reminder, as {"context": …}.
state="${HERMES_HOME:-$HOME/.hermes}/mnemon"
hits=$(mnemon_recall_hits)
{
    for pending in "$state/prime-context.txt" "$state/pending-nudge.txt"; do
        if [ -r "$pending" ]; then
            cat "$pending" 2>/dev/null
            printf '\n'
            rm -f "$pending" 2>/dev/null
        fi
    done
    if [ -n "$hits" ]; then
        printf '%s\n\n' "$hits"
    fi
    printf '%s\n' '[mnemon] Evaluate: recall needed? If this request may depend on earlier decisions, preferences or project facts, run `mnemon recall "<topic>"` first. Remember durable insights with `mnemon remember` (never secrets).'
} | mnemon_emit_context
exit 0
