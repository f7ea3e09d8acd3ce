"""HideNseek's server pruning against hand-built answers: the structural masks of a
conv -> BatchNorm -> flatten -> linear network, and the iterative SynFlow schedule (100 iterations
re-score after each removal; 1 iteration ranks once) on a network computed by hand."""

import torch
from torch import nn

from flkit.prune import structural_masks, synflow_group_mask


def test_structural_masks_conv_bn_flatten_linear_by_hand():
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(1, 3, 3, padding=1, bias=False),
        nn.BatchNorm2d(3),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(3 * 2 * 2, 2),
    )
    keep = {"0": torch.tensor([True, False, True])}
    masks = structural_masks(net, keep, (1, 2, 2))
    conv = torch.ones(3, 1, 3, 3, dtype=torch.bool)
    conv[1] = False  # the removed output channel
    bn = torch.tensor([True, False, True])  # its BatchNorm channel
    lin = torch.ones(2, 12, dtype=torch.bool)
    lin[:, 4:8] = False  # flatten is channel-major: channel 1 fills inputs 4..7
    assert set(masks) == {"0.weight", "1.weight", "1.bias", "4.weight"}
    assert torch.equal(masks["0.weight"], conv)
    assert torch.equal(masks["1.weight"], bn) and torch.equal(masks["1.bias"], bn)
    assert torch.equal(masks["4.weight"], lin)


def _chain():
    """Input 1 -> a (3 nodes, weights 1) -> b (3 nodes) -> one output (weights 1), all linear.
    With group score "sum", node a_j scores the flow through it (column j of W_b, over the b
    rows still kept) and node b_k the flow into it (row k, over the a nodes still kept):
        W_b = [[2, 0, 2], [0, 3, 0], [1.5, 5, 0]]
        a = (3.5, 8, 2), b = (4, 3, 6.5)."""
    net = nn.Sequential(
        nn.Linear(1, 3, bias=False), nn.Linear(3, 3, bias=False), nn.Linear(3, 1, bias=False)
    )
    with torch.no_grad():
        net[0].weight.fill_(1.0)
        net[1].weight.copy_(torch.tensor([[2.0, 0.0, 2.0], [0.0, 3.0, 0.0], [1.5, 5.0, 0.0]]))
        net[2].weight.fill_(1.0)
    return net


def test_iterative_synflow_differs_from_one_shot_by_hand():
    # keep 1/2 of the 6 groups: 3 go. One shot (1 iteration) removes the 3 smallest scores,
    # a3 (2), b2 (3), a1 (3.5), and keeps b1, which then receives nothing.
    # 100 iterations: q = floor((1 - 0.5^(k/100)) 6) is 1 from k = 27: a3 goes, b1 falls to 2;
    # q = 2 from k = 59: b1 goes (a3 0, b1 2 < b2 3), a1 falls to 1.5 (it feeds only b3 now);
    # q = 3 at k = 100: a1 goes (1.5 < b2 3). Kept: a2, b2, b3.
    net = _chain()
    once = synflow_group_mask(net, (1,), 0.5, ["0", "1"], iterations=1, score="sum")
    iterated = synflow_group_mask(net, (1,), 0.5, ["0", "1"], iterations=100, score="sum")
    assert once["0"].tolist() == [False, True, False] and once["1"].tolist() == [True, False, True]
    assert iterated["0"].tolist() == [False, True, False]
    assert iterated["1"].tolist() == [False, True, True]
