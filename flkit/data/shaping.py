"""Array shaping behind flkit.data.load: stratified subsets, HAR's per-subject split, Shakespeare
windows."""

from __future__ import annotations

import warnings

import numpy as np

from ..utils import FlkitError, check_range, numpy_rng


def stratified_subset(labels: np.ndarray, n: int, seed: int, *keys) -> np.ndarray:
    """`n` indices (sorted) keeping each class's share (largest remainder), seeded."""
    labels = np.asarray(labels)
    check_range("subset size", n, 1, len(labels))
    classes, counts = np.unique(labels, return_counts=True)
    quota = counts * n / len(labels)
    take = np.floor(quota).astype(np.int64)
    rest = n - take.sum()
    take[np.argsort(-(quota - take), kind="stable")[:rest]] += 1
    rng = numpy_rng(seed, "subset", *keys)
    picks = [
        rng.choice(np.flatnonzero(labels == c), k, replace=False) for c, k in zip(classes, take)
    ]
    return np.sort(np.concatenate(picks))


def subsets(name, arr, kwargs, seed, meta):
    for split in ("train", "test"):
        n = kwargs.get(f"{split}_subset")
        if n is None:
            continue
        total = len(arr[f"y_{split}"])
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
            raise FlkitError(f"{split}_subset={n!r} must be an int in [1, inf)")
        check_range(f"{split}_subset", int(n), 1, None)
        if n >= total:  # not clamped silently: warn and record
            msg = (
                f"{split}_subset={n} but {name} has only {total} {split} samples here; "
                "using all of them"
            )
            warnings.warn(msg, stacklevel=3)
            meta.setdefault("subset", {})[split] = msg
            continue
        idx = stratified_subset(arr[f"y_{split}"], int(n), seed, name, split)
        arr = dict(arr)
        for k in list(arr):
            if k.endswith("_" + split):
                arr[k] = arr[k][idx]
        meta.setdefault("subset", {})[split] = f"{n} of {total}, class-stratified, seed {seed}"
    return arr


def har_per_subject(arr, seed, test_frac=0.25) -> dict:
    """HideNseek's split: pool official train+test, split each subject 75/25 stratified by label."""
    pooled = {k: np.concatenate([arr[k + "_train"], arr[k + "_test"]]) for k in ("x", "y", "g")}
    rng = numpy_rng(seed, "har-split")
    test = np.zeros(len(pooled["y"]), dtype=bool)
    for s in np.unique(pooled["g"]):
        for c in np.unique(pooled["y"]):
            idx = np.flatnonzero((pooled["g"] == s) & (pooled["y"] == c))
            k = int(round(test_frac * len(idx)))
            test[rng.permutation(idx)[:k]] = True
    return {
        f"{k}_{sp}": pooled[k][m]
        for k in ("x", "y", "g")
        for sp, m in (("train", ~test), ("test", test))
    }


def shakespeare_arrays(raw) -> dict:
    vocab = str(raw["vocab"])
    lut = np.full(256, -1, dtype=np.int64)
    for i, ch in enumerate(vocab):
        lut[ord(ch)] = i
    text = raw["text"]
    codes = lut[text]
    if (codes < 0).any():
        bad = sorted({chr(c) for c in text[codes < 0]})
        raise FlkitError(
            f"shakespeare text holds characters outside the 80-symbol vocabulary: {bad}"
        )
    codes = codes.astype(np.uint8)
    windows = np.lib.stride_tricks.sliding_window_view(codes, 81)
    off, ns, ntr, ts = (
        np.asarray(raw[k], dtype=np.int64)
        for k in ("text_offsets", "num_samples", "num_train", "test_start")
    )
    out = {}
    for split, lo, hi in (("train", np.zeros_like(ntr), ntr), ("test", ts, ns)):
        cnt = np.maximum(hi - lo, 0)
        role = np.repeat(np.arange(len(cnt)), cnt)
        pos = off[role] + lo[role] + (np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt))
        w = windows[pos]
        out[f"x_{split}"], out[f"y_{split}"], out[f"g_{split}"] = (
            w[:, :80],
            w[:, 80].astype(np.int64),
            role,
        )
    return out
