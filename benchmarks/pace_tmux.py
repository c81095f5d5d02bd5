"""The knee hunt at a hand's pace, in a real pty (issue 28's "Pace" acceptance).

`gputui demo` (the simulated A100 80GB PCIe serving qwen2.5-14b, 512 in / 256 out, SLA P95 TTFT
1 s and P95 TPOT 35 ms, 7/h) runs in a tmux session of its own at 160x48. The script presses `+`
every --every seconds from 1 to --top streams, saves the ramp (`s`), finds the first level that
failed there (its verdict, else its point estimates; --top when none did, or --first-hold), then
goes down with `-` and holds (`h`) that level and the one below it, each until the hold ends by
its own rule ("no step open"), and one level lower while a hold fails (at most --max-holds), and
quits (`q`). It prints the saved session's steps, its capacity and cost, the times of each
phase, and, given the snapshot of a headless `gputui run --concurrency 1,2,...,64
--step-seconds 60` on the same simulator (--headless FILE), whether the capacity is within one
level of that run's (or provisional, with its reason) and the cost within that run's interval.
Every wait is bounded.

    python benchmarks/pace_tmux.py [--headless run60.json] [--every 15] [--top 64]
        [--first-hold 32] [--max-holds 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from gputui.metrics.cost import cost_per_million_output_tokens, cost_per_million_output_tokens_ci
from gputui.metrics.sla import Sla, step_meets_sla
from gputui.metrics.verdict import judge_step
from gputui.snapshot.models import Snapshot
from gputui.snapshot.store import load_snapshot

GPUTUI = Path(sys.executable).with_name("gputui")
PRICE = 7.0
SLA = Sla(ttft_p95_s=1.0, tpot_p95_s=0.035)
T0 = time.perf_counter()


def say(text: str) -> None:
    """A timestamped progress line (seconds since the script started)."""
    print(f"[{time.perf_counter() - T0:6.1f} s] {text}", flush=True)


class Pane:
    """One tmux session of our own: keys in, the screen out (never anyone else's session)."""

    def __init__(self, command: list[str]) -> None:
        self.name = f"gputui-pace-{uuid.uuid4().hex[:8]}"
        line = shlex.join(command) + "; echo GPUTUI-EXIT=$?; sleep 600"
        self.tmux("new-session", "-d", "-s", self.name, "-x", "160", "-y", "48", line)

    def tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=10)
        return done.stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.name)

    def header(self) -> str:
        return "\n".join(self.screen().splitlines()[:4])

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", self.name, *keys)

    def wait(self, check: Callable[[str], bool], timeout_s: float, what: str) -> str:
        deadline = time.monotonic() + timeout_s
        while True:
            screen = self.screen()
            if check(screen):
                return screen
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out after {timeout_s:.0f} s waiting for {what}:\n{screen}")
            time.sleep(0.2)

    def kill(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True, timeout=10)


def level_shown(level: int) -> Callable[[str], bool]:
    return lambda s: f"● {level} concurrent" in s


def first_failure(snapshot: Snapshot) -> int | None:
    """The lowest level whose step failed: decisively, else on its point estimates."""
    failed = [
        int(s.level)
        for s in snapshot.steps
        if s.requests_ok + s.requests_failed > 0
        and (judge_step(s, SLA).verdict == "fail" or not step_meets_sla(s, SLA))
    ]
    return min(failed) if failed else None


def save(pane: Pane, folder: Path) -> Snapshot:
    """`s`, then Enter on the dialog's default label; the snapshot it wrote."""
    before = set(folder.glob("*.json"))
    pane.keys("s")
    pane.wait(lambda s: "Save a snapshot" in s, 20, "the save dialog")
    time.sleep(1.0)  # the dialog's input takes the focus just after it is first drawn
    pane.keys("Enter")
    deadline = time.monotonic() + 60
    while not set(folder.glob("*.json")) - before:
        if time.monotonic() > deadline:
            raise SystemExit(f"no snapshot saved within 60 s:\n{pane.screen()}")
        time.sleep(0.2)
    time.sleep(0.5)  # written whole (the store writes a temporary file, then renames it)
    return load_snapshot(next(iter(set(folder.glob("*.json")) - before)))


def go_to(pane: Pane, level: int, now: int) -> None:
    """`-` (or `+`) until the header shows `level`, then wait out its hand-over."""
    key = "-" if level < now else "+"
    while now != level:
        pane.keys(key)
        now = now // 2 if key == "-" else now * 2
        time.sleep(0.3)
    pane.wait(level_shown(level), 20, f"level {level}")
    pane.wait(lambda s: "closing" not in s.splitlines()[0], 90, f"the hand-over to {level}")


def hold(pane: Pane, level: int, limit_s: float) -> tuple[float, str]:
    """`h`, then wait until the hold ends by its rule; its wall time and its saved verdict."""
    started = time.perf_counter()
    pane.keys("h")
    pane.wait(lambda s: "HOLD" in s.splitlines()[0], 20, f"the hold at {level}")
    say(f"holding {level}")
    screen = pane.wait(
        lambda s: "no step open" in s.splitlines()[0], limit_s, f"the hold at {level} to end"
    )
    took = time.perf_counter() - started
    ended = re.findall(r"hold ended after \d+ s: step \d+ (pass|fail|inconclusive)", screen)
    verdict = ended[-1] if ended else "?"
    say(f"hold at {level} ended after {took:.0f} s: {verdict}")
    return took, verdict


def cost_of(snapshot: Snapshot) -> tuple[float | None, tuple[float | None, float | None] | None]:
    cap = snapshot.capacity
    if cap is None or cap.output_tokens_per_s <= 0:
        return None, None
    ci = cap.output_tokens_per_s_ci
    pair = None if ci is None else (ci[0], ci[1])
    return (
        cost_per_million_output_tokens(PRICE, cap.output_tokens_per_s),
        cost_per_million_output_tokens_ci(PRICE, pair),
    )


def steps_table(snapshot: Snapshot) -> list[str]:
    lines = [
        f"{'#':>2} {'level':>5} {'ok':>5} {'fail':>4} {'dur s':>6} {'P95 TTFT s':>10}"
        f" {'P95 TPOT ms':>11} {'good tok/s':>10} {'verdict':>12}  basis"
    ]
    for s in snapshot.steps:
        tpot = s.tpot_s.p95
        basis = (s.model_extra or {}).get("verdict_basis") or ""
        lines.append(
            f"{s.index:2d} {s.level:5g} {s.requests_ok:5d} {s.requests_failed:4d}"
            f" {s.duration_s:6.1f} {s.ttft_s.p95 or 0:10.3f} {(tpot or 0) * 1e3:11.1f}"
            f" {s.goodput_output_tokens_per_s:10.1f} {s.sla_verdict or '-':>12}  {basis}"
        )
    return lines


def summary(name: str, snapshot: Snapshot) -> list[str]:
    cap = snapshot.capacity
    if cap is None:
        return [f"{name}: capacity none ({snapshot.capacity_reason})"]
    cost, ci = cost_of(snapshot)
    ci_text = "-" if ci is None else f"[{ci[0] or 0:.2f}, {ci[1] or float('inf'):.2f}]"
    mark = f" provisional ({cap.provisional_reason})" if cap.provisional else ""
    lines = [
        f"{name}: capacity {cap.level:g}{mark}, {cap.output_tokens_per_s:.0f} good tok/s,"
        f" cost {cost or float('nan'):.2f}/M out tok {ci_text}"
    ]
    lines += [f"  caveat: {c}" for c in cap.caveats]
    return lines


def compare(tui: Snapshot, headless: Snapshot) -> list[str]:
    """The acceptance: capacity within one level (x2) or provisional; cost in the interval."""
    a, b = tui.capacity, headless.capacity
    if a is None or b is None:
        return [f"capacity: tui {a and a.level}, headless {b and b.level}: cannot compare"]
    ratio = max(a.level, b.level) / min(a.level, b.level)
    level_ok = ratio <= 2 or a.provisional
    cost, _ = cost_of(tui)
    _, ci = cost_of(headless)
    cost_ok = (
        cost is not None
        and ci is not None
        and (ci[0] is None or cost >= ci[0])
        and (ci[1] is None or cost <= ci[1])
    )
    marked = ", provisional" if a.provisional else ""
    return [
        f"capacity: tui {a.level:g} vs headless {b.level:g}:"
        f" {'ok' if level_ok else 'OFF'} (within one level{marked})",
        f"cost: tui {cost or float('nan'):.2f} in headless interval: {'ok' if cost_ok else 'OFF'}",
    ]


def demo_command(folder: Path) -> list[str]:
    return [
        *(str(GPUTUI), "demo", "--gpu", "a100-80gb-pcie", "--model", "qwen2.5-14b"),
        *("--input-tokens", "512", "--output-tokens", "256"),
        *("--sla-ttft-p95", "1s", "--sla-tpot-p95", "35ms", "--price-per-hour", str(PRICE)),
        *("--snapshot-dir", str(folder)),
    ]


def run(
    folder: Path,
    every: float,
    top: int,
    hold_limit_s: float,
    max_holds: int,
    first_hold: int | None,
) -> tuple[Snapshot, dict[str, float]]:
    pane = Pane(demo_command(folder))
    times: dict[str, float] = {}
    try:
        pane.wait(lambda s: "step 1" in s and "in flight" in s, 90, "the first step")
        say("step 1 open at 1 stream")
        ramp_start = time.perf_counter()
        level = 1
        while level < top:
            time.sleep(every)
            pane.keys("+")
            level *= 2
            say(f"+ -> {level}")
        time.sleep(every)
        times["ramp"] = time.perf_counter() - ramp_start
        ramp = save(pane, folder)
        say(f"ramp saved: levels {[int(s.level) for s in ramp.steps]}")
        failing = first_hold or first_failure(ramp) or top
        times["first_failure"] = failing
        # h at the first failure and the level below it; while a hold fails, one level lower.
        target, verdict = failing, "fail"
        while verdict == "fail" and target >= 1 and len(times) - 2 < max_holds:
            go_to(pane, target, level)
            level = target
            times[f"hold {target}"], verdict = hold(pane, target, hold_limit_s)
            if target == failing:
                verdict = "fail"  # the level below the first failure is held in any case
            target //= 2
        pane.keys("q")
        screen = pane.wait(lambda s: "GPUTUI-EXIT=" in s, 120, "the exit")
        times["total"] = time.perf_counter() - ramp_start
        written = [x for x in screen.splitlines() if "snapshot written to" in x]
        path = written[-1].split("snapshot written to ", 1)[1].strip()
        return load_snapshot(path), times
    finally:
        pane.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--headless", type=Path, help="snapshot of the 60 s headless run")
    parser.add_argument("--every", type=float, default=15.0, help="seconds between `+` presses")
    parser.add_argument("--top", type=int, default=64)
    parser.add_argument("--hold-limit", type=float, default=420.0, help="bound on each hold's wait")
    parser.add_argument("--max-holds", type=int, default=3)
    parser.add_argument(
        "--first-hold", type=int, help="hold here first (a failure seen before), not at the ramp's"
    )
    parser.add_argument("--keep", type=Path, help="save the TUI's snapshots here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        tui, times = run(
            folder, args.every, args.top, args.hold_limit, args.max_holds, args.first_hold
        )
    print("\nTUI session (a100-80gb-pcie sim, qwen2.5-14b, 512/256, SLA 1 s / 35 ms, 7/h)")
    print("\n".join(steps_table(tui)))
    empty = sum(1 for s in tui.steps if s.requests_ok + s.requests_failed == 0)
    print(f"0/0 rows: {empty}")
    print("\n".join(summary("tui", tui)))
    print("times: " + ", ".join(f"{k} {v:.0f}{'' if k == 'first_failure' else ' s'}"
                                for k, v in times.items()))  # fmt: skip
    if args.headless is not None:
        headless = load_snapshot(args.headless)
        print("\nheadless run")
        print("\n".join(steps_table(headless)))
        print("\n".join(summary("headless", headless)))
        print("\n".join(compare(tui, headless)))


if __name__ == "__main__":
    main()
