"""Notebook 05's single-sample recovery (Tables 6-7): the recovered images are classified by the
trajectory's last global model, not by the module's own (initial) weights."""

import math

import torch

from flkit.papers.staleness import estimation, privacy
from flkit.workbook import presets


def _constant_state(state: dict, cls: int) -> dict:
    """`state` with its last layer replaced so that the model predicts `cls` for every input."""
    out = dict(state)
    out["classifier.3.weight"] = torch.zeros_like(state["classifier.3.weight"])
    bias = torch.zeros_like(state["classifier.3.bias"])
    bias[cls] = 100.0
    out["classifier.3.bias"] = bias
    return out


def test_classifier_accuracy_is_the_trained_models():
    pre = {**presets.load("05_staleness", "smoke"), "privacy_samples": 16}
    tr = estimation.Trajectory(pre, 0)
    seed, n = 3, pre["privacy_samples"]
    y_test = tr.setup.data.y_test
    # the test samples recovery picks, drawn here on their own from the same seed
    pick = torch.randperm(len(y_test), generator=torch.Generator().manual_seed(seed))[:n]
    labels = y_test.cpu()[pick]
    counts = torch.bincount(labels, minlength=tr.setup.data.num_classes)
    # two classes that the picked samples hold in different numbers, so one fixed answer (the
    # initial model's) cannot match both shares
    first, second = counts.argsort(descending=True)[:2].tolist()
    assert counts[first] > counts[second] > 0
    trained = tr.models[-1]
    for cls in (first, second):
        tr.models[-1] = _constant_state(trained, cls)
        priv, _ = privacy.recovery(pre, tr, seed=seed)
        share = float(counts[cls]) / n
        rows = priv[priv["sparsification"] != "random noise"]
        assert len(rows) == len(pre["privacy_fracs"])
        assert rows["classifier_acc"].tolist() == [share] * len(rows)
        noise_row = priv[priv["sparsification"] == "random noise"]
        assert math.isnan(noise_row["classifier_acc"].iloc[0])
    # the module keeps its own weights and mode: the state was used, not loaded
    assert tr.setup.model.training
    assert torch.equal(
        tr.setup.model.state_dict()["classifier.3.bias"], tr.setup.init_state["classifier.3.bias"]
    )
