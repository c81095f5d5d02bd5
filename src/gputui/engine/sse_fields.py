"""The small field readers of engine.sse: error texts, tool-call text, typed numbers, excerpts.

Pure functions on parsed JSON, apart so that the stream reader holds only its dialect rules.
"""

from __future__ import annotations

import orjson

from gputui.jsontypes import JsonObject, JsonValue


def error_message(obj: JsonObject, limit: int = 200) -> str:
    """One line from an OpenAI-style error object (nested `error` or flat `object: error`)."""
    inner = obj.get("error", obj)
    if isinstance(inner, dict):
        message = inner.get("message") or inner.get("msg") or inner.get("detail")
        if message:
            return one_line(str(message), limit)
    elif inner:
        return one_line(str(inner), limit)
    return one_line(orjson.dumps(obj).decode(errors="replace"), limit)


def tool_call_text(calls: JsonValue) -> str | None:
    """A tool-call delta's generated text: its argument fragments, else the function's name.

    A chunk that only names the call is still output (the name is generated), so it is an event.
    """
    if type(calls) is not list:
        return None
    arguments: list[str] = []
    names: list[str] = []
    for call in calls:
        function = call.get("function") if type(call) is dict else None
        if type(function) is dict:
            fragment = function.get("arguments")
            name = function.get("name")
            if type(fragment) is str:
                arguments.append(fragment)
            if type(name) is str:
                names.append(name)
    return "".join(arguments) or "".join(names)


def int_or_none(value: JsonValue) -> int | None:
    return value if type(value) is int else None


def float_or_none(value: JsonValue) -> float | None:
    return float(value) if type(value) is int or type(value) is float else None


def excerpt(data: bytes, limit: int = 120) -> str:
    return one_line(data[:limit].decode("utf-8", errors="replace"))


def one_line(text: str, limit: int = 200) -> str:
    return " ".join(text.split())[:limit]
