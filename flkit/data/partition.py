"""Split a training set over clients: ``partition(scheme, labels, num_clients, seed, **kw)``.

Every scheme returns one LongTensor of sample indices per client (on the labels' device) and is
deterministic: the same arguments and seed give identical indices. Randomness comes from the named
stream ``numpy_rng(seed, "partition", scheme)``.

Schemes
-------
iid                   shuffle, then deal into num_clients nearly equal parts (sizes differ by <= 1).
dirichlet(alpha, samples_per_client=None, min_samples=0, rounding="round", cap=False)
    samples_per_client=None: label-Dirichlet (Hsu et al. 2019 / Yurochkin et al. 2019): for every
      class, proportions over the clients ~ Dir(alpha * 1_N); the class's shuffled samples are cut
      at those proportions. Disjoint, covers every sample. min_samples > 0 redraws (same stream)
      until every client has at least that many samples (HideNseek: 20, FedDIP code: 100).
      cap=True is the balanced variant of the FedGen (Zhu et al. 2021) and NIID-Bench (Li et al.
      2022) generators: classes are dealt in order and a client that already holds
      >= len(labels) / num_clients samples gets a zero share of every later class (the others'
      proportions renormalised). It keeps the label skew but evens out sizes, so a draw meets
      min_samples more often with many clients at small alpha (still redrawn until it does).
    samples_per_client=n: the fixed-size variant of the FedAST and staleness papers: each client
      draws p ~ Dir(alpha * 1_C) and takes round(p_c * n) samples of class c ("floor" with
      rounding="floor", as the staleness paper's code), so sizes can differ from n by a few.
      Samples come in order from per-class pools (label-sorted, original order) and are removed
      when taken; when a pool does not hold more than the request, all used samples of every class
      are returned to the back of their pools (FedAST's `extract`). Samples therefore repeat
      across clients (not disjoint) once the set is used up. Each client's list is shuffled.
shards(shards_per_client=2)
    McMahan et al.'s pathological split (FedAvg, STC): sort by label (stable), cut into
    num_clients * shards_per_client equal shards, give each client shards_per_client random shards
    without replacement. 100 clients x 2 shards on MNIST: 200 shards of 300, 600 per client.
classes_per_client(classes=2)
    FedDIP / PFLlib `create_pat_partition` (balanced): classes in order; each class goes to the
    first ceil(N * classes / C) clients that still have a free class slot and is split almost
    equally among them (the last one takes the remainder). Samples within a class are shuffled.
natural(groups)
    one client per distinct group id (FEMNIST writer, HAR subject, Shakespeare role), in sorted id
    order; with num_clients < number of groups, a seeded random subset of the groups (sorted).
    num_clients=None takes all groups.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from ..utils import FlkitError, check_choice, check_int, check_range, numpy_rng

SCHEMES = ("iid", "dirichlet", "shards", "classes_per_client", "natural")
_KWARGS = {
    "iid": (),
    "dirichlet": ("alpha", "samples_per_client", "min_samples", "rounding", "max_tries", "cap"),
    "shards": ("shards_per_client",),
    "classes_per_client": ("classes",),
    "natural": ("groups",),
}


def _labels_np(labels) -> np.ndarray:
    if isinstance(labels, Tensor):
        labels = labels.detach().cpu().numpy()
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise FlkitError(f"labels must be a 1-D array of class ids; got shape {labels.shape}")
    if labels.size and not np.issubdtype(labels.dtype, np.integer):
        raise FlkitError(f"labels must be integers; got dtype {labels.dtype}")
    return labels.astype(np.int64, copy=False)


def partition(scheme: str, labels, num_clients: int | None, seed: int, **kw) -> list[Tensor]:
    """Indices of each client's samples: a list of ``num_clients`` LongTensors (see module doc)."""
    check_choice("partition scheme", scheme, SCHEMES)
    bad = sorted(set(kw) - set(_KWARGS[scheme]))
    if bad:
        accepted = ", ".join(_KWARGS[scheme]) or "none"
        raise FlkitError(
            f"unknown option(s) {bad} for partition scheme {scheme!r}; accepted: {accepted}"
        )
    device = labels.device if isinstance(labels, Tensor) else torch.device("cpu")
    y = _labels_np(labels)
    n = len(y)
    if n == 0:
        raise FlkitError("labels is empty; need at least one sample to partition")
    if scheme == "natural":
        if num_clients is not None:
            check_int("num_clients", num_clients, 1)
    else:
        check_int("num_clients", num_clients, 1)
        if num_clients > n:
            raise FlkitError(
                f"num_clients={num_clients} is more than the {n} samples; accepted range [1, {n}]"
            )
    rng = numpy_rng(seed, "partition", scheme)
    fn = {
        "iid": _iid,
        "dirichlet": _dirichlet,
        "shards": _shards,
        "classes_per_client": _classes_per_client,
        "natural": _natural,
    }[scheme]
    parts = fn(y, num_clients, rng, **kw)
    return [torch.as_tensor(np.asarray(p, dtype=np.int64)).to(device) for p in parts]


def _iid(y, k, rng):
    return np.array_split(rng.permutation(len(y)), k)


def _dirichlet(
    y,
    k,
    rng,
    alpha=None,
    samples_per_client=None,
    min_samples=0,
    rounding="round",
    max_tries=1000,
    cap=False,
):
    if alpha is None:
        raise FlkitError(
            "dirichlet partition needs alpha "
            "(concentration, > 0; e.g. 0.1 = very skewed, 100 = near iid)"
        )
    if (
        isinstance(alpha, bool)
        or not isinstance(alpha, (int, float, np.floating, np.integer))
        or not math.isfinite(alpha)
    ):
        raise FlkitError(f"alpha={alpha!r} must be a finite number in (0, inf)")
    check_range("alpha", float(alpha), 0, None, low_open=True)
    check_choice("rounding", rounding, ("round", "floor"))
    if not isinstance(cap, (bool, np.bool_)):
        raise FlkitError(f"cap={cap!r} must be a bool; accepted: True or False")
    classes = np.unique(y)
    if samples_per_client is not None:
        if cap:
            raise FlkitError(
                "cap=True applies to the classic split (samples_per_client=None); "
                f"got samples_per_client={samples_per_client!r}; accepted: cap=False with it"
            )
        check_int("samples_per_client", samples_per_client, 1)
        return _dirichlet_fixed(y, k, rng, float(alpha), int(samples_per_client), classes, rounding)
    check_int("min_samples", min_samples, 0, len(y) // k + 1)
    check_int("max_tries", max_tries, 1)
    by_class = [np.flatnonzero(y == c) for c in classes]
    full = len(y) / k
    for _ in range(max_tries):
        parts = [[] for _ in range(k)]
        held = np.zeros(k, dtype=np.int64)
        for idx in by_class:
            idx = rng.permutation(idx)
            p = rng.dirichlet(np.full(k, float(alpha)))
            if cap:
                p = np.where(held < full, p, 0.0)
                # some client is always below the mean while samples remain, but its Dir(alpha)
                # share can underflow to 0: such a draw is discarded like one short of min_samples
                if not p.sum() > 0:
                    break
                p = p / p.sum()
            cuts = (np.cumsum(p)[:-1] * len(idx)).astype(np.int64)
            for i, chunk in enumerate(np.split(idx, cuts)):
                parts[i].append(chunk)
                held[i] += len(chunk)
        else:
            parts = [np.sort(np.concatenate(p)) for p in parts]
            if min(len(p) for p in parts) >= min_samples:
                return parts
    raise FlkitError(
        f"dirichlet: no draw in max_tries={max_tries} gave every client "
        f">= min_samples={min_samples}; "
        "lower min_samples or num_clients, raise alpha, or pass cap=True (balanced sizes)"
    )


def _dirichlet_fixed(y, k, rng, alpha, size, classes, rounding):
    order = np.argsort(y, kind="stable")
    pools = {int(c): list(order[y[order] == c]) for c in classes}
    used = {int(c): [] for c in classes}
    out = []
    for _ in range(k):
        p = rng.dirichlet(np.full(len(classes), alpha)) * size
        counts = (np.round(p) if rounding == "round" else np.floor(p)).astype(np.int64)
        mine = []
        for c, m in zip(classes, counts):
            c, m = int(c), int(m)
            while m > 0:
                if len(pools[c]) <= m:  # not enough left: return every used sample to its pool
                    for cc in pools:
                        pools[cc].extend(used[cc])
                        used[cc] = []
                if (
                    len(pools[c]) <= m
                ):  # the whole class is smaller than the request: take it all, repeat
                    take = pools[c][:]
                else:
                    take = pools[c][:m]
                del pools[c][: len(take)]
                used[c].extend(take)
                mine.extend(take)
                m -= len(take)
        out.append(rng.permutation(np.asarray(mine, dtype=np.int64)))
    return out


def _shards(y, k, rng, shards_per_client=2):
    check_int("shards_per_client", shards_per_client, 1)
    num_shards = k * shards_per_client
    if len(y) % num_shards:
        raise FlkitError(
            f"shards: {len(y)} samples cannot be cut into num_clients*shards_per_client = "
            f"{k}*{shards_per_client} = {num_shards} equal shards; accepted: a shard count that "
            f"divides {len(y)} (e.g. use a train_subset that is a multiple of {num_shards})"
        )
    shards = np.argsort(y, kind="stable").reshape(num_shards, -1)
    pick = rng.permutation(num_shards).reshape(k, shards_per_client)
    return [np.sort(shards[row].reshape(-1)) for row in pick]


def _classes_per_client(y, k, rng, classes=2):
    labels = np.unique(y)
    c = len(labels)
    check_int("classes", classes, 1, c)
    if k * classes < c:
        raise FlkitError(
            f"classes_per_client: num_clients*classes = {k}*{classes} = {k * classes} "
            f"< {c} classes, "
            f"so some class would have no client; accepted: num_clients >= {math.ceil(c / classes)}"
        )
    slots = [classes] * k
    per_class = math.ceil(k * classes / c)
    parts = [[] for _ in range(k)]
    for lab in labels:
        chosen = [i for i in range(k) if slots[i] > 0][:per_class]
        if not chosen:
            raise FlkitError(
                f"classes_per_client: no free client slot left for class {lab} with "
                f"num_clients={k}, classes={classes}; use more clients or more classes per client"
            )
        idx = rng.permutation(np.flatnonzero(y == lab))
        share = len(idx) // len(chosen)
        cuts = [share * (j + 1) for j in range(len(chosen) - 1)]
        for client, chunk in zip(chosen, np.split(idx, cuts)):
            parts[client].append(chunk)
            slots[client] -= 1
    return [np.sort(np.concatenate(p)) if p else np.zeros(0, np.int64) for p in parts]


def _natural(y, k, rng, groups=None):
    if groups is None:
        raise FlkitError(
            "natural partition needs groups= (one natural client id per sample, "
            "e.g. dataset.train_groups)"
        )
    g = groups.detach().cpu().numpy() if isinstance(groups, Tensor) else np.asarray(groups)
    if g.shape != y.shape:
        raise FlkitError(
            f"groups has shape {g.shape} but labels has shape {y.shape}; "
            "need one group id per sample"
        )
    ids, inverse = np.unique(g, return_inverse=True)
    if k is not None:
        if k > len(ids):
            raise FlkitError(
                f"num_clients={k} is more than the {len(ids)} natural groups; "
                f"accepted range [1, {len(ids)}]"
            )
        chosen = np.sort(rng.choice(len(ids), k, replace=False))
    else:
        chosen = np.arange(len(ids))
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(len(ids) + 1))
    return [order[bounds[j] : bounds[j + 1]] for j in chosen]


def label_counts(parts, labels, num_classes: int) -> Tensor:
    """Tensor[clients, classes] (int64): how many samples of each class every client holds."""
    y = torch.as_tensor(labels).detach().cpu().long()
    check_int("num_classes", num_classes, 1)
    out = torch.zeros(len(parts), num_classes, dtype=torch.int64)
    for i, p in enumerate(parts):
        out[i] = torch.bincount(y[torch.as_tensor(p).cpu().long()], minlength=num_classes)[
            :num_classes
        ]
    return out


def summary(parts, labels, num_classes: int) -> dict:
    """Sizes, classes per client and mean label entropy (nats): a quick look at a partition."""
    counts = label_counts(parts, labels, num_classes).double()
    sizes = counts.sum(1)
    p = counts / sizes.clamp_min(1).unsqueeze(1)
    ent = -(p * p.clamp_min(1e-300).log()).sum(1)
    return {
        "clients": len(parts),
        "size_min": int(sizes.min()),
        "size_mean": float(sizes.mean()),
        "size_max": int(sizes.max()),
        "classes_per_client_mean": float((counts > 0).sum(1).double().mean()),
        "label_entropy_mean": float(ent.mean()),
    }


def local_split(parts, labels, test_frac: float, seed: int) -> tuple[list[Tensor], list[Tensor]]:
    """Split every client's samples into a local train and a local test part, stratified by label:
    round(test_frac * n_c) of each class c go to test, but every client keeps >= 1 training sample.
    Seeded per client (stream "local-split"), so adding clients does not change the others'
    splits."""
    if isinstance(test_frac, bool) or not isinstance(test_frac, (int, float)):
        raise FlkitError(f"test_frac={test_frac!r} must be a number in [0, 1)")
    check_range("test_frac", float(test_frac), 0, 1, high_open=True)
    y = _labels_np(labels)
    train, test = [], []
    for i, p in enumerate(parts):
        dev = p.device if isinstance(p, Tensor) else torch.device("cpu")
        ix = np.asarray(p.detach().cpu() if isinstance(p, Tensor) else p, dtype=np.int64)
        rng = numpy_rng(seed, "local-split", i)
        is_test = np.zeros(len(ix), dtype=bool)
        for c in np.unique(y[ix]):
            pos = np.flatnonzero(y[ix] == c)
            is_test[rng.permutation(pos)[: int(round(test_frac * len(pos)))]] = True
        if is_test.all():
            is_test[rng.integers(len(ix))] = False
        train.append(torch.as_tensor(ix[~is_test]).to(dev))
        test.append(torch.as_tensor(ix[is_test]).to(dev))
    return train, test


def writer_split(parts, labels, test_frac: float, seed: int) -> tuple[list[Tensor], list[Tensor]]:
    """LEAF's per-writer train/test split (its ``split_data.py``, sample-based): each client keeps
    max(1, int((1 - test_frac) * n)) of its n samples, drawn at random (seeded per client, stream
    "writer-split"), for training and tests on the rest; a client with one sample only trains.
    Per writer, not per class: a class with few samples per writer still reaches the test parts,
    in proportion to its share on average. ``labels`` is not used (same signature as
    :func:`local_split`)."""
    if isinstance(test_frac, bool) or not isinstance(test_frac, (int, float)):
        raise FlkitError(f"test_frac={test_frac!r} must be a number in [0, 1)")
    check_range("test_frac", float(test_frac), 0, 1, high_open=True)
    train, test = [], []
    for i, p in enumerate(parts):
        dev = p.device if isinstance(p, Tensor) else torch.device("cpu")
        ix = np.asarray(p.detach().cpu() if isinstance(p, Tensor) else p, dtype=np.int64)
        n = len(ix)
        n_train = max(1, int((1.0 - float(test_frac)) * n + 1e-9)) if n else 0
        order = numpy_rng(seed, "writer-split", i).permutation(n)
        is_train = np.zeros(n, dtype=bool)
        is_train[order[:n_train]] = True
        train.append(torch.as_tensor(ix[is_train]).to(dev))
        test.append(torch.as_tensor(ix[~is_train]).to(dev))
    return train, test
