"""Notebook 03's `paper` preset and FedAST's dataset defaults pinned to the paper's values
(Askin et al., UAI 2024, Sec. 5 and the appendix tables; the official code where the paper is
silent). Every expected value is typed here from the paper, not read from the library."""

import pytest

from flkit import asyncfl, models
from flkit.workbook import presets


def test_paper_preset_is_the_papers_setting():
    preset = presets.load("03_fedast", "paper")
    # Sec. 5: 1000 clients, 30 % available, demo sum R = 384 (96 x 4), R/b ratio 32 (code),
    # Sync first-30, 3 Monte Carlo runs, full test set
    assert (preset["num_clients"], preset["availability"], preset["total_requests"]) == (
        1000,
        0.3,
        384,
    )
    assert (preset["ratio"], preset["k"], preset["num_seeds"], preset["eval_subset"]) == (
        32,
        30,
        3,
        0,
    )
    assert (
        preset["realloc_rule"] == "official"
        and preset["fmnist_model"] == ""
        and preset["Ms"] == [2, 4, 6]
    )
    assert preset["mnist_train_subset"] == 0  # the whole MNIST training set
    # Fig. 2: 6 identical CIFAR-10 tasks at the main target 63 %
    assert (preset["fig2_M"], preset["fig2_dataset"], preset["fig2_target"]) == (6, "cifar10", 0.63)
    assert (preset["fig2_num_clients"], preset["fig2_total_requests"], preset["fig2_k"]) == (
        1000,
        384,
        30,
    )
    assert preset["fig2_methods"][0] == "fedast_s"  # identical tasks: option S, as the paper
    # Figs. 6/7: four tasks, Table 1 / Table 3 targets, Sync shares 100/84/48/68
    assert preset["het_datasets"] == ["mnist", "fmnist", "cifar10", "shakespeare"]
    assert preset["het_targets_main"] == [0.93, 0.82, 0.63, 0.42]
    assert preset["het_targets_high"] == [0.96, 0.85, 0.66, 0.45]
    assert preset["het_shares"] == [100.0, 84.0, 48.0, 68.0]
    assert preset["het_delay_ratios"] == [0.148, 0.24, 0.228, 0.555]
    # Fig. 8: FMNIST + CIFAR-10, R = 175 per task, main targets
    assert preset["buffer_datasets"] == ["fmnist", "cifar10"] and preset["buffer_targets"] == [
        0.82,
        0.63,
    ]
    assert preset["buffer_requests"] == 175 and 5 in preset["buffers"]


@pytest.mark.parametrize(
    "ds,lr,sync_lr,wd,sync_wd,test_every,batch",
    [
        ("mnist", 0.1, 0.2, 3e-4, 3e-4, 4, 32),
        ("fmnist", 0.06, 0.06, 3e-4, 3e-4, 4, 32),
        ("cifar10", 0.1, 0.1, 7e-4, 3e-4, 4, 32),
        # Shakespeare weight decay: paper 7e-5, both demo configs 1e-5 (we follow the code)
        ("shakespeare", 7.0, 7.0, 1e-5, 1e-5, 2, 64),
    ],
)
def test_dataset_defaults_are_the_papers(ds, lr, sync_lr, wd, sync_wd, test_every, batch):
    d = asyncfl.DATASET_DEFAULTS[ds]
    assert (d["lr"], d["sync_lr"], d["weight_decay"], d["sync_weight_decay"]) == (
        lr,
        sync_lr,
        wd,
        sync_wd,
    )
    assert (d["test_every"], d["batch_size"]) == (test_every, batch)
    cfg = asyncfl.FedASTRun.from_dict(dict(method="fedast_d", tasks=[dict(name="t", dataset=ds)]))
    assert cfg.tau(cfg.tasks[0]) == 27  # 3 epochs x floor(300 / 32) = 27, Shakespeare 27 steps
    if ds != "shakespeare":
        assert d["alpha"] == 0.1 and d["epochs"] == 3


def test_server_lrs_delays_and_model_sizes_are_the_papers():
    assert asyncfl.SERVER_LR == {"fedast": 0.1, "nobuffer": 0.038, "sync": 1.0}
    assert asyncfl.DELAY_RATIOS["mnist"] == 0.148 and asyncfl.DELAY_RATIOS["fmnist"] == 0.240
    assert asyncfl.DELAY_RATIOS["cifar10"] == 0.228 and asyncfl.DELAY_RATIOS["shakespeare"] == 0.555
    assert asyncfl.SPEED_GROUP_FRACTIONS == (0.25, 0.5, 0.25)
    assert asyncfl.SPEED_GROUP_FACTORS == (1.3, 1.0, 0.7)
    assert asyncfl.LOCAL_STEPS_MULTIPLIER == 27.0
    # parameter counts by hand from the layer lists (spec Sec. 7):
    # MLP 784*200+200 + 200*200+200 + 200*10+10; LeNet-5 (6*25+6) + (16*6*25+16) + 256*120+120
    # + 120*84+84 + 84*10+10; CIFAR CNN (64*3*25+64) + (64*64*25+64) + 1600*384+384 + 384*192+192
    # + 192*10+10; LSTM 80*8 + 4*100*(8+100) + 2*4*100 + 100*80+80
    hand = {
        "mlp_mnist": 784 * 200 + 200 + 200 * 200 + 200 + 200 * 10 + 10,
        "lenet5_fedast": 156 + 2416 + 256 * 120 + 120 + 120 * 84 + 84 + 84 * 10 + 10,
        "cnn_cifar10": 4864 + 102464 + 1600 * 384 + 384 + 384 * 192 + 192 + 192 * 10 + 10,
        "lstm_shakespeare": 80 * 8 + 4 * 100 * 108 + 800 + 100 * 80 + 80,
    }
    assert hand == {
        "mlp_mnist": 199_210,
        "lenet5_fedast": 44_426,
        "cnn_cifar10": 797_962,
        "lstm_shakespeare": 52_720,
    }
    for name, n in hand.items():
        assert sum(p.numel() for p in models.build(name).parameters()) == n
    cfg = asyncfl.FedASTRun("fedast_d", ({"name": "t", "dataset": "mnist"},))
    assert (cfg.window, cfg.period_factor) == (8, 0.75)  # V = 8, c_period = 0.75 M sum R
    for ds, model in (
        ("mnist", "mlp_mnist"),
        ("fmnist", "lenet5_fedast"),
        ("cifar10", "cnn_cifar10"),
        ("shakespeare", "lstm_shakespeare"),
    ):
        assert asyncfl.DATASET_DEFAULTS[ds]["model"] == model
