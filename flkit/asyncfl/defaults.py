"""FedAST's settings per dataset and method: the paper's, completed from the official code where
the paper is silent. :class:`flkit.asyncfl.FedASTRun` falls back to these for every ``None``."""

from __future__ import annotations

__all__ = ["DATASET_DEFAULTS", "TARGETS", "SERVER_LR", "METHODS", "ALIASES", "METHOD_LABELS"]

#: Per-dataset defaults (the paper's settings, completed from the official code where it is silent).
DATASET_DEFAULTS: dict[str, dict] = {
    "mnist": dict(
        model="mlp_mnist",
        lr=0.1,
        sync_lr=0.2,
        weight_decay=3e-4,
        sync_weight_decay=3e-4,
        batch_size=32,
        epochs=3,
        steps=None,
        test_every=4,
        alpha=0.1,
        normalize="standard",
        delay_multiplier=None,
        cpu_backend=None,
    ),
    "fmnist": dict(
        model="lenet5_fedast",
        lr=0.06,
        sync_lr=0.06,
        weight_decay=3e-4,
        sync_weight_decay=3e-4,
        batch_size=32,
        epochs=3,
        steps=None,
        test_every=4,
        alpha=0.1,
        normalize="mnist",
        delay_multiplier=None,
        cpu_backend=None,
    ),
    "cifar10": dict(
        model="cnn_cifar10",
        lr=0.1,
        sync_lr=0.1,
        weight_decay=7e-4,
        sync_weight_decay=3e-4,
        batch_size=32,
        epochs=3,
        steps=None,
        test_every=4,
        alpha=0.1,
        normalize="half",
        delay_multiplier=None,
        cpu_backend=None,
    ),
    "cifar100": dict(
        model="resnet18_gn",
        lr=0.06,
        sync_lr=0.06,
        weight_decay=0.0,
        sync_weight_decay=0.0,
        batch_size=32,
        epochs=None,
        steps=5,
        test_every=4,
        alpha=1.0,
        normalize="standard",
        delay_multiplier=5.0,
        cpu_backend=None,
    ),
    "shakespeare": dict(
        model="lstm_shakespeare",
        lr=7.0,
        sync_lr=7.0,
        weight_decay=1e-5,
        sync_weight_decay=1e-5,
        batch_size=64,
        epochs=None,
        steps=27,
        test_every=2,
        fresh_batches=True,  # official code: a new shuffled loader (drop_last) per local step
        alpha=None,
        normalize=None,
        delay_multiplier=None,
        cpu_backend="loop",  # LSTM: the vmap backend is several times slower on a CPU
    ),
    # for tests and demos: no disk access; timed like MNIST
    "synthetic": dict(
        model="logreg",
        lr=0.1,
        sync_lr=0.1,
        weight_decay=0.0,
        sync_weight_decay=0.0,
        batch_size=32,
        epochs=3,
        steps=None,
        test_every=4,
        alpha=0.5,
        normalize=None,
        delay_multiplier=None,
        cpu_backend=None,
    ),
}
#: Table 3 targets (lower / main / higher).
TARGETS = {
    "mnist": (0.83, 0.93, 0.96),
    "fmnist": (0.72, 0.82, 0.85),
    "cifar10": (0.53, 0.63, 0.66),
    "shakespeare": (0.32, 0.42, 0.45),
}
#: Server learning rates (the paper's settings).
SERVER_LR = {"fedast": 0.1, "nobuffer": 0.038, "sync": 1.0}
METHODS = ("fedast_d", "fedast_s", "nobuffer", "sync_st", "sync_st_nomit", "sync_ucb", "sync_bayes")
ALIASES = {
    "fedast": "fedast_d",
    "fedast-d": "fedast_d",
    "fedast-s": "fedast_s",
    "fedast-nobuffer": "nobuffer",
    "sync": "sync_st",
    "sync-st": "sync_st",
    "sync_nomit": "sync_st_nomit",
}
METHOD_LABELS = {
    "fedast_d": "FedAST",
    "fedast_s": "FedAST(S)",
    "nobuffer": "FedAST-NoBuffer",
    "sync_st": "Sync-ST",
    "sync_st_nomit": "Sync-ST-NoStragMit",
    "sync_ucb": "Sync-UCB-ST",
    "sync_bayes": "Sync-Bayes-ST",
}
