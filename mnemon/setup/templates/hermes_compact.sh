# on_session_finalize: a last reminder to store what matters before the session's context is gone.
mnemon_payload >/dev/null
state="${HERMES_HOME:-$HOME/.hermes}/mnemon"
mkdir -p "$state" 2>/dev/null && printf '%s\n' '[mnemon] The previous session ended. Insights not stored with `mnemon remember` are gone from context; `mnemon recall "<topic>"` brings back what was stored.' >"$state/pending-nudge.txt" 2>/dev/null
printf '{}\n'
exit 0
