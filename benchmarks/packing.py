"""The packing factor: how much faster a device gets through runs when the run pool packs ``k`` of
them on it than when it trains them one at a time.

The pool packs runs as processes, each pinned to its device with its own share of the CPU cores
(``flkit.reproduce.pool_slots``). This measures the same thing: ``k`` worker processes, started
once, each build one probe run of a notebook (``paper_cost.RoundProbe``: its data tiled to the
official size, partition, model, method) and train a warm-up round; then, in turn, one worker
alone trains ``n`` rounds (A), and all ``k`` train ``n`` rounds each at the same moment (B), A B A B
A B. The factor is the rounds per second of B over those of A, from the fastest of each:

    factor = k * min(A seconds) / min(B seconds)

so 1 means packing gains nothing, and ``k`` that the runs share the device for free. Each
notebook is measured on its costliest kind of run that the pool may pack (the most rounds in
all; the runs its notebook times go alone and are not measured), as many notebooks as the
deadline allows, in the order given.

    python benchmarks/packing.py [--device cuda] [--tiny] [--notebooks 00_fl_primer ...]

is what the ``packing`` step of ``benchmarks/gpu_check.py`` runs.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import queue
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _p in (str(ROOT), str(HERE)):  # flkit from this checkout; paper_cost beside this file
    if _p not in sys.path:
        sys.path.insert(0, _p)

#: each timed piece (one worker's n rounds alone) lasts about this long on the device
TARGET_S = 0.5
#: A B pairs per notebook (standard for our timings: at least three, interleaved)
PAIRS = 3
#: seconds a worker may take to build its probe (data, partition, model) before it is given up
BUILD_TIMEOUT_S = 300.0


def factor(k: int, alone_s: list[float], packed_s: list[float]) -> float:
    """Rounds per second of ``k`` packed workers over one worker's alone, each from its fastest
    timing of the same ``n`` rounds per worker: ``k * min(alone) / min(packed)``."""
    if k < 1 or not alone_s or not packed_s:
        raise ValueError(f"k={k!r}, {len(alone_s)} alone and {len(packed_s)} packed timings")
    return k * min(alone_s) / min(packed_s)


def rounds_for(round_s: float, tiny: bool) -> int:
    """Rounds per timed piece: about :data:`TARGET_S` of one worker's rounds alone (2 in tiny)."""
    if tiny:
        return 2
    return int(min(50, max(3, math.ceil(TARGET_S / max(round_s, 1e-6)))))


def probe_run(notebook: str, preset):
    """The run of ``notebook`` at ``preset`` that the packing is measured on: of the kinds of run
    (``paper_cost.probe_key``) the pool may pack (not ``study.timed``), the one with the most
    rounds in all; its first run. None where the notebook has none (FedAST's simulations are not
    engine runs)."""
    import paper_cost

    from flkit.preset_runs import identity

    if notebook == "03_fedast":
        return None
    alone = paper_cost.notebook_timed(notebook, preset)
    rounds: dict = {}
    first: dict = {}
    for c in paper_cost.notebook_runs(notebook, preset):
        if identity(c) in alone:
            continue
        k = paper_cost.probe_key(c)
        rounds[k] = rounds.get(k, 0) + c.rounds
        first.setdefault(k, c)
    if not rounds:
        return None
    return first[max(rounds, key=lambda k: (rounds[k], -list(rounds).index(k)))]


def per_device(cfg, device: str) -> int:
    """How many runs the pool would put on ``device`` by default: on a GPU as many of ``cfg``'s
    as its free memory holds (at most ``MAX_PER_DEVICE``, as ``flkit reproduce`` chooses); on the
    CPU as many one-thread runs as there are cores (at least 2, so that packing is measured)."""
    import torch

    from flkit.reproduce import pool_slots

    dev = torch.device(device)
    if dev.type != "cuda":
        return max(2, min(pool_slots.cpu_cores(), pool_slots.MAX_PER_DEVICE))
    gpus = pool_slots.probe_gpus()
    index = dev.index if dev.index is not None else 0
    need = pool_slots.run_bytes(cfg.to_dict())
    return pool_slots.check_fit(None, need, gpus, [index])


def _worker(rank: int, device: str, threads: int, tiny: bool, inbox, outbox) -> None:
    """One packed run's process: builds a probe on command and trains its rounds at a set
    time, reporting each piece's wall-clock start and end (``time.time``, one clock for all)."""
    import torch

    torch.set_num_threads(threads)
    import paper_cost

    cache: dict = {}
    probe = None
    while True:
        cmd = inbox.get()
        try:
            if cmd[0] == "stop":
                return
            if cmd[0] == "build":
                probe = None
                cache.clear()  # one dataset at a time: K copies of the tiled data share the GPU
                if torch.device(device).type == "cuda":
                    torch.cuda.empty_cache()
                probe = paper_cost.RoundProbe(cmd[1], device, tiny, cache)
                probe.rounds(1)  # warm-up: kernels, allocator, recorded graphs
                outbox.put(("ready", rank, probe.rounds(1)))
            elif cmd[0] == "run":
                n, start_at = cmd[1], cmd[2]
                time.sleep(max(0.0, start_at - time.time()))
                t0 = time.time()
                probe.rounds(n)
                outbox.put(("ran", rank, t0, time.time()))
        except BaseException as e:  # noqa: BLE001 - the parent reports it and stops the others
            outbox.put(("error", rank, f"{type(e).__name__}: {e}"))


class _Crew:
    """``k`` worker processes and the commands that time them."""

    def __init__(self, k: int, device: str, threads: int, tiny: bool):
        ctx = multiprocessing.get_context("spawn")  # CUDA cannot be used in a forked child
        self.k, self.threads = k, threads
        self.outbox = ctx.Queue()
        self.inboxes = [ctx.Queue() for _ in range(k)]
        self.procs = [
            ctx.Process(
                target=_worker, args=(i, device, threads, tiny, self.inboxes[i], self.outbox)
            )
            for i in range(k)
        ]
        for p in self.procs:
            p.daemon = True
            p.start()

    def _collect(self, kind: str, ranks, timeout: float) -> dict:
        """Each of ``ranks``' next message, which must be ``kind``; an error, a worker that died
        (killed for memory, say) or ``timeout`` seconds raise, naming the worker."""
        got = {}
        end = time.time() + timeout
        while len(got) < len(ranks):
            left = end - time.time()
            if left <= 0:
                raise TimeoutError(
                    f"worker(s) {sorted(set(ranks) - set(got))} sent no {kind!r} within "
                    f"{timeout:.0f} s"
                )
            try:
                msg = self.outbox.get(timeout=min(left, 1.0))
            except queue.Empty:
                dead = [r for r in ranks if r not in got and not self.procs[r].is_alive()]
                if dead:
                    codes = ", ".join(f"{r}: {self.procs[r].exitcode}" for r in dead)
                    why = f"worker(s) ended without a word (exit codes {codes})"
                    raise RuntimeError(why) from None
                continue
            if msg[0] == "error":
                raise RuntimeError(f"worker {msg[1]}: {msg[2]}")
            got[msg[1]] = msg[2:]
        return got

    def build(self, cfg, timeout: float) -> float:
        """Every worker builds ``cfg``; the seconds of one round (worker 0's, after warm-up)."""
        for q in self.inboxes:
            q.put(("build", cfg))
        return self._collect("ready", range(self.k), timeout)[0][0]

    def run(self, ranks, n: int, timeout: float) -> float:
        """Workers ``ranks`` train ``n`` rounds each from one moment: seconds from the first
        start to the last end."""
        start_at = time.time() + 0.2
        for r in ranks:
            self.inboxes[r].put(("run", n, start_at))
        got = self._collect("ran", list(ranks), timeout)
        return max(t1 for _, t1 in got.values()) - min(t0 for t0, _ in got.values())

    def close(self) -> None:
        for q in self.inboxes:
            q.put(("stop",))
        for p in self.procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()


def measure(device: str, tiny: bool, deadline: float, notebooks, out: dict | None = None) -> dict:
    """The packing factor of each of ``notebooks`` (its `paper` preset; `smoke` with ``tiny``)
    on ``device``, into ``out["notebooks"][name]``: the run measured, ``k``, ``rounds`` per
    piece, the ``alone_s`` and ``packed_s`` timings and the ``factor``; or its ``error``. ``k``
    is the pool's default for the run (:func:`per_device`), each worker with the pool's share of
    the cores on a GPU (one thread on the CPU); the workers are kept from one notebook to the
    next while ``k`` stays. A notebook left when ``deadline`` nears is recorded as not
    measured."""
    import torch

    from flkit.reproduce.pool_slots import Slots, cpu_cores, threads_per_gpu_worker
    from flkit.workbook import presets

    out = {"notebooks": {}} if out is None else out
    preset_name = "smoke" if tiny else "paper"
    crew = None
    try:
        for nb in notebooks:
            info = out["notebooks"][nb] = {}
            try:
                cfg = probe_run(nb, presets.load(nb, preset_name))
            except Exception as e:  # noqa: BLE001 - reported; the other notebooks still run
                info["error"] = f"{type(e).__name__}: {e}"
                continue
            if cfg is None:
                info["error"] = "no engine run the pool packs (not measured)"
                continue
            info.update(method=cfg.method, model=cfg.model, dataset=cfg.dataset)
            info["clients_per_round"] = cfg.clients_per_round
            if time.time() > deadline - 20:
                info["error"] = "out of the step's time: not measured"
                continue
            try:
                k = per_device(cfg, device)
                if crew is not None and crew.k != k:
                    crew.close()
                    crew = None
                if crew is None:
                    cores = cpu_cores()
                    gpu = torch.device(device).type == "cuda"
                    threads = threads_per_gpu_worker(Slots(cores, [0], k), cores) if gpu else 1
                    crew = _Crew(k, device, threads, tiny)
                info["threads"] = crew.threads
                round_s = crew.build(cfg, min(BUILD_TIMEOUT_S, max(1.0, deadline - time.time())))
                n = rounds_for(round_s, tiny)
                info.update(k=k, round_s=round_s, rounds=n, alone_s=[], packed_s=[])
                for _ in range(1 if tiny else PAIRS):
                    if info["alone_s"] and time.time() > deadline - 10:
                        break
                    left = max(1.0, deadline - time.time())
                    info["alone_s"].append(crew.run([0], n, left))
                    info["packed_s"].append(crew.run(range(k), n, left))
                info["factor"] = factor(k, info["alone_s"], info["packed_s"])
            except Exception as e:  # noqa: BLE001 - a failed crew is not reused
                info["error"] = f"{type(e).__name__}: {e}"[:600]
                if crew is not None:
                    crew.close()
                    crew = None
    finally:
        if crew is not None:
            crew.close()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="the smoke presets, 2 rounds a piece")
    ap.add_argument("--notebooks", nargs="*", default=None)
    ap.add_argument("--budget-s", type=float, default=120.0)
    a = ap.parse_args(argv)
    import paper_cost

    names = a.notebooks or list(paper_cost.paper_notebooks())
    res = measure(a.device, a.tiny, time.time() + a.budget_s, names)
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
