"""Checked coding exercises: write a piece of the Transformer, get told whether
it is right and, if not, what is most likely wrong.

Every checker is called with the reader's function, runs it on random,
edge-case and adversarial inputs, compares with the package's own
implementation, prints one line (a pass, or one specific hint naming the most
likely mistake) and returns True or False. It never raises: an exception in
the reader's code is reported as a hint with its message. A function that
still raises ``NotImplementedError`` gets "Not implemented yet". Checking
uses a private random generator, so it does not move the notebook's seed.

Usage in a chapter (a stub cell the reader fills in, then the check)::

    from minitransformer.exercises import check_causal_mask

    def causal_mask(length):
        raise NotImplementedError  # your code here

    check_causal_mask(causal_mask)

The checkers and the signature the reader's ``fn`` must have (bool masks
mean True = may attend everywhere in this book):

=====================================  ==========================================================
checker                                reader's function
=====================================  ==========================================================
``check_scaled_dot_product_attention`` ``fn(q, k, v, mask=None) -> (output, weights)``;
                                       q ``(..., Lq, d_k)``, k ``(..., Lk, d_k)``,
                                       v ``(..., Lk, d_v)``, bool mask broadcastable to
                                       ``(..., Lq, Lk)``; output ``(..., Lq, d_v)``, weights
                                       ``(..., Lq, Lk)``. Fully masked rows: zeros or uniform
                                       accepted, NaN not.
``check_masked_softmax``               ``fn(scores, mask) -> probs``; scores ``(..., L)``, bool
                                       mask broadcastable to it (True = keep); softmax over the
                                       last axis, masked entries 0, fully masked rows all 0.
``check_causal_mask``                  ``fn(length) -> mask``, bool ``(L, L)``, True on and
                                       below the diagonal.
``check_padding_mask``                 ``fn(tokens, pad_id) -> mask``; tokens ``(B, L)`` int64;
                                       bool ``(B, 1, 1, L)``, True where not padding.
``check_split_heads``                  ``fn(x, num_heads) -> heads``; ``(B, L, D)`` →
                                       ``(B, H, L, D // H)``, head h = features
                                       ``h*Dh .. (h+1)*Dh - 1``.
``check_merge_heads``                  ``fn(heads) -> x``; ``(B, H, L, Dh)`` → ``(B, L, H*Dh)``.
``check_layer_norm``                   ``fn(x, weight, bias, eps=1e-5) -> y``; x ``(..., D)``,
                                       weight and bias ``(D,)``; biased variance over the last
                                       axis.
``check_feed_forward``                 ``fn(x, w1, b1, w2, b2) -> y``; x ``(..., D)``, w1
                                       ``(F, D)``, b1 ``(F,)``, w2 ``(D, F)``, b2 ``(D,)`` (as
                                       ``nn.Linear`` stores them); relu(x w1ᵀ + b1) w2ᵀ + b2.
``check_sinusoidal_encoding``          ``fn(max_len, d_model) -> table`` ``(max_len, d_model)``;
                                       sin in even columns, cos in odd columns.
``check_label_smoothing_loss``         ``fn(logits, target, smoothing=0.1, pad_id=0) -> loss``;
                                       logits ``(B, T, V)``, target ``(B, T)``; 0-dim mean over
                                       non-pad tokens of (1-ε)·nll + ε·mean_v(−log p_v)
                                       (PyTorch's label_smoothing convention).
``check_greedy_step``                  ``fn(model, src, prefix, bos_id=1, eos_id=2) -> next_ids``;
                                       src ``(B, S)``, prefix ``(B, t)`` starting with BOS;
                                       ``(B,)`` int64 argmax at the last position, source
                                       padding masked, BOS/PAD never chosen, EOS again for
                                       finished rows.
=====================================  ==========================================================

Each checker's docstring lists the inputs it tries and the mistakes it
recognises.
"""

from .attention import check_masked_softmax, check_scaled_dot_product_attention
from .decoding import check_greedy_step
from .feedforward import check_feed_forward
from .heads import check_merge_heads, check_split_heads
from .layernorm import check_layer_norm
from .loss import check_label_smoothing_loss
from .masks import check_causal_mask, check_padding_mask
from .positional import check_sinusoidal_encoding

__all__ = [
    "check_scaled_dot_product_attention",
    "check_masked_softmax",
    "check_causal_mask",
    "check_padding_mask",
    "check_split_heads",
    "check_merge_heads",
    "check_layer_norm",
    "check_feed_forward",
    "check_sinusoidal_encoding",
    "check_label_smoothing_loss",
    "check_greedy_step",
]
