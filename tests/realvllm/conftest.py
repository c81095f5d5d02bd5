"""The realvllm group: gputui against a real vLLM (the CPU build), one server for the group.

The server starts once (20-50 s; longer on a busy machine) and every test of this folder shares
it; it stops when the folder's last test ends (package scope), so it never idles beside the rest
of the suite. Put every realvllm test in this folder. A test that needs a cold prefix cache calls
`vllm.reset_prefix_cache()` first, and one that compares vLLM's own counters takes
`vllm.counters()` before and after its run (`vllm.buckets(name)` gives a histogram's bounds). It
runs with vLLM's defaults (no `--enable-prompt-tokens-details`: chat usage carries no
`cached_tokens`).

Skips with the reason (and how to set it up) when scripts/setup_vllm.sh has not run here, unless
`GPUTUI_REQUIRE` names `realvllm` (set by .ci/run after a successful setup), where that fails.
Run the group alone: another busy process on a 2-core machine makes vLLM's timings meaningless.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.vllm_server import VllmServer, find_vllm, vllm_server


@pytest.fixture(scope="package")
def vllm() -> Iterator[VllmServer]:
    """vLLM serving the tiny head_dim-32 model as `tiny`, max_model_len 2048, on 127.0.0.1."""
    found = find_vllm()
    if isinstance(found, str):
        pytest.skip(found)
    python, model = found
    with vllm_server(python, model) as server:
        print(f"\nvLLM ready in {server.started_s:.1f} s at {server.url}")
        yield server
