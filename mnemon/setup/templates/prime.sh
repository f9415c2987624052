# Session start: store counts from `mnemon status`, then the guide (contract §3.18).
mnemon_payload >/dev/null
text=$(mnemon_status_text) || exit 0
printf '%s\n' "$text" | mnemon_emit_context additional_context
exit 0
