# Prompt submit: a one-line reminder; no mnemon call, so it costs the agent nothing.
mnemon_payload >/dev/null
printf '%s\n' '[mnemon] If this request may depend on earlier decisions, preferences or project facts, run `mnemon recall "<topic>"` first. Remember durable insights with `mnemon remember` (never secrets).' \
    | mnemon_emit_context additional_context
exit 0
