# post_llm_call is observational: unless the answer already dealt with memory, leave a reminder for
# the next pre_llm_call to inject. Prints {}.
state="${HERMES_HOME:-$HOME/.hermes}/mnemon"
if ! mnemon_payload | mnemon_helper mentions extra.response_text extra.response extra.assistant_message; then
    mkdir -p "$state" 2>/dev/null && printf '%s\n' '[mnemon] Consider: did the last exchange produce a decision, preference, fact or lesson worth keeping? If so, store it with `mnemon remember` (never secrets).' >"$state/pending-nudge.txt" 2>/dev/null
fi
printf '{}\n'
exit 0
