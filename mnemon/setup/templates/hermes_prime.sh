# on_session_start is observational in Hermes: the status line and the guide wait in a state file
# that the next pre_llm_call (remind.sh) injects and deletes. Prints {} (the host reads JSON).
mnemon_payload >/dev/null
state="${HERMES_HOME:-$HOME/.hermes}/mnemon"
if text=$(mnemon_status_text); then
    mkdir -p "$state" 2>/dev/null && printf '%s\n' "$text" >"$state/prime-context.txt" 2>/dev/null
fi
printf '{}\n'
exit 0
