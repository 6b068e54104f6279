"""Print the engine's timings beside their targets: one full trace at several sizes, and the depth plot's pass.

    python benchmarks/engine.py            # medians, in milliseconds
    python benchmarks/engine.py --profile  # also cProfile a lesson-size and the wide trace, and count page faults

A trace is `forward(...)` with every stage recorded (parameters and embeddings built
beforehand). The depth row is forward + backward (`backward.depth_profile`) through 48
blocks at the decoder lab's default size; the depth plot draws four such curves
(pre/post norm × add/replace), so their sum is printed too. Figures only, no assertions.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import resource
import statistics
import time
from collections.abc import Callable

import numpy as np

from blocktrace.explorables.engine import forward, get_preset, init_params
from blocktrace.explorables.engine.backward import depth_profile

MIN_REPEATS = 20
MIN_SECONDS = 0.5  # keep repeating small cases until this much time has been measured


def time_ms(run: Callable[[], object]) -> tuple[float, float]:
    """(median, best) wall time of one call, in milliseconds, over many repetitions after a warm-up.

    The best time is printed beside the median because a shared machine's load inflates medians.
    """
    for _ in range(3):
        run()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < MIN_REPEATS or time.perf_counter() - start < MIN_SECONDS:
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
        if len(times) >= 20_000:
            break
    return 1e3 * statistics.median(times), 1e3 * min(times)


def preset_trace(name: str, **changes) -> Callable[[], object]:
    """One forward trace of a preset, with its parameters and embeddings prepared beforehand."""
    preset = get_preset(name)
    config = preset.config.with_(**changes) if changes else preset.config
    params, tokens = preset.params(config), list(preset.tokens)
    embed = preset.embed(tokens, config)
    return lambda: forward(config, params, embed, tokens)


def wide_trace(n_layers: int) -> Callable[[], object]:
    """One forward trace at T=128, d=256: the decoder lab's block (SwiGLU 2·d wide, causal) made wide."""
    config = get_preset("decoder-lab").config.with_(d_model=256, d_mlp=512, n_layers=n_layers)
    params = init_params(config)
    embed = np.random.default_rng(0).standard_normal((128, 256))
    return lambda: forward(config, params, embed)


def depth_pass(placement: str = "pre", residual: str = "add") -> Callable[[], object]:
    """Forward + backward through 48 blocks at the decoder lab's default size (T=4, d=8, d_mlp=16)."""
    preset = get_preset("decoder-lab")
    config = preset.config.with_(n_layers=48, placement=placement, residual=residual)
    params, embed = preset.params(config), preset.embed(list(preset.tokens), config)
    return lambda: depth_profile(config, params, embed)


def depth_plot() -> Callable[[], object]:
    """The four curves the depth plot draws: pre/post norm × add/replace, 48 blocks each."""
    runs = [depth_pass(p, r) for p in ("pre", "post") for r in ("add", "replace")]
    return lambda: [run() for run in runs]


CASES: list[tuple[str, Callable[[], Callable[[], object]], float]] = [
    ("trace  T=3,   d=2    eat-an-orange, 1 layer", lambda: preset_trace("eat-an-orange"), 0.2),
    ("trace  T=4,   d=8    decoder-lab, 1 layer", lambda: preset_trace("decoder-lab"), 0.2),
    ("trace  T=128, d=256  1 layer", lambda: wide_trace(1), 5.0),
    ("trace  T=128, d=256  12 layers", lambda: wide_trace(12), float("nan")),
    ("fwd+bwd T=4,  d=8    48 blocks (pre, add)", lambda: depth_pass(), 20.0),
    ("fwd+bwd T=4,  d=8    48 blocks x 4 variants", depth_plot, float("nan")),
]


def profile_trace(title: str, run: Callable[[], object], repeats: int, top: int = 15) -> None:
    """cProfile `repeats` runs and print where the time goes."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(repeats):
        run()
    profiler.disable()
    print(f"\ncProfile, {repeats} {title}, by own time:")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(top)


def kernel_share(run: Callable[[], object], repeats: int = 200) -> None:
    """Page faults and system time per run: fresh memory for the recorded stages is paid for in the kernel."""
    run()
    before, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for _ in range(repeats):
        run()
    after, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - t0
    faults = (after.ru_minflt - before.ru_minflt) / repeats
    system = 1e3 * (after.ru_stime - before.ru_stime) / repeats
    print(f"\nT=128, d=256 trace: {faults:.0f} page faults, {system:.2f} ms system time, "
          f"{1e3 * wall / repeats:.2f} ms wall per trace (mean of {repeats})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="store_true", help="cProfile two traces and count page faults")
    args = parser.parse_args()
    print(f"{'case':<48} {'median ms':>10} {'best ms':>9} {'target ms':>10}")
    over = False
    for label, build, target in CASES:
        ms, best = time_ms(build())
        shown = "-" if np.isnan(target) else f"<= {target:g}"
        flag = "  OVER" if ms > target else ""
        print(f"{label:<48} {ms:>10.3f} {best:>9.3f} {shown:>10}{flag}")
        over = over or (target == 0.2 and ms > target)
    if args.profile or over:
        profile_trace("decoder-lab traces", preset_trace("decoder-lab"), 2000)
    if args.profile:
        profile_trace("T=128, d=256 traces", wide_trace(1), 200)
        kernel_share(wide_trace(1))


if __name__ == "__main__":
    main()
