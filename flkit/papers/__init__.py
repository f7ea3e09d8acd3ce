"""Numbers the papers report, for "paper says / we measured" tables.

One entry per paper spec (``/shared/papers/NNN-*.md``), keyed by the spec number. Every value is
what the paper (or, where marked, the spec's worked example) states; ``None`` means the paper does
not give it. Notebooks read these instead of typing numbers into cells::

    from flkit.papers import PAPERS
    PAPERS["001"]["rounds_to_target"]["mnist"]["stc_pa"]      # 100
"""
from __future__ import annotations

PAPERS: dict[str, dict] = {
    "001": {
        "title": "Gradient Compression Algorithm for Improving Communication Efficiency of "
                 "Federated Learning (STC with projection aggregation, STC-PA)",
        "citation": "Tian Jin-Xiao, Computer Systems & Applications 31(10):199-205, 2022",
        "notebook": "01_stc_projection",
        "methods": ("fedavg", "stc", "stc_pa"),
        "p": 0.1,
        # per-round traffic reduction vs. FedAvg (running text; Table 2 itself is missing)
        "compression_factor": {"mnist": 45.0, "cifar10": 47.0},
        # rounds to reach the target average client accuracy (Table 2 as stated in the text)
        "target": {"mnist": 0.95, "cifar10": 0.50},
        "rounds_to_target": {
            "mnist": {"fedavg": 197, "stc": 157, "stc_pa": 100},
            # CIFAR-10: only differences are given: FedAvg = R + 295, STC = R + 300, STC-PA = R
            "cifar10": {"fedavg": None, "stc": None, "stc_pa": None},
        },
        "rounds_saved_by_stc_pa": {
            "mnist": {"fedavg": 97, "stc": 57},
            "cifar10": {"fedavg": 295, "stc": 300},
        },
        "rounds_to_target_text": {
            "mnist": {"fedavg": "197", "stc": "157", "stc_pa": "100"},
            "cifar10": {"fedavg": "R+295", "stc": "R+300", "stc_pa": "R"},
        },
        # Fig. 3 reading: STC-PA converges at about round 75, STC around round 100
        "converges_near_round": {"mnist": {"stc_pa": 75, "stc": 100}},
        # worked examples of the spec (section 2.6), simulator counter at p = 0.1, per direction
        # and per participating client; d from the architectures of section 4.3
        "worked_example": {
            "vgg11_star": {"params": 865_482, "fedavg_bytes": 3.46e6, "fedavg_mbit": 27.70,
                           "stc_mbit": 0.585, "stc_bytes": 73e3, "factor": 47.4},
            "cnn3_mnist": {"params": 130_890, "fedavg_bytes": 0.52e6, "stc_bytes": 11e3},
        },
        # reference values of the Golomb position code (spec section 2.6, paper formula)
        "golomb": {0.1: (3, 4.756), 0.05: (4, 5.786), 0.01: (6, 8.108), 0.0025: (8, 10.114)},
        "factor_paper_formula_p01": 55.6,
        "factor_simulator_counter_p01": 47.4,
        "claims": {
            "traffic": "STC and STC-PA cut per-round traffic about 45x (MNIST) / 47x (CIFAR-10) vs FedAvg",
            "rounds": "STC-PA reaches the target in fewer rounds than STC and no later than FedAvg",
            "variance": "STC-PA has the lowest across-client accuracy variance",
            "oscillation": "STC oscillates more than FedAvg on non-IID data",
        },
    },
}


def get(key: str) -> dict:
    """The entry of paper ``key`` (e.g. "001"); FlkitError listing the known keys otherwise."""
    from .utils import check_choice
    check_choice("paper", key, sorted(PAPERS))
    return PAPERS[key]


# ---- 003 FedAST (spec papers/003-fedast.md); every number the spec states
PAPERS["003"] = {
    "title": "FedAST: Federated Asynchronous Simultaneous Training",
    "authors": "Askin, Sharma, Joe-Wong, Joshi",
    "venue": "UAI 2024 (PMLR 244), arXiv:2406.00302",
    "spec": "papers/003-fedast.md",
    "numbers": {
        "max_time_gain_vs_sync_st_pct": 46.0,              # abstract; most likely a Fig. 5 bar
        "het4_total_gain_pct": 40.1,                       # Fig. 7
        "het4_fedast_mnist_time": 99,                      # Fig. 7 (first task done)
        "het4_fedast_cifar10_time": 619,                   # Fig. 7 (last task done)
        "het4_sync_completion_time_inferred": 1033,        # 619 / 0.599 [I]
        "het4_demo_fedast_times": {"mnist": 98, "shakespeare": 325, "fmnist": 365, "cifar10": 615},  # [D]
        "het4_demo_sync_times": {"shakespeare": 350, "mnist": 360, "fmnist": 770, "cifar10": 1000},   # [D]
        "dynamic_vs_static_max_gain_pct": 11.9,            # Figs. 21-26
        "cifar100_gain_pct": {2: 22.0, 4: 40.7, 6: 56.3},  # Fig. 16
        "het4_higher_targets_gain_pct": 55.9,              # Figs. 17/18
        "het4_lower_targets_gain_pct": 16.3,               # Figs. 19/20
        "buffer_best": [{"requests": 175, "buffer": 5, "tasks": "FMNIST + CIFAR-10"},
                        {"requests": 105, "buffer": 3, "tasks": "MNIST + CIFAR-10"}],  # Figs. 8/9
        "buffer_best_ratio": 35,
        "sync_k": 30,                                      # Figs. 10-12
        "sync_het_clients": {"mnist": 100, "fmnist": 84, "cifar10": 48, "shakespeare": 68},
        "targets_main": {"mnist": 0.93, "fmnist": 0.82, "cifar10": 0.63, "shakespeare": 0.42},
        "targets_lower": {"mnist": 0.83, "fmnist": 0.72, "cifar10": 0.53, "shakespeare": 0.32},
        "targets_higher": {"mnist": 0.96, "fmnist": 0.85, "cifar10": 0.66, "shakespeare": 0.45},
        "num_clients": 1000, "available": 300, "total_requests_demo": 384, "requests_per_task_demo": 96,
        "buffer_demo": 3, "ratio_code": 32, "ratio_max_paper": 37, "window_V": 8, "period_factor": 0.75,
        "local_steps": 27, "delay_multiplier": 27, "monte_carlo_runs": 3,
        "delay_ratios": {"mnist": 0.148, "fmnist": 0.240, "cifar10": 0.228, "shakespeare": 0.555, "cifar100": 2.071},
        "speed_groups": {"fractions": (0.25, 0.5, 0.25), "factors": (1.3, 1.0, 0.7)},
        "client_lr_async": {"mnist": 0.1, "fmnist": 0.06, "cifar10": 0.1, "shakespeare": 7, "cifar100": 0.06},
        "client_lr_sync": {"mnist": 0.2, "fmnist": 0.06, "cifar10": 0.1, "shakespeare": 7, "cifar100": 0.06},
        "weight_decay_async": {"mnist": 3e-4, "fmnist": 3e-4, "cifar10": 7e-4, "shakespeare": 7e-5},
        "weight_decay_sync": {"mnist": 3e-4, "fmnist": 3e-4, "cifar10": 3e-4, "shakespeare": 7e-5},
        "server_lr": {"fedast": 0.1, "nobuffer": 0.038, "sync": 1.0},
        "dirichlet_alpha": {"images": 0.1, "cifar100": 1.0},
        "samples_per_client": 300, "batch_size": {"images": 32, "shakespeare": 64},
        "bods_alpha": 0.25, "ucb_gamma": 0.99,
    },
    "claims": [
        "FedAST reaches targets earlier than Sync-ST (first-k); Sync-ST without mitigation is far slower; "
        "Sync-Bayes-ST and Sync-UCB-ST perform like Sync-ST (Fig. 2)",
        "The time gain of FedAST over Sync-ST grows with the number of simultaneous tasks (Fig. 5)",
        "Heterogeneous tasks: the easy task finishes first, its requests move to the others, overall completion "
        "earlier than Sync-ST (Figs. 6/7, 40.1%)",
        "FedAST ~ NoBuffer with few active clients; NoBuffer degrades as active clients grow, FedAST stays near "
        "centralised (Figs. 3/13, 4/14)",
        "Buffer-size sweep at fixed R has an interior optimum near R/b ~ 35 (Figs. 8/9)",
        "Sync-ST k sweep: larger k gives longer but fewer rounds (Figs. 10-12)",
        "Dynamic allocation beats static by a small margin (<= ~12%), growing with target difficulty (Figs. 21-26)",
    ],
}
