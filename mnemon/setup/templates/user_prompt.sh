# Prompt submit: with recall on, the memories that match the prompt (only hits at or above the relevance floor,
# within the time budget, else nothing); then a one-line reminder, which costs no mnemon call.
hits=$(mnemon_recall_hits)
{
    if [ -n "$hits" ]; then
        printf '%s\n\n' "$hits"
    fi
    printf '%s\n' '[mnemon] If this request may depend on earlier decisions, preferences or project facts, run `mnemon recall "<topic>"` first. Remember durable insights with `mnemon remember` (never secrets).'
} | mnemon_emit_context additional_context
exit 0
