"""FedProx's Synthetic(alpha, beta) federated dataset (Li et al., MLSys 2020; after Shamir et al.).

Per device k (FedProx `data/synthetic/generate_synthetic.py`):
  u_k ~ N(0, alpha)   (mean of the device's model),    B_k ~ N(0, beta)  (mean of its inputs' mean)
  W_k ~ N(u_k, 1) in R^{dim x classes},  b_k ~ N(u_k, 1) in R^{classes}
  v_k ~ N(B_k, 1) in R^dim,  x ~ N(v_k, Sigma) with Sigma = diag(j^-1.2), j = 1..dim
  y = argmax(softmax(x W_k + b_k))
  samples on device k: int(lognormal(4, 2)) + 50;  the first int(0.9 n_k) are train, the rest test.
`iid=True` is FedProx's Synthetic-IID: one global (W, b) ~ N(0, 1) for all devices and v_k = B_k * 1
(the original sets every coordinate of the input mean to B_k).
The generator is numpy's default_rng seeded through flkit's named streams, so numbers differ from
the FedProx files (which used the legacy global numpy RNG) but the distribution is the same.
"""

from __future__ import annotations

import numpy as np

from ..utils import check_range, numpy_rng


def generate(
    alpha=1.0,
    beta=1.0,
    num_clients=30,
    dim=60,
    classes=10,
    seed=0,
    iid=False,
    train_frac=0.9,
    lognormal=(4.0, 2.0),
    min_samples=50,
) -> dict:
    check_range("alpha", alpha, 0, None)
    check_range("beta", beta, 0, None)
    check_range("num_clients", num_clients, 1, None)
    check_range("dim", dim, 1, None)
    check_range("classes", classes, 2, None)
    check_range("train_frac", train_frac, 0, 1, low_open=True, high_open=True)
    check_range("min_samples", min_samples, 2, None)
    rng = numpy_rng(
        seed,
        "synthetic",
        float(alpha),
        float(beta),
        int(num_clients),
        int(dim),
        int(classes),
        bool(iid),
    )
    n = rng.lognormal(lognormal[0], lognormal[1], num_clients).astype(np.int64) + int(min_samples)
    mean_w = rng.normal(0.0, alpha, num_clients)
    b_mean = rng.normal(0.0, beta, num_clients)
    std_x = np.power(np.arange(1, dim + 1, dtype=np.float64), -1.2) ** 0.5
    if iid:
        w_glob, b_glob = rng.normal(0.0, 1.0, (dim, classes)), rng.normal(0.0, 1.0, classes)
    out = {k: [] for k in ("x_train", "y_train", "g_train", "x_test", "y_test", "g_test")}
    for k in range(num_clients):
        mean_x = np.full(dim, b_mean[k]) if iid else rng.normal(b_mean[k], 1.0, dim)
        if iid:
            w, b = w_glob, b_glob
        else:
            w, b = rng.normal(mean_w[k], 1.0, (dim, classes)), rng.normal(mean_w[k], 1.0, classes)
        x = mean_x + std_x * rng.standard_normal((int(n[k]), dim))
        y = np.argmax(x @ w + b, axis=1)
        cut = int(train_frac * n[k])
        for split, sl in (("train", slice(0, cut)), ("test", slice(cut, None))):
            out[f"x_{split}"].append(x[sl].astype(np.float32))
            out[f"y_{split}"].append(y[sl].astype(np.int64))
            out[f"g_{split}"].append(np.full(len(y[sl]), k, dtype=np.int64))
    res = {k: np.concatenate(v) for k, v in out.items()}
    res["samples_per_client"] = n
    return res
