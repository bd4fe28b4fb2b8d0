# Timing helpers shared by the GPU benchmark scripts beside this file (run from this folder, or
# with it on PYTHONPATH).
import json
import subprocess
import time
import traceback

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


def machine_info():
    """What a results file records of the machine: PyTorch and CUDA versions, the GPU, its SM count,
    the UTC date and nvidia-smi's clocks and power limit."""
    info = {"torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(0),
            "sm_count": torch.cuda.get_device_properties(0).multi_processor_count,
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    info["nvidia_smi"] = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,power.limit",
         "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    return info


def graph_time(fn, reps, iters=5):
    """GPU seconds per call of back-to-back calls (best and median of `iters` replays): `reps` calls
    captured in a CUDA graph and replayed, so the host's launch cost is not in the time (a training
    step's host runs ahead of its GPU), and how they were timed ("graph"). Falls back to `reps` calls
    between two events ("loop") when the call cannot be captured."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    try:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(reps):
                fn()
        run, how = g.replay, "graph"
    except Exception:
        torch.cuda.synchronize()
        run, how = (lambda: [fn() for _ in range(reps)]), "loop"
    best, med = timeit(run, iters=iters, warm=1)
    return best / reps, med / reps, how


class Results:
    """A results file: machine_info(), the list of results and the errors by section, written to
    `path` by save() (with the seconds since the start)."""

    def __init__(self, path):
        self.t0 = time.time()
        self.path = path
        self.out = machine_info()
        self.res = self.out["results"] = []
        self.errors = self.out["errors"] = {}

    def save(self):
        self.out["elapsed_s"] = time.time() - self.t0
        with open(self.path, "w") as f:
            json.dump(self.out, f, indent=1)

    def section(self, name, fn):
        """Runs fn(), keeping its traceback under errors[name] if it raises, prints the time it
        took and saves."""
        t = time.time()
        try:
            fn()
        except Exception:
            self.errors[name] = traceback.format_exc()
            print(self.errors[name], flush=True)
        print(f"[{time.time() - self.t0:6.1f}s] {name}: {time.time() - t:.1f}s, {len(self.res)} results",
              flush=True)
        self.save()
