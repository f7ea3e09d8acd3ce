"""The wide backend: K clients trained as one network.

Each client's features are stacked along the channel/feature dimension in client-major order
(client k owns channels [k*C, (k+1)*C)). Convolutions become grouped convolutions, linear layers
batched matrix products, norms act per channel group, and element-wise layers need no change.
One forward/backward then trains all K clients at once with plain autograd; on a CPU this beats
vmap (no per-client dispatch) and on a GPU it gives large kernels.

A model qualifies when every parameter and buffer lives in a supported leaf layer and its forward
only flattens with `torch.flatten(x, 1)` (see docs/ARCHITECTURE.md, engine compatibility rule).

Here: the wide layers, `WideModel` (a private copy of the model with those layers swapped in, built
once per model by `wide_model`), the loss of K clients in one forward pass (`wide_loss`), and that
loss under torch.compile for the "compiled" backend (`compiled_loss`), which falls back to the eager
loss on any failure. The SGD around a step is flkit.engine.train's.
"""

from __future__ import annotations

import os
import warnings
import weakref

import torch
from torch import nn
from torch.nn import functional

from .copies import engine_copy, per_model

PARAMETER_FREE = (
    nn.ReLU,
    nn.ReLU6,
    nn.LeakyReLU,
    nn.ELU,
    nn.GELU,
    nn.Sigmoid,
    nn.Tanh,
    nn.Softmax,
    nn.LogSoftmax,
    nn.Hardtanh,
    nn.MaxPool1d,
    nn.MaxPool2d,
    nn.AvgPool1d,
    nn.AvgPool2d,
    nn.AdaptiveAvgPool2d,
    nn.AdaptiveAvgPool1d,
    nn.Flatten,
    nn.Dropout,
    nn.Identity,
)


class _Slots:
    """The tensors the wide layers read during one call: {full_name: Tensor[K, ...]}."""

    def __init__(self):
        self.tensors: dict[str, torch.Tensor] = {}
        self.k = 0


class _WideLeaf(nn.Module):
    def __init__(self, slots: _Slots, prefix: str, src: nn.Module):
        super().__init__()
        object.__setattr__(self, "_slots", slots)  # not a submodule
        self.prefix = prefix
        self.src_repr = repr(src)

    def t(self, name):
        return self._slots.tensors.get(self.prefix + name)

    def extra_repr(self):
        return f"wide {self.src_repr}"


class WideConv2d(_WideLeaf):
    def __init__(self, slots, prefix, m: nn.Conv2d):
        super().__init__(slots, prefix, m)
        if m.padding_mode != "zeros" or isinstance(m.padding, str):
            raise NotImplementedError("wide Conv2d supports numeric zero padding only")
        self.stride, self.padding, self.dilation, self.groups = (
            m.stride,
            m.padding,
            m.dilation,
            m.groups,
        )

    def forward(self, x):
        w, b, k = self.t("weight"), self.t("bias"), self._slots.k
        w = w.reshape(k * w.shape[1], *w.shape[2:])
        b = None if b is None else b.reshape(-1)
        return functional.conv2d(x, w, b, self.stride, self.padding, self.dilation, self.groups * k)


class WideLinear(_WideLeaf):
    def forward(self, x):
        w, b, k = self.t("weight"), self.t("bias"), self._slots.k
        lead = x.shape[:-1]
        xk = x.reshape(-1, k, w.shape[2]).transpose(0, 1)  # [K, N, in]
        if b is None:
            y = torch.bmm(xk, w.transpose(1, 2))
        else:
            y = torch.baddbmm(b.unsqueeze(1), xk, w.transpose(1, 2))
        return y.transpose(0, 1).reshape(*lead, k * w.shape[1])


class WideBatchNorm(_WideLeaf):
    def __init__(self, slots, prefix, m: nn.modules.batchnorm._BatchNorm):
        super().__init__(slots, prefix, m)
        if m.momentum is None:
            raise NotImplementedError("wide BatchNorm needs a fixed momentum")
        self.eps, self.momentum, self.track = m.eps, m.momentum, m.track_running_stats

    def forward(self, x):
        rm, rv, nbt = self.t("running_mean"), self.t("running_var"), self.t("num_batches_tracked")
        w, b = self.t("weight"), self.t("bias")
        use_batch = self.training or rm is None
        if self.training and nbt is not None:
            nbt.add_(1)
        # views share storage with the stacked buffers, so the in-place running-stat update lands
        # there
        return functional.batch_norm(
            x,
            None if rm is None else rm.view(-1),
            None if rv is None else rv.view(-1),
            None if w is None else w.reshape(-1),
            None if b is None else b.reshape(-1),
            use_batch,
            self.momentum,
            self.eps,
        )


class WideGroupNorm(_WideLeaf):
    def __init__(self, slots, prefix, m: nn.GroupNorm):
        super().__init__(slots, prefix, m)
        self.num_groups, self.eps = m.num_groups, m.eps

    def forward(self, x):
        w, b, k = self.t("weight"), self.t("bias"), self._slots.k
        return functional.group_norm(
            x,
            self.num_groups * k,
            None if w is None else w.reshape(-1),
            None if b is None else b.reshape(-1),
            self.eps,
        )


class WideEmbedding(_WideLeaf):
    """Tokens arrive as [B, K*T]; the output is [B, T, K*D] (features last, client-major)."""

    def forward(self, x):
        w, k = self.t("weight"), self._slots.k
        v, d = w.shape[1], w.shape[2]
        bsz = x.shape[0]
        idx = x.reshape(bsz, k, -1) + (torch.arange(k, device=x.device) * v).view(1, k, 1)
        e = functional.embedding(idx, w.reshape(k * v, d))  # [B, K, T, D]
        return e.permute(0, 2, 1, 3).reshape(bsz, -1, k * d)


class WideLSTM(_WideLeaf):
    """batch_first LSTM on [B, T, K*D]; gate order i, f, g, o as in torch.nn.LSTM."""

    def __init__(self, slots, prefix, m: nn.LSTM):
        super().__init__(slots, prefix, m)
        if not m.batch_first or m.bidirectional or m.proj_size:
            raise NotImplementedError(
                "wide LSTM supports batch_first, unidirectional, no projection"
            )
        self.layers, self.hidden, self.has_bias = m.num_layers, m.hidden_size, m.bias

    def forward(self, x, hx=None):
        if hx is not None:
            raise NotImplementedError("wide LSTM starts from a zero state")
        k, hsz = self._slots.k, self.hidden
        bsz, steps = x.shape[0], x.shape[1]
        h_last, c_last = [], []
        for layer in range(self.layers):
            w_ih, w_hh = self.t(f"weight_ih_l{layer}"), self.t(f"weight_hh_l{layer}")
            xin = x.reshape(bsz, steps, k, -1)
            pre = torch.einsum("btkd,kgd->btkg", xin, w_ih)
            if self.has_bias:
                pre = pre + self.t(f"bias_ih_l{layer}") + self.t(f"bias_hh_l{layer}")
            h = x.new_zeros(bsz, k, hsz)
            c = x.new_zeros(bsz, k, hsz)
            outs = []
            for s in range(steps):
                gates = pre[:, s] + torch.einsum("bkh,kgh->bkg", h, w_hh)
                i, f, g, o = gates.chunk(4, dim=-1)
                c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
                h = torch.sigmoid(o) * torch.tanh(c)
                outs.append(h)
            x = torch.stack(outs, dim=1).reshape(bsz, steps, k * hsz)
            h_last.append(h.reshape(bsz, k * hsz))
            c_last.append(c.reshape(bsz, k * hsz))
        return x, (torch.stack(h_last), torch.stack(c_last))


WIDE_TYPES = {
    nn.Conv2d: WideConv2d,
    nn.Linear: WideLinear,
    nn.BatchNorm1d: WideBatchNorm,
    nn.BatchNorm2d: WideBatchNorm,
    nn.GroupNorm: WideGroupNorm,
    nn.Embedding: WideEmbedding,
    nn.LSTM: WideLSTM,
}


def unsupported_reason(model: nn.Module) -> str | None:
    """Why a model cannot be run wide, or None when it can."""
    for name, mod in model.named_modules():
        own = list(mod.named_parameters(recurse=False)) + list(mod.named_buffers(recurse=False))
        if type(mod) in WIDE_TYPES:
            if isinstance(mod, nn.Embedding) and (
                mod.padding_idx is not None or mod.max_norm is not None
            ):
                return f"{name}: Embedding with padding_idx/max_norm"
            continue
        if own:
            held = ", ".join(f"{name + '.' if name else ''}{n}" for n, _ in own)
            return (
                f"{name or 'the model'} ({type(mod).__name__}) holds {held} "
                "outside a supported leaf layer "
                f"({', '.join(t.__name__ for t in WIDE_TYPES)})"
            )
        if not list(mod.children()) and not isinstance(mod, PARAMETER_FREE):
            return f"{name} ({type(mod).__name__}) is not a known parameter-free layer"
    return None


class WideModel:
    """Run K clients' copies of `model` as one network: `out = wide(stacked_state, x_stacked)`."""

    def __init__(self, model: nn.Module):
        reason = unsupported_reason(model)
        if reason:
            raise NotImplementedError(reason)
        self.slots = _Slots()

        def widen(name, mod):
            if type(mod) in WIDE_TYPES:
                return WIDE_TYPES[type(mod)](self.slots, name + "." if name else "", mod)
            return None

        self.net = engine_copy(model, widen)
        for _p in self.net.parameters():
            raise AssertionError("wide model still owns parameters")  # every one was replaced

    # Grouped convolutions and pooling over many channels run faster in channels_last layout on a
    # CPU (oneDNN), and cuDNN prefers it on recent GPUs.
    channels_last = True

    def __call__(
        self, tensors: dict[str, torch.Tensor], x: torch.Tensor, k: int, train: bool = True
    ):
        """x: [K, B, ...] per-client inputs; returns per-client outputs [K, B, classes]."""
        return self.forward_batch_major(tensors, x.transpose(0, 1), k, train).transpose(0, 1)

    def forward_batch_major(
        self, tensors: dict[str, torch.Tensor], xb: torch.Tensor, k: int, train: bool = True
    ) -> torch.Tensor:
        """xb: [B, K, ...] (sample-major, as gathered by x[idx.T]); returns [B, K, classes].

        The training loop uses this layout because stacking along the channel dimension is then a
        free reshape and the loss needs no transposed copy."""
        self.slots.tensors, self.slots.k = tensors, k
        if self.net.training != train:  # .train() walks every module: only when the mode changes
            self.net.train(train)
        b = xb.shape[0]
        inp = xb.reshape(b, k * xb.shape[2], *xb.shape[3:])
        if self.channels_last and inp.dim() == 4 and inp.is_floating_point():
            inp = inp.contiguous(memory_format=torch.channels_last)
        try:
            out = self.net(inp)
        finally:
            self.slots.tensors = {}
        return out.reshape(b, k, -1)


def cross_entropy_batch_major(logits, y):
    """logits [B, K, C], y [B, K] class indices or [B, K, C] probabilities (soft labels)
    -> per-client mean loss [K] and per-client loss sum [K]."""
    b, k = y.shape[:2]
    target = y.reshape(b * k, -1) if y.is_floating_point() else y.reshape(-1)
    per = functional.cross_entropy(logits.reshape(b * k, -1), target, reduction="none").view(b, k)
    return per.mean(0), per.detach().sum(0)


_WIDE_MODELS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def wide_model(model: nn.Module) -> WideModel:
    """The wide version of `model`, built once per model object and structure (a model whose
    layers change is rebuilt): building it copies the whole module tree, which is worth doing
    once per run, not once per round."""
    return per_model(_WIDE_MODELS, model, WideModel)


def compile_settings(device: torch.device) -> dict:
    """torch.compile arguments of the "compiled" backend: CUDA graphs ("reduce-overhead") on a
    GPU, where per-kernel launch cost dominates small models; $FLKIT_COMPILE_BACKEND picks the
    compiler ("inductor" by default; "aot_eager" traces without generating code, which the tests
    use to keep compile time small)."""
    opts = {"backend": os.environ.get("FLKIT_COMPILE_BACKEND", "inductor"), "dynamic": False}
    if device.type == "cuda" and opts["backend"] == "inductor":
        opts["mode"] = "reduce-overhead"
    return opts


def wide_loss(wide, tensors, xb, yb, k, train):
    out = wide.forward_batch_major(tensors, xb, k, train=train)
    return cross_entropy_batch_major(out, yb)


class CompiledLoss:
    """`wide_loss` under torch.compile, kept on the wide model so it compiles once; the first
    failure (no compiler, an unsupported op) warns and switches to the eager function for good."""

    def __init__(self, wide: WideModel, device: torch.device):
        self.wide, self.failed = wide, None
        self.fn = torch.compile(wide_loss, **compile_settings(device))

    def __call__(self, *args):
        if self.failed is None:
            try:
                return self.fn(self.wide, *args)
            except Exception as e:  # noqa: BLE001 - any compiler failure means: run eagerly
                self.failed = f"{type(e).__name__}: {e}"
                warnings.warn(
                    f"backend='compiled' could not compile the wide step ({self.failed}); "
                    "running it eagerly (backend 'wide')",
                    RuntimeWarning,
                    stacklevel=3,
                )
        return wide_loss(self.wide, *args)


def compiled_loss(wide: WideModel, device: torch.device) -> CompiledLoss:
    fn = getattr(wide, "compiled_loss", None)
    if fn is None:
        fn = wide.compiled_loss = CompiledLoss(wide, device)
    return fn
