# Stop: ask the agent once per turn whether anything is worth remembering. The host marks the
# continuation it caused (stop_hook_active / loop_count), and then we stay silent: no loops.
payload=$(mnemon_payload)
case "$payload" in
*'"stop_hook_active":true'* | *'"stop_hook_active": true'*) exit 0 ;;
esac
if [ "$MNEMON_OUTPUT" = cursor ]; then
    case "$payload" in
    *'"loop_count":0'* | *'"loop_count": 0'* | '') ;;
    *) exit 0 ;;
    esac
    case "$payload" in
    *'"status":"completed"'* | *'"status": "completed"'* | '') ;;
    *) exit 0 ;;
    esac
fi
# ZCode's own stop hook (and ours for the hosts that share its protocol) stays silent when the last
# answer already evaluated memory; empty or malformed input still asks.
case "$MNEMON_OUTPUT" in
json | kimi | codex)
    if printf '%s' "$payload" | mnemon_helper mentions last_assistant_message; then
        exit 0
    fi
    ;;
esac
reason='[mnemon] Before finishing: did this turn produce a decision, preference, fact or lesson worth keeping across sessions? If so, store it with `mnemon remember "<one self-contained statement>" --cat <category> --imp <1-5>` and review the candidates it returns (link supersedes/causal where they truly apply). Never store secrets. If nothing is worth keeping, just stop without further reply. Include [mnemon] in your evaluation, in any language.'
case "$MNEMON_OUTPUT" in
cursor) printf '%s\n' "$reason" | mnemon_emit_context followup_message ;;
codex)
    # Codex (setup-targets §13, as the Go program's hook): a system message the user sees, and the turn
    # ends ("continue": true); a "decision": "block" would hold the agent for another turn.
    printf '{"continue":true,"systemMessage":'
    printf '%s\n' '[mnemon] Consider whether this turn produced a decision, preference, fact or lesson worth keeping across sessions; if so, store it with `mnemon remember "<one self-contained statement>" --cat <category> --imp <1-5>`. Never store secrets.' | mnemon_json_string
    printf '}\n'
    ;;
kimi)
    # Kimi Code: exit 2 blocks the stop and hands stderr to the model (its documented hook protocol;
    # it reads no "decision" field). stop_hook_active above keeps this to one continuation.
    printf '%s\n' "$reason" >&2
    exit 2
    ;;
*)
    printf '{"decision":"block","reason":'
    printf '%s\n' "$reason" | mnemon_json_string
    printf '}\n'
    ;;
esac
exit 0
