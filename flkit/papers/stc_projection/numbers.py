"""What the STC-PA paper reports, for the notebook's "paper reports / we measured" tables.

Tian Jin-Xiao, "Gradient Compression Algorithm for Improving Communication Efficiency of Federated
Learning", Computer Systems & Applications 31(10):199-205, 2022. Every entry says where in the paper
it comes from; ``None`` means the paper does not give it. Values we derive ourselves (not printed
in the paper) are marked "derived" and say how.
"""

from __future__ import annotations

TITLE = (
    "Gradient Compression Algorithm for Improving Communication Efficiency of Federated "
    "Learning (STC with projection aggregation, STC-PA)"
)
CITATION = "Tian Jin-Xiao, Computer Systems & Applications 31(10):199-205, 2022"

NUMBERS: dict = {
    "methods": ("fedavg", "stc", "stc_pa"),
    "p": 0.1,  # experiments text: the sparsity rate of STC and STC-PA, up and down
    # per-round traffic reduction vs FedAvg: the running text on Table 2 (the table's own cells,
    # and Table 1 with the training settings, were not available to us)
    "compression_factor": {"mnist": 45.0, "cifar10": 47.0},
    # accuracy targets of Table 2 (average client accuracy), as stated in the text
    "target": {"mnist": 0.95, "cifar10": 0.50},
    # rounds to the target (Table 2 as stated in the text). CIFAR-10 gives only differences:
    # FedAvg = R + 295, STC = R + 300, STC-PA = R, with R not stated
    "rounds_to_target": {
        "mnist": {"fedavg": 197, "stc": 157, "stc_pa": 100},
        "cifar10": {"fedavg": None, "stc": None, "stc_pa": None},
    },
    "rounds_saved_by_stc_pa": {  # text on Table 2
        "mnist": {"fedavg": 97, "stc": 57},
        "cifar10": {"fedavg": 295, "stc": 300},
    },
    "rounds_to_target_text": {  # the same, as printed
        "mnist": {"fedavg": "197", "stc": "157", "stc_pa": "100"},
        "cifar10": {"fedavg": "R+295", "stc": "R+300", "stc_pa": "R"},
    },
    # read off Fig. 3: STC-PA levels off near round 75, STC near round 100
    "converges_near_round": {"mnist": {"stc_pa": 75, "stc": 100}},
    # derived: per-round traffic per participating client and direction at p = 0.1 with the STC
    # simulator's bit counter, from the parameter counts of the two models (README.md, "Models")
    # (d x 32 bits for FedAvg); the paper prints only the factors above
    "worked_example": {
        "vgg11_star": {
            "params": 865_482,
            "fedavg_bytes": 3.46e6,
            "fedavg_mbit": 27.70,
            "stc_mbit": 0.585,
            "stc_bytes": 73e3,
            "factor": 47.4,
        },
        "cnn3_mnist": {"params": 130_890, "fedavg_bytes": 0.52e6, "stc_bytes": 11e3},
    },
    # derived: Golomb position code of STC (the STC paper's formula, Sattler et al. 2019):
    # p -> (b*, mean
    # bits per position)
    "golomb": {0.1: (3, 4.756), 0.05: (4, 5.786), 0.01: (6, 8.108), 0.0025: (8, 10.114)},
    "factor_paper_formula_p01": 55.6,  # derived: 32 / (0.1 x (4.756 + 1)), mu not counted
    "factor_simulator_counter_p01": 47.4,  # derived: the STC simulator's counter at p = 0.1
}
