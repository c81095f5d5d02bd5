"""The realserver group: gputui against llama.cpp's llama-server, started once per module.

Skips with the reason (and how to build the server) when the binary or the model is absent, unless
`GPUTUI_REQUIRE_REALSERVER=1` (set by .ci/run after a successful build), where absence fails.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.support.llama_server import LlamaServer, find_llama_server, llama_server

PARALLEL = 8


@pytest.fixture(scope="module")
def llama() -> Iterator[LlamaServer]:
    """llama-server with the tiny model, 8 parallel slots, one thread, /metrics and /slots."""
    found = find_llama_server()
    if isinstance(found, str):
        if os.environ.get("GPUTUI_REQUIRE_REALSERVER") == "1":
            pytest.fail(found)
        pytest.skip(found)
    binary, model = found
    with llama_server(binary, model, parallel=PARALLEL) as server:
        yield server
