"""The STC-PA `paper` preset, and the runs it configures, hold the paper's settings.

Every expected value below is written out from the paper (Tian 2022) or, where the paper's Table 1
is missing, from the decision recorded in flkit/papers/stc_projection/README.md ("Decisions the
paper leaves open"); the source is named beside each value. Nothing is read back from the preset
file to build an expectation.
"""

from __future__ import annotations

import pytest

from flkit import models
from flkit.papers.stc_projection import study
from flkit.workbook import presets

PAPER = presets.load("01_stc_projection", "paper")

# the whole experimental setting, dataset by dataset
EXPECTED = {
    "mnist": {
        "model": "cnn3_mnist",  # "a CNN with 3 convolutional layers" (paper); layout: README
        "params": 130_890,  # the assumed conv 32-64-64 -> 128 -> 10 (README, Settings)
        "rounds": 200,  # Figs. 3/4 run to about round 200
        "target": 0.95,  # Table 2: rounds to 95 %
        "lr": 0.0125,  # Table 1 missing: calibrated so FedAvg reaches 95 % near round 200 (README)
        "weight_decay": 0.0,  # README decision
        "batch_size": 50,  # README decision
        "local_epochs": 1,  # README decision
        "num_clients": 100,  # 200 shards of the label-sorted set, 2 per client
        "clients_per_round": 10,  # participation 0.1 (STC and FedFV experiments; README decision)
        "train_subset": 0,  # the whole training set
        "test_subset": 0,  # the whole test set
    },
    "cifar10": {
        "model": "vgg11_star",  # STC's simplified VGG11 (paper)
        "params": 865_482,
        "rounds": 600,  # Figs. 5/6 run to about round 600
        "target": 0.5,  # Table 2: rounds to 50 %
        "lr": 0.02,  # README decision
        "weight_decay": 5e-5,  # README decision (STC's VGG11* training default)
        "batch_size": 50,
        "local_epochs": 1,
        "num_clients": 100,
        "clients_per_round": 10,
        "train_subset": 0,
        "test_subset": 0,
    },
}


def test_shared_settings_are_the_papers():
    assert PAPER["p"] == 0.1  # sparsity rate of STC and STC-PA, up and down (paper, experiments)
    assert PAPER["methods"] == ["fedavg", "stc", "fedfv", "stc_pa"]  # Figs. 3-6 plus FedFV
    assert PAPER["counter"] == "reference-simulator"  # gives the reported 45-47x (README)
    assert PAPER["alpha"] == 0.1 and PAPER["tau"] == 1  # FedFV's defaults (paper silent)
    assert PAPER["loss"] == "before" and PAPER["external_variant"] == "paper"
    assert PAPER["seeds"] == 3 and PAPER["cifar10_seeds"] == 3
    assert PAPER["cifar10_qualitative"] is False  # the paper's scale is judged, not qualitative
    assert sorted(PAPER["ablation_alphas"]) == [0.0, 0.1, 0.2, 0.5]  # FedFV's grid
    assert sorted(PAPER["ablation_taus"]) == [0, 1, 3, 10]
    assert PAPER["ablation_rounds"] == 200


@pytest.mark.parametrize("part", ["mnist", "cifar10"])
def test_preset_keys_of_each_dataset(part):
    want = {k: v for k, v in EXPECTED[part].items() if k != "params"}
    got = study.part_settings(PAPER, part)
    assert {k: got[k] for k in want} == want


@pytest.mark.parametrize("method", ["fedavg", "stc", "fedfv", "stc_pa"])
@pytest.mark.parametrize("part", ["mnist", "cifar10"])
def test_the_run_config_is_the_papers(part, method):
    # what is actually run: the RunConfig built from the preset, not the preset's own keys
    exp = EXPECTED[part]
    cfg = study.config(PAPER, part, method, seed=0, device="cpu")
    assert cfg.dataset == part and cfg.model == exp["model"]
    assert models.count_params(models.build(cfg.model)) == exp["params"]
    assert cfg.partition == "shards" and cfg.partition_kwargs == {"shards_per_client": 2}
    assert (cfg.num_clients, cfg.clients_per_round) == (
        exp["num_clients"],
        exp["clients_per_round"],
    )
    assert (cfg.local_epochs, cfg.local_steps, cfg.batch_size) == (exp["local_epochs"], None, 50)
    assert cfg.lr == exp["lr"] and cfg.weight_decay == exp["weight_decay"]
    assert cfg.momentum == 0.0  # plain SGD (README decision)
    assert cfg.rounds == exp["rounds"]
    assert cfg.eval_every == 1  # the paper's curves are per round
    assert cfg.per_client_eval is True  # "average client accuracy" and its variance
    assert cfg.dataset_kwargs == {}  # whole train and test sets
    mp = cfg.method_params
    if method in ("stc", "stc_pa"):
        assert mp["p"] == 0.1
    if method in ("fedfv", "stc_pa"):
        assert (mp["alpha"], mp["tau"]) == (0.1, 1)
    if method == "fedavg":
        assert mp == {}


@pytest.mark.parametrize("name", ["smoke", "cpu", "long", "paper"])
def test_cifar10_note_quotes_the_preset(name):
    # notebook 01's CIFAR-10 text is generated from the preset, so it names this preset's values
    preset = presets.load("01_stc_projection", name)
    note = study.cifar10_note(preset)
    assert (
        f"`{preset['cifar10_model']}`" in note and f"for {preset['cifar10_rounds']} rounds" in note
    )
    assert (
        f"lr {preset['cifar10_lr']}" in note
        and f"{preset['cifar10_local_epochs']} local epoch" in note
    )
    test = preset["cifar10_test_subset"]
    assert (f"a {test:,}-image test subset" if test else "the whole test set") in note
    assert f"{preset['cifar10_seeds']} seed(s)" in note


def test_notebook_text_hard_codes_no_preset_sizes():
    # the sizes a preset sets (test subset, images per client) appear in no markdown cell: they
    # come from study.cifar10_note / study.describe at run time
    import json
    import re
    from pathlib import Path

    nb = json.loads(
        Path(__file__).parents[1].joinpath("notebooks/01_stc_projection.ipynb").read_text()
    )
    text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    assert not re.search(r"\d[\d,]*-image test subset", text)
    assert "cifar10_note(P)" in "".join("".join(c["source"]) for c in nb["cells"])


@pytest.mark.parametrize("name", ["smoke", "cpu", "long", "paper"])
def test_threads_pinned_and_link_seeds_within_seeds(name):
    pre = presets.load("01_stc_projection", name)
    assert (0 if name == "long" else 1) <= pre["links_seeds"] <= pre["seeds"]  # long: cut 5
    assert pre["threads"] >= (0 if name == "paper" else 1)  # only the GPU preset leaves torch's
    if name == "long":
        assert pre["seeds"] >= 2


def test_use_threads_sets_and_refuses():
    import torch

    from flkit.utils import FlkitError

    before = torch.get_num_threads()
    try:
        assert study.use_threads({"threads": 1}) == 1
        assert study.use_threads({"threads": 0}) == 1  # 0 leaves the current count
    finally:
        torch.set_num_threads(before)
    with pytest.raises(FlkitError, match=r"threads=-1.*accepted"):
        study.use_threads({"threads": -1})


def test_part_seeds_takes_the_first_seeds_and_refuses_counts_outside_the_seeds():
    from flkit.papers.stc_projection import study
    from flkit.utils import FlkitError

    long = presets.load("01_stc_projection", "long")
    seeds = study.seeds_of(long, 5)  # [5, 6]: `long` runs 2 seeds
    assert study.part_seeds(long, seeds, "links_seeds") == []  # cut 5: not run at long
    back = presets.load("01_stc_projection", "long", links_seeds=1)  # the notebook's parameter
    assert study.part_seeds(back, seeds, "links_seeds") == [5]
    assert study.part_seeds(long, seeds, "ablation_seeds") == [5]  # cut 4
    cpu = presets.load("01_stc_projection", "cpu")
    assert study.part_seeds(cpu, study.seeds_of(cpu, 0), "ablation_seeds") == [0, 1]
    assert study.part_seeds(cpu, study.seeds_of(cpu, 0), "links_seeds") == [0]
    for bad in (0, 3, True, 1.0):
        with pytest.raises(FlkitError, match=rf"ablation_seeds={bad!r}.*from 1 to .*\(2\)"):
            study.part_seeds({"ablation_seeds": bad}, [0, 1], "ablation_seeds")
    for bad in (-1, 3, False):  # only the link ablation may be left out (0)
        with pytest.raises(FlkitError, match=rf"links_seeds={bad!r}.*from 0 to .*\(2\)"):
            study.part_seeds({"links_seeds": bad}, [0, 1], "links_seeds")
    with pytest.raises(FlkitError, match="seeds"):
        study.part_seeds(long, seeds, "seeds")


def test_link_ablation_without_seeds_runs_nothing_and_the_counters_come_from_the_comparison():
    """`long` leaves the link ablation out (links_seeds = 0): no run, an empty table with the
    full table's columns, and the comparison's runs relabelled for the counters' figure."""
    from flkit.papers.stc_projection import study

    def refuse(*a, **k):
        raise AssertionError("no run may start without seeds")

    long = presets.load("01_stc_projection", "long")
    orig = study.run
    study.run = refuse
    try:
        runs, tab = study.link_ablation(long, study.part_seeds(long, [0, 1], "links_seeds"), "cpu")
    finally:
        study.run = orig
    assert runs == {} and tab.empty and tuple(tab.columns) == study.LINK_COLUMNS
    a, b = object(), object()
    assert study.labelled({("fedfv", 0): a, ("stc_pa", 1): b}) == {
        ("FedFV", 0): a,
        ("STC-PA", 1): b,
    }
    link = {("STC up, dense down", 0): b}
    assert study.counter_runs(link, {("fedfv", 0): a}) is link  # the ablation's when it ran
    # else the comparison's own runs
    assert study.counter_runs(runs, {("stc_pa", 0): a}) == {("STC-PA", 0): a}
