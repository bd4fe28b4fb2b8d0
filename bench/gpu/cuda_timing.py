# Timing helpers shared by the GPU benchmark scripts beside this file (run from this folder, or
# with it on PYTHONPATH).
import time

import torch


def timeit(fn, iters=20, warm=3):
    """Best and median seconds of `iters` calls of fn, each between two CUDA events, after `warm`
    calls. One call alone: the host's launch is in the time when the GPU waits for it."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    times.sort()
    return times[0], times[len(times) // 2]


def wall_per_call(fn, n, warm=0):
    """Wall-clock seconds per call of `n` back-to-back calls of fn, from an idle GPU to an idle GPU,
    and the host's part of it: the time the loop of calls took before the final synchronisation
    (equal to the wall time when the GPU waits for the host)."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    issued = time.perf_counter() - t
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n, issued / n
