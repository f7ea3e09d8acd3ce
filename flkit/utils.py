"""Small shared conventions: devices, seeds, and error messages for bad input."""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
from collections.abc import Iterable

import numpy as np
import torch


class FlkitError(ValueError):
    """Raised for bad input. The message names the bad value and what is accepted."""


def check_choice(field: str, value, choices: Iterable) -> None:
    choices = list(choices)
    if value not in choices:
        raise FlkitError(f"unknown {field} {value!r}; accepted: {', '.join(map(str, choices))}")


def check_range(field: str, value, low=None, high=None, low_open=False, high_open=False) -> None:
    """Raise FlkitError unless low (<|<=) value (<|<=) high. Nothing is ever clamped."""
    ok = True
    if low is not None:
        ok &= value > low if low_open else value >= low
    if high is not None:
        ok &= value < high if high_open else value <= high
    if not ok:
        lo = "" if low is None else ("(" if low_open else "[") + str(low)
        hi = "" if high is None else str(high) + (")" if high_open else "]")
        interval = f"{lo or '(-inf'}, {hi or 'inf)'}"
        raise FlkitError(f"{field}={value!r} is outside the accepted range {interval}")


def check_int(field: str, value, low=None, high=None) -> None:
    """Raise FlkitError unless value is an integer (Python or NumPy; bool excluded) with
    low <= value <= high (either bound optional). Nothing is ever rounded."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        lo = "(-inf" if low is None else f"[{low}"
        hi = "inf)" if high is None else f"{high}]"
        raise FlkitError(f"{field}={value!r} must be an integer in {lo}, {hi}")
    check_range(field, int(value), low, high)


def check_real(field: str, value, low=None, high=None, low_open=False, high_open=False) -> float:
    """``value`` as a float, or FlkitError unless it is a finite real number (Python or NumPy;
    bool excluded) with low (<|<=) value (<|<=) high (either bound optional). Nothing is ever
    clamped."""
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if ok:
        ok = bool(np.isfinite(value))
    if ok:
        ok = (low is None or (value > low if low_open else value >= low)) and (
            high is None or (value < high if high_open else value <= high)
        )
    if not ok:
        lo = "(-inf" if low is None else ("(" if low_open else "[") + str(low)
        hi = "inf)" if high is None else str(high) + (")" if high_open else "]")
        raise FlkitError(f"{field}={value!r}; accepted: a finite real number in {lo}, {hi}")
    return float(value)


def configure_threads(threads: int | str | None = None) -> int:
    """Set torch's CPU threads from `threads` or $FLKIT_THREADS (unset: torch's default, one per
    core).

    Small FL models gain little from intra-op threads, and several processes each using every core
    (parallel notebooks, a busy laptop) slow each other down many times over: give each process a
    share of the cores instead."""
    value = threads if threads is not None else os.environ.get("FLKIT_THREADS")
    if value in (None, ""):
        return torch.get_num_threads()
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = 0
    if n < 1:
        raise FlkitError(f"FLKIT_THREADS={value!r} is not accepted; give a whole number >= 1")
    torch.set_num_threads(n)
    return n


def cores_per_job(jobs: int) -> int:
    """CPU cores each of ``jobs`` processes sharing this machine gets (at least 1)."""
    return max(1, (os.cpu_count() or 1) // jobs)


def resolve_device(device: str | torch.device | None = "auto") -> torch.device:
    """'auto' (or None) picks CUDA when present, else CPU; anything else is taken as given.

    The environment variable FLKIT_DEVICE overrides 'auto' (handy for batch runs)."""
    source = "device"
    if device is None or device == "auto":
        device = os.environ.get("FLKIT_DEVICE", "auto")
        source = "FLKIT_DEVICE"
        if device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        if not isinstance(device, (str, torch.device)):
            raise TypeError(type(device).__name__)
        dev = torch.device(device)
        if dev.type not in ("cpu", "cuda", "mps"):
            raise ValueError(dev.type)
    except (RuntimeError, TypeError, ValueError):
        raise FlkitError(
            f"unknown {source} {str(device)!r}; accepted: 'auto', 'cpu', 'cuda', 'cuda:N', 'mps'"
        ) from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise FlkitError(
            f"device={str(device)!r} was asked for but CUDA is not available; "
            "accepted here: 'auto', 'cpu'"
        )
    return dev


def derive_seed(seed: int, *keys) -> int:
    """An independent 63-bit seed for a named stream (e.g. ('partition',), ('batches', round)).

    Streams derived from one run seed never overlap, so changing how many clients are sampled
    does not shift the batch order of another part of the run."""
    text = repr((int(seed),) + tuple(keys)).encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "little") >> 1


def generator(seed: int, *keys, device="cpu") -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(derive_seed(seed, *keys))
    return g


def numpy_rng(seed: int, *keys) -> np.random.Generator:
    return np.random.default_rng(derive_seed(seed, *keys))


def seed_everything(seed: int) -> None:
    """Seed the global RNGs (model initialisation uses torch's global RNG)."""
    random.seed(derive_seed(seed, "python"))
    np.random.seed(derive_seed(seed, "numpy") % 2**32)
    torch.manual_seed(derive_seed(seed, "torch"))


def run_command(parser, argv=None) -> int:
    """Parse ``argv`` with an argparse ``parser`` whose sub-commands set ``func(args) -> int``, run
    it, and turn a FlkitError into a one-line message and exit status 2 (no traceback for bad
    input). No sub-command: print the help, status 2."""
    import sys

    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except FlkitError as e:
        print(f"{parser.prog}: error: {e}", file=sys.stderr)
        return 2


def add_quiet_argument(parser, help: str) -> None:
    """The one quiet flag of every command line: --quiet, -q, and --no-progress as an alias."""
    parser.add_argument(
        "--quiet", "-q", "--no-progress", dest="quiet", action="store_true", help=help
    )


@contextlib.contextmanager
def environment(**values):
    """Set environment variables (child processes, e.g. kernels, inherit them), then restore
    them as they were."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update({k: str(v) for k, v in values.items()})
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
