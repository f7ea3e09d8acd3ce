"""The naive baseline of the whole-round benchmark: FedAvg written the obvious way in plain PyTorch.

Per round, every client copies the global model, trains it with its own torch.optim.SGD over
shuffled mini-batches of its in-memory tensors, and the server averages the state dicts
(data-size weights) and evaluates on the test set. Same data, partition, model initialisation
and hyper-parameters as `flkit run` on the reference workload, so the two whole processes can be
timed side by side:

    python benchmarks/naive_fedavg.py --batch-size 10 --rounds 5
    python -m flkit run fedavg --dataset mnist --model lenet5 --clients 10 \
        --clients-per-round 10 --partition iid --train-subset 6000 --local-epochs 5 \
        --batch-size 10 --lr 0.05 --rounds 5 --seed 0 --cache FRESH_DIR --no-progress

Prints the in-process seconds per round (training and evaluation) on its last line.
"""

from __future__ import annotations

import argparse
import copy
import time

import torch
from torch.nn import functional

from flkit import data, models
from flkit.data import partition
from flkit.utils import derive_seed, resolve_device


def fedavg(
    batch_size=10,
    rounds=5,
    clients=10,
    epochs=5,
    subset=6000,
    lr=0.05,
    seed=0,
    device="cpu",
    warmup=False,
) -> dict:
    """Run the loop; returns {"accuracy", "seconds_per_round"} (training and evaluation, after
    one untimed round when ``warmup``: the first CUDA round pays for kernel selection)."""
    dev = resolve_device(device)
    ds = data.load("mnist", device=dev, train_subset=subset)
    parts = partition.partition("iid", ds.y_train, clients, derive_seed(seed, "partition"))
    parts = [p.to(dev) for p in parts]
    torch.manual_seed(derive_seed(seed, "init"))
    net = models.build("lenet5", num_classes=10, in_channels=1).to(dev)

    def one_round():
        states, sizes = [], []
        for ix in parts:
            local = copy.deepcopy(net)
            local.train()
            opt = torch.optim.SGD(local.parameters(), lr=lr)
            for _ in range(epochs):
                perm = ix[torch.randperm(len(ix), device=dev)]
                for lo in range(0, len(perm), batch_size):
                    b = perm[lo : lo + batch_size]
                    opt.zero_grad()
                    functional.cross_entropy(local(ds.x_train[b]), ds.y_train[b]).backward()
                    opt.step()
            states.append(local.state_dict())
            sizes.append(len(ix))
        w = torch.tensor(sizes, dtype=torch.float32, device=dev) / sum(sizes)
        net.load_state_dict({n: sum(wi * s[n] for wi, s in zip(w, states)) for n in states[0]})
        net.eval()
        correct = 0
        with torch.no_grad():
            for lo in range(0, len(ds.x_test), 1000):
                out = net(ds.x_test[lo : lo + 1000])
                correct += int((out.argmax(1) == ds.y_test[lo : lo + 1000]).sum())
        return correct / len(ds.x_test)

    if warmup:
        one_round()
    t0, started_unix = time.perf_counter(), time.time()
    for _ in range(rounds):
        acc = one_round()
    per_round = (time.perf_counter() - t0) / rounds
    return {"accuracy": acc, "seconds_per_round": per_round, "rounds_started_unix": started_unix}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch-size", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--subset", type=int, default=6000)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu", help="torch device (cpu, cuda)")
    a = ap.parse_args(argv)
    r = fedavg(a.batch_size, a.rounds, a.clients, a.epochs, a.subset, a.lr, a.seed, a.device)
    print(
        f"accuracy {r['accuracy']:.4f} seconds_per_round {r['seconds_per_round']:.3f} "
        f"rounds_started_unix {r['rounds_started_unix']:.6f}"
    )
    return r


if __name__ == "__main__":
    main()
