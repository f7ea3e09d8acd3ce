"""Every supermask method of notebook 04 (HideNseek, FedMask, Signed, BNNAvg) keeps learning: on a
toy task that a random network with the right mask separates, each ends well above chance, its
global mask still changes in every round after round 2, and some of those changes are entries
the previous round's clients had voted for unanimously. A method whose server writes unanimous
votes back where the straight-through gradient vanishes (only split votes can still move), or
whose local updates are too small to flip a latent, fails here. Learning rates and options: the
HAR score learning rates the notebook's searches ran with (the choices of its HAR decisions,
with the methods' default options), and for FedMask and Signed also the notebook's own (the
preset's, with the adopted vote weights); E = 5 local epochs as in the paper."""

import pytest
import torch
from torch import nn

from flkit.engine import LocalSpec
from flkit.methods import RunContext
from flkit.methods.fedmask import FedMask, Signed
from flkit.methods.hidenseek import BNNAvg, HideNseek
from flkit.papers.hidenseek import study
from flkit.prune import hard_sign
from flkit.state import model_state
from flkit.workbook import decisions, presets

CLASSES, DIM, CLIENTS, PER_CLIENT, ROUNDS = 4, 16, 6, 60, 5
EPOCHS, BATCH = 5, 8
SEPARATION = 0.7
WIDTH = 256


def _toy():
    """Four overlapping Gaussian blobs (unit noise, centres 0.7 N(0, I)), IID over 6 clients: a
    16-256-256-4 random ReLU network separates them once its weights are masked right. The blobs
    overlap so that no method solves the task in a round or two and stops changing its mask for
    want of anything left to learn; the width gives each round's flips entries to show in."""
    g = torch.Generator().manual_seed(0)
    centres = SEPARATION * torch.randn(CLASSES, DIM, generator=g)
    y = torch.arange(CLIENTS * PER_CLIENT) % CLASSES
    x = centres[y] + torch.randn(len(y), DIM, generator=g)
    parts = [torch.arange(i * PER_CLIENT, (i + 1) * PER_CLIENT) for i in range(CLIENTS)]
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Linear(DIM, WIDTH, bias=False),
        nn.ReLU(),
        nn.Linear(WIDTH, WIDTH, bias=False),
        nn.ReLU(),
        nn.Linear(WIDTH, CLASSES),
    )
    net.num_classes = CLASSES
    return net, x, y, parts


NAMES = ["0.weight", "2.weight", "4.weight"]


def _pattern(method, state) -> torch.Tensor:
    """The global mask as the signs of the weights the server holds (computed here, not by the
    method): w0 * sign (HideNseek, Signed), w0 * {0, 1} (FedMask, 0 where masked), sign of the
    latent weight (BNNAvg, sign(0) = +1)."""
    if isinstance(method, BNNAvg):
        return torch.cat([hard_sign(state.model[n]).flatten() for n in NAMES])
    return torch.cat([torch.sign(state.model[n]).flatten() for n in NAMES])


def _unanimous(updates) -> torch.Tensor:
    """Entries (in ``_pattern``'s order) that every client of the round uploaded the same value
    for; a layer a method does not upload (HideNseek's personal classifier) has no vote."""
    out = []
    for n in NAMES:
        if n in updates.state:
            v = updates.state[n].flatten(1)
            out.append((v == v[:1]).all(0))
        else:
            out.append(torch.zeros(CLASSES * WIDTH, dtype=torch.bool))
    return torch.cat(out)


_HAR = decisions.load("hidenseek")
_PRE = {m: decisions.decide(_HAR[f"har_score_lr_{m}"]).values[f"{m}_lr"] for m in study.OPTIONS}
_CPU = presets.load("04_hidenseek", "cpu")


@pytest.mark.parametrize(
    "cls,name,lr,extra",
    [
        (HideNseek, "hidenseek", _PRE["hidenseek"], {"prune_iterations": 5}),
        (FedMask, "fedmask", _PRE["fedmask"], {}),
        (Signed, "signed", _PRE["signed"], {}),
        (BNNAvg, "bnnavg", _PRE["bnnavg"], {}),
        (FedMask, "fedmask", _CPU["fedmask_lr"], study.options_of(_CPU, "fedmask")),
        pytest.param(
            Signed,
            "signed",
            _CPU["signed_lr"],
            study.options_of(_CPU, "signed"),
            marks=pytest.mark.xfail(
                strict=True,
                reason="at its adopted lr, Signed's global signs on this toy stop flipping "
                "before round 5 (its HAR and MNIST lever runs flip in every round)",
            ),
        ),
    ],
)
def test_supermask_method_keeps_learning(cls, name, lr, extra):
    net, x, y, parts = _toy()
    spec = LocalSpec(lr=lr, batch_size=BATCH, epochs=EPOCHS, momentum=0.9)
    ctx = RunContext(net, x, y, parts, spec, 0, CLASSES, clients_per_round=2)
    method = cls(ctx, **extra)
    state = method.init_state(model_state(ctx.model))
    seen = []
    aggregate = method.aggregate

    def spy(state, updates, rnd):  # the votes each round's server step receives
        seen.append(_unanimous(updates))
        return aggregate(state, updates, rnd)

    method.aggregate = spy
    flips, after_unanimous = [], 0
    for rnd in range(1, ROUNDS + 1):
        g = torch.Generator().manual_seed(rnd)
        clients = sorted(torch.randperm(CLIENTS, generator=g)[:2].tolist())
        before = _pattern(method, state)
        state, _ = method.round(state, clients, rnd)
        flipped = _pattern(method, state) != before
        flips.append(float(flipped.float().mean()))
        if rnd >= 3:
            after_unanimous += int((flipped & seen[-2]).sum())
    accuracy, _ = method.evaluate(state, None, None)
    assert accuracy >= 1 / CLASSES + 0.25, f"{name}: accuracy {accuracy:.2f}"
    late = flips[2:]  # rounds 3 and later
    assert all(f > 0 for f in late), f"{name}: flip shares after round 2 {late}"
    assert after_unanimous > 0, f"{name}: no entry voted unanimously in a round flipped later"
