# Before compaction: what is not remembered now is lost from the context.
mnemon_payload >/dev/null
printf '%s\n' '[mnemon] Context is about to be compacted. Insights not yet stored with `mnemon remember` will be lost from this session; after compaction, `mnemon recall "<topic>"` brings back what was stored.' \
    | mnemon_emit_context user_message
exit 0
