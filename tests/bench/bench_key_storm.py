"""The key storm, long: thousands of keys against the real demo fleet, headless.

The suite's storm (``tests/tui/test_key_storm.py``) sends 500 keys; this sends as many as
asked, from any seed, at any size, and prints one JSON object and one summary line.  It
exits 1 if the console fell over (the exception is printed), 0 otherwise.

    python tests/bench/bench_key_storm.py [--keys 5000] [--seed 36] [--size 120x40]
        [--seeds 1,2,3]

``--seeds`` runs one storm per seed, one after the other, each against a fresh console.
Keys are drawn as ``tests/support/key_storm.py`` describes: every screen's bindings, ``:``
commands typed a character at a time, the palette, theme switches and resizes, in bursts
as a slow SSH link delivers them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from probes.config.fleet import demo_fleet
from probes.sources.agents import AgentFleetBackend
from tests.support.key_storm import plan_storm, play
from tui.app import make_app
from tui.console_options import ConsoleOptions

DEMO_JOBS = tuple(str(48200 + i) for i in range(1, 9))
START_S = 30.0
"""How long the demo fleet may take to stream before the storm starts anyway."""


async def storm(seed: int, keys: int, size: tuple[int, int]) -> dict[str, object]:
    """One storm against a fresh console; what it did and whether it fell over."""
    specs = demo_fleet()
    app = make_app(AgentFleetBackend(specs), ConsoleOptions(demo=True))
    plan = plan_storm(seed, keys, [s.name for s in specs], DEMO_JOBS)
    out: dict[str, object] = {"seed": seed, "keys_planned": plan.keys}
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as reports:
        app.reports_dir = Path(reports)
        try:
            async with app.run_test(size=size) as pilot:
                deadline = time.monotonic() + START_S
                while time.monotonic() < deadline and not all(
                        h.last is not None for h in app.fleet.hosts.values()):
                    await pilot.pause(0.1)
                result = await play(pilot, plan)
                out.update(keys=result.keys, steps=result.steps,
                           storm_s=round(result.seconds, 1),
                           keys_per_s=round(result.keys / max(result.seconds, 1e-9), 1),
                           typed_ahead=app.keys_held, screens=result.screens,
                           stopped_at=result.stopped_at)
                if app.is_running:
                    await app.action_quit()
        except Exception as exc:  # the bench reports whatever took the console down
            error = getattr(exc, "error", None) or exc
            out["crash"] = f"{type(error).__name__}: {error}"
            out["traceback"] = "".join(traceback.format_exception(error))[-4000:]
    out["total_s"] = round(time.monotonic() - started, 1)
    return out


def main() -> int:
    """Run the storms asked for; exit 1 if any fell over."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--keys", type=int, default=5000)
    p.add_argument("--seed", type=int, default=36)
    p.add_argument("--seeds", default="", help="comma-separated seeds (overrides --seed)")
    p.add_argument("--size", default="120x40", help="terminal COLSxROWS at the start")
    args = p.parse_args()
    cols, rows = (int(v) for v in args.size.split("x"))
    seeds = [int(s) for s in args.seeds.split(",") if s] or [args.seed]
    runs = [asyncio.run(storm(seed, args.keys, (cols, rows))) for seed in seeds]
    crashed = [r for r in runs if "crash" in r]
    for r in crashed:
        print(r.pop("traceback"), file=sys.stderr)
    print(json.dumps({"python": platform.python_version(), "machine": platform.machine(),
                      "runs": runs}, indent=1))
    keys = sum(int(str(r.get("keys", 0))) for r in runs)
    print(f"key storm: {len(runs)} run(s), {keys} keys, {len(crashed)} crashed"
          + "".join(f"; seed {r['seed']}: {r['crash']}" for r in crashed))
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
