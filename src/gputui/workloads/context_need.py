"""The longest request a workload will send, for the pre-flight check against the server's context.

Contract: `longest_request(workload, source)` reads the configured lengths only (no server): a
length distribution counts with its maximum, a trace with its longest entry, a conversation with
its last turn (every turn's input and answer). A dataset's prompt lengths are known once counted:
`longest_prepared(spec, source)` gives them after `prepare_workload`, still before any load.
Both return None when nothing is known (the check is then skipped).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gputui.engine.context_limit import ContextNeed

if TYPE_CHECKING:
    from gputui.workloads.config import WorkloadConfig
    from gputui.workloads.source import PreparedWorkload
    from gputui.workloads.sources import SourcePlan


def _turns(source: SourcePlan | None) -> int:
    return source.turns if source is not None and source.conversations else 1


def longest_request(workload: WorkloadConfig, source: SourcePlan | None) -> ContextNeed | None:
    """The longest request by configuration (module contract)."""
    if source is not None and source.trace is not None and source.trace.entries:
        entry = max(source.trace.entries, key=lambda e: e.input_tokens + e.output_tokens)
        return ContextNeed(
            entry.input_tokens,
            entry.output_tokens,
            what=f"the longest entry of {source.trace.path}",
        )
    if workload.input is None or workload.output is None:
        return None
    longest_in, longest_out = workload.input.bounds()[1], workload.output.bounds()[1]
    return ContextNeed(
        longest_in,
        longest_out,
        turns=_turns(source),
        what=f"input {workload.input.describe()}, output {workload.output.describe()}",
    )


def longest_prepared(spec: PreparedWorkload, source: SourcePlan | None) -> ContextNeed | None:
    """The longest request of a dataset workload, its prompts counted (module contract)."""
    if spec.input is not None or not spec.entries:
        return None
    base = spec.plan.base_tokens
    if spec.output is not None:
        longest_out = spec.output.bounds()[1]
        longest_in = base + max(t for _, t, _ in spec.entries)
    else:
        _, tokens, longest_out = max(spec.entries, key=lambda e: e[1] + e[2])
        longest_in = base + tokens
    return ContextNeed(longest_in, longest_out, turns=_turns(source), what="the dataset's longest")
