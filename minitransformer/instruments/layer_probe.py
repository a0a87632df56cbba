"""Linear probes: what can a linear classifier read off each encoder layer?

A probe (Alain & Bengio 2017; Belinkov et al. 2017 for translation models)
is a small classifier trained on a frozen model's hidden states to predict
some property, such as the token at a position or a property of the whole
sentence. If a *linear* probe predicts it well from a layer's states, the
information is there in an easily readable form; if it fails, the
information may still be present in a form a linear map cannot read. The
accuracy is measured on sentences the probe was not trained on.

- :func:`encoder_states`: the residual stream after the embedding (layer 0)
  and after each encoder layer, ``(B, S, D)`` each;
- :func:`train_linear_probe`: multinomial logistic regression on
  standardised features, trained with L-BFGS;
- :class:`LinearProbe`: the fitted classifier (``predict``, ``accuracy``).

Shape letters: ``B`` sentences, ``S`` source length, ``D`` model width,
``N`` examples, ``C`` classes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

__all__ = ["encoder_states", "train_linear_probe", "LinearProbe"]


@torch.no_grad()
def encoder_states(model: nn.Module, src: Tensor) -> list[Tensor]:
    """The encoder's states for source ids ``src`` ``(B, S)``: index 0 is the
    input of the first layer (scaled embeddings plus positions), index ``i``
    the output of encoder layer ``i`` (the residual stream, before the
    final LayerNorm of a pre-LN stack). Each ``(B, S, D)``; padded positions
    hold whatever the layers computed there (mask them out yourself)."""
    states: list[Tensor] = []
    hooks = [layer.register_forward_hook(lambda _m, _i, out: states.append(out.detach()))
             for layer in model.encoder.layers]
    was_training = model.training
    model.eval()
    try:
        embedded = model.src_pos(model.src_embed(src) * math.sqrt(model.config.d_model))
        model.encoder(embedded, model.src_mask(src))
    finally:
        for h in hooks:
            h.remove()
        model.train(was_training)
    return [embedded.detach(), *states]


@dataclass
class LinearProbe:
    """A fitted linear classifier on standardised features."""

    mean: Tensor  #: ``(D,)`` feature means of the training examples
    std: Tensor  #: ``(D,)`` their standard deviations
    weight: Tensor  #: ``(C, D)``
    bias: Tensor  #: ``(C,)``

    def logits(self, features: Tensor) -> Tensor:
        """``(N, D)`` → ``(N, C)``."""
        return ((features - self.mean) / self.std) @ self.weight.T + self.bias

    def predict(self, features: Tensor) -> Tensor:
        """``(N, D)`` → predicted classes ``(N,)``."""
        return self.logits(features).argmax(-1)

    def accuracy(self, features: Tensor, labels: Tensor) -> float:
        """Fraction of ``(N, D)`` examples whose class ``(N,)`` is predicted."""
        return float((self.predict(features) == labels).float().mean())


def train_linear_probe(
    features: Tensor,
    labels: Tensor,
    num_classes: int | None = None,
    weight_decay: float = 1e-3,
    max_iter: int = 200,
) -> LinearProbe:
    """Multinomial logistic regression of ``labels`` ``(N,)`` on ``features``
    ``(N, D)``, standardised with the training examples' mean and standard
    deviation, with an L2 penalty ``weight_decay · ‖W‖²``, fitted with L-BFGS
    (deterministic: the weights start at zero)."""
    if features.dim() != 2 or labels.shape != features.shape[:1]:
        raise ValueError(
            f"train_linear_probe: expected features (N, D) and labels (N,), got "
            f"{tuple(features.shape)} and {tuple(labels.shape)}"
        )
    x = features.detach().float()
    y = labels.detach().long()
    c = int(num_classes if num_classes is not None else int(y.max()) + 1)
    mean, std = x.mean(0), x.std(0).clamp_min(1e-6)
    x = (x - mean) / std
    weight = torch.zeros(c, x.shape[1], requires_grad=True)
    bias = torch.zeros(c, requires_grad=True)
    optimizer = torch.optim.LBFGS([weight, bias], max_iter=max_iter, line_search_fn="strong_wolfe")

    def closure() -> Tensor:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(x @ weight.T + bias, y)
        loss = loss + weight_decay * weight.pow(2).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        optimizer.step(closure)
    return LinearProbe(mean, std, weight.detach(), bias.detach())
