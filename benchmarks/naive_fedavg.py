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
import torch.nn.functional as F

from flkit import data, models, partition
from flkit.utils import derive_seed


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch-size", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--subset", type=int, default=6000)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    ds = data.load("mnist", device="cpu", train_subset=a.subset)
    parts = partition.partition("iid", ds.y_train, a.clients, derive_seed(a.seed, "partition"))
    torch.manual_seed(derive_seed(a.seed, "init"))
    net = models.build("lenet5", num_classes=10, in_channels=1)
    t0 = time.perf_counter()
    for _ in range(a.rounds):
        states, sizes = [], []
        for ix in parts:
            local = copy.deepcopy(net)
            local.train()
            opt = torch.optim.SGD(local.parameters(), lr=a.lr)
            for _ in range(a.epochs):
                perm = ix[torch.randperm(len(ix))]
                for lo in range(0, len(perm), a.batch_size):
                    b = perm[lo : lo + a.batch_size]
                    opt.zero_grad()
                    F.cross_entropy(local(ds.x_train[b]), ds.y_train[b]).backward()
                    opt.step()
            states.append(local.state_dict())
            sizes.append(len(ix))
        w = torch.tensor(sizes, dtype=torch.float32) / sum(sizes)
        net.load_state_dict({n: sum(wi * s[n] for wi, s in zip(w, states)) for n in states[0]})
        net.eval()
        correct = 0
        with torch.no_grad():
            for lo in range(0, len(ds.x_test), 1000):
                out = net(ds.x_test[lo : lo + 1000])
                correct += int((out.argmax(1) == ds.y_test[lo : lo + 1000]).sum())
    per_round = (time.perf_counter() - t0) / a.rounds
    print(f"accuracy {correct / len(ds.x_test):.4f} seconds_per_round {per_round:.3f}")


if __name__ == "__main__":
    main()
