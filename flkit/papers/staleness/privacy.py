"""Figs. 8 and Tables 6-7: how much of a single training sample the server recovers from a
one-sample, one-step update, as the update is sparsified (and noised).

Each sample is its own "client" (K = samples, R = 1), so all samples invert in one batch."""

from __future__ import annotations

import pandas as pd
import torch

from ...engine import LocalSpec
from ...inversion import InversionSpec, init_data, invert, unroll


def _pixels(x, meta):
    norm = meta.get("normalization", {})
    mean, std = norm.get("mean") or [0.0], norm.get("std") or [1.0]
    m = torch.tensor(mean, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
    s = torch.tensor(std, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
    return (x * s + m).clamp(0, 1)


def _predict(model, state: dict, x: torch.Tensor) -> torch.Tensor:
    """Classes `model` with the weights `state` predicts for `x`, in eval mode (no dropout).
    The module's own parameters are the run's initial weights (training works on copies), so
    the trained model is the state, not the module."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            return torch.func.functional_call(model, state, (x,)).argmax(1)
    finally:
        model.train(was_training)


def recovery(
    preset, tr, fracs=None, noise_var: float = 0.0, seed: int = 0
) -> tuple[pd.DataFrame, dict]:
    """Recover `privacy_samples` test images from their one-step updates at the trajectory's last
    global model, for each sparsification rate; MSE/PSNR in pixel space [0, 1], accuracy of the
    trained model on the recovered images, label recovery (argmax of the learned soft label)."""
    data, model = tr.setup.data, tr.setup.model
    now = tr.models[-1]
    n = preset["privacy_samples"]
    g = torch.Generator().manual_seed(seed)
    pick = torch.randperm(len(data.y_test), generator=g)[:n].to(data.x_test.device)
    x, y = data.x_test[pick], data.y_test[pick]
    local = LocalSpec(lr=preset["lr"], batch_size=1, steps=1)
    starts = {k: v.unsqueeze(0).expand(n, *v.shape) for k, v in now.items()}
    onehot = torch.nn.functional.one_hot(y, data.num_classes).to(x.dtype).unsqueeze(1)
    target = unroll(model, starts, x.unsqueeze(1), onehot, local)
    if noise_var > 0:
        target = {
            k: v + noise_var**0.5 * torch.randn(v.shape, generator=g).to(v)
            for k, v in target.items()
        }
    rows, images = [], {}
    truth = _pixels(x, data.meta)
    fracs = list(fracs if fracs is not None else preset["privacy_fracs"])
    # every sparsification rate's inversions in one batch: sample i of rate j is client j n + i
    spec = InversionSpec(size=1, iters=preset["privacy_iters"], lr=preset["gi_lr"])
    x0, y0 = init_data(
        n, spec, x.shape[1:], data.num_classes, seed, list(range(n)), x.device, x.dtype
    )
    reps = len(fracs)
    res = invert(
        model,
        {k: v.repeat(reps, *([1] * (v.dim() - 1))) for k, v in starts.items()},
        {k: v.repeat(reps, *([1] * (v.dim() - 1))) for k, v in target.items()},
        local,
        spec,
        x0.repeat(reps, *([1] * (x0.dim() - 1))),
        y0.repeat(reps, 1, 1),
        box=tr.box,
        topk=[1 - f if f < 1 else 1e-6 for f in fracs for _ in range(n)],
    )
    for j, frac in enumerate(fracs):
        rx, ry = res.x[j * n : (j + 1) * n, 0], res.y[j * n : (j + 1) * n, 0]
        rec = _pixels(rx, data.meta)
        mse = ((rec - truth) ** 2).flatten(1).mean(1)
        pred = _predict(model, now, rx)
        rows.append(
            {
                "sparsification": frac,
                "mse": float(mse.mean()),
                "psnr": float((10 * torch.log10(1 / mse.clamp_min(1e-12))).mean()),
                "classifier_acc": float((pred == y).float().mean()),
                "label_recovery": float((ry.argmax(1) == y).float().mean()),
            }
        )
        images[frac] = rec.cpu()
    noise = _pixels(
        init_data(
            n,
            InversionSpec(size=1),
            x.shape[1:],
            data.num_classes,
            seed + 1,
            list(range(n)),
            x.device,
            x.dtype,
        )[0][:, 0],
        data.meta,
    )
    nm = ((noise - truth) ** 2).flatten(1).mean(1)
    rows.append(
        {
            "sparsification": "random noise",
            "mse": float(nm.mean()),
            "psnr": float((10 * torch.log10(1 / nm)).mean()),
            "classifier_acc": float("nan"),
            "label_recovery": float("nan"),
        }
    )
    images["truth"] = truth.cpu()
    return pd.DataFrame(rows), images
