"""Checked coding exercises: write a piece of the Transformer, get told whether
it is right and, if not, what is most likely wrong.

Every checker is called with the reader's function, runs it on random,
edge-case and adversarial inputs, compares with an independent reference
(the package's own implementation, or the paper's closed form), prints one
line (a pass, or one specific hint naming the most likely mistake) and
returns True or False. It never raises: an exception in the reader's code is
reported as a hint quoting the reader's line that raised (a function whose
parameters do not fit is told its expected signature instead). A function
that still raises ``NotImplementedError`` gets "Not implemented yet".
Whatever the function does, the verdict comes: a call that calls
``sys.exit``, returns a meta tensor or a huge (say expanded 10⁶ × 10⁶)
tensor, or runs past a time limit (20 s a call; "did not finish within
20 s") is reported like any other mistake (:mod:`~minitransformer.exercises._guard`).
Checking uses a private random generator and puts back the random states
(torch, :mod:`random`, NumPy), the default dtype, grad mode and thread count
afterwards, so the reader's function cannot move the notebook's seed or
settings either; it leaves any model it is given as it was.

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
``check_multi_head_attention``         ``fn(query, key, value, w_q, w_k, w_v, w_o, num_heads,
                                       mask=None) -> (output, weights)``; query ``(B, Lq, D)``,
                                       key/value ``(B, Lk, D)``, weights ``(D, D)`` as
                                       ``nn.Linear`` stores them (``x @ w.T``, no biases), bool
                                       mask broadcastable to ``(B, H, Lq, Lk)``; output
                                       ``(B, Lq, D)``, per-head weights ``(B, H, Lq, Lk)``.
``check_kv_cache_step``                ``fn(x, cache_k, cache_v, w_q, w_k, w_v, w_o, num_heads)
                                       -> (output, cache_k, cache_v)``; x ``(B, 1, D)`` the new
                                       position, caches ``(B, H, t, Dh)`` (projected, split);
                                       output ``(B, 1, D)``, caches ``(B, H, t + 1, Dh)``: one
                                       decoding step of self-attention, equal to recomputing
                                       the last position.
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
``check_warmup_schedule``              ``fn(step, d_model, warmup_steps=4000) -> lr``, a number:
                                       d_model^-0.5 · min(step^-0.5, step · warmup^-1.5),
                                       steps from 1.
``check_greedy_step``                  ``fn(model, src, prefix, bos_id=1, eos_id=2) -> next_ids``;
                                       src ``(B, S)``, prefix ``(B, t)`` starting with BOS;
                                       ``(B,)`` int64 argmax at the last position, source
                                       padding masked, BOS/PAD never chosen, EOS again for
                                       finished rows.
``check_top_p_filter``                 ``fn(logits, top_p) -> probs``; logits ``(B, V)``;
                                       ``(B, V)`` probabilities: the smallest set of most
                                       probable tokens whose probabilities sum to at least
                                       ``top_p`` (the top token always in), renormalised,
                                       0 elsewhere.
``check_next_token_loss``              ``fn(logits, tokens, pad_id=0) -> loss``; logits
                                       ``(B, L, V)`` of a language model fed tokens ``(B, L)``;
                                       0-dim mean cross-entropy of ``logits[:, :-1]`` against
                                       ``tokens[:, 1:]`` over the targets that are not
                                       ``pad_id``.
``check_bert_masking``                 ``fn(tokens, mask_id, vocab_size, special_ids, p=0.15)
                                       -> (inputs, labels)``; tokens ``(B, L)``; BERT's
                                       80/10/10 rule on the ordinary tokens chosen with
                                       probability ``p``, labels ``-100`` where not chosen.
                                       Random: judged by its statistics on large batches.
``check_rms_norm``                     ``fn(x, weight, eps=1e-5) -> y``; x ``(..., D)``, weight
                                       ``(D,)``; x / √(mean(x²) + eps) · weight over the last
                                       axis (no mean subtracted, no bias).
``check_rope``                         ``fn(x, positions, base=10000.0) -> rotated``; x
                                       ``(B, H, L, Dh)``, positions ``(L,)`` int64; features
                                       ``i`` and ``i + Dh/2`` (the halves) turned by
                                       ``positions[l] · base^(−2i/Dh)`` radians.
``check_expand_kv_heads``              ``fn(kv, num_heads) -> expanded``; ``(B, Hkv, L, Dh)`` →
                                       ``(B, H, L, Dh)``, head ``h`` = key/value head
                                       ``h // (H / Hkv)`` (``repeat_interleave``, as
                                       ``enable_gqa`` groups them).
``check_online_softmax_merge``         ``fn(m1, l1, o1, m2, l2, o2) -> (m, l, o)``; per block
                                       of keys: max score ``(..., 1)``, Σ exp(s − m)
                                       ``(..., 1)``, unnormalised Σ exp(s − m)·v ``(..., Dv)``;
                                       the same for their union (no NaN for masked rows).
=====================================  ==========================================================

Each checker's docstring lists the inputs it tries and the mistakes it
recognises.

Languages
---------
Verdicts are printed in the language set with :func:`set_language` (default
``"en"``), or in the one passed as ``lang=`` to a single checker::

    from minitransformer.exercises import set_language
    set_language("zh")  # every later verdict in Chinese, where a translation exists

The checking logic holds no text: every message is looked up by id in
``minitransformer/exercises/locales/<code>.py``, whose ``MESSAGES`` dict maps
ids such as ``"sdpa.hint.no_scale"`` to text with ``str.format`` fields
(``{shape}``). English (``en.py``) and Chinese (``zh.py``) are complete.
**To add a language**, add one module there, e.g. ``fr.py``, defining
``MESSAGES`` with the same ids as ``en.py`` and the same ``{fields}`` in each
text; nothing else changes. An id the new module lacks is printed in
English, and the tests check that every id it has exists in English with the
same fields (and, for the complete languages, that every English id is
translated). Verdicts are wrapped to 76 columns (the book's code column) at spaces and, in text
written without spaces such as Chinese, between characters, a Chinese
character counting two columns (:mod:`~minitransformer.exercises._text`), so
messages need no line breaks of their own.
"""

from ._messages import available_languages, get_language, set_language
from .attention import check_masked_softmax, check_scaled_dot_product_attention
from .bert_masking import check_bert_masking
from .decoding import check_greedy_step
from .feedforward import check_feed_forward
from .gqa import check_expand_kv_heads
from .heads import check_merge_heads, check_split_heads
from .kv_cache import check_kv_cache_step
from .layernorm import check_layer_norm
from .lm_loss import check_next_token_loss
from .loss import check_label_smoothing_loss
from .masks import check_causal_mask, check_padding_mask
from .multihead import check_multi_head_attention
from .online_softmax import check_online_softmax_merge
from .positional import check_sinusoidal_encoding
from .rmsnorm import check_rms_norm
from .rope import check_rope
from .sampling import check_top_p_filter
from .schedule import check_warmup_schedule

__all__ = [
    "check_scaled_dot_product_attention",
    "check_masked_softmax",
    "check_causal_mask",
    "check_padding_mask",
    "check_split_heads",
    "check_merge_heads",
    "check_multi_head_attention",
    "check_kv_cache_step",
    "check_layer_norm",
    "check_feed_forward",
    "check_sinusoidal_encoding",
    "check_label_smoothing_loss",
    "check_warmup_schedule",
    "check_greedy_step",
    "check_top_p_filter",
    "check_next_token_loss",
    "check_bert_masking",
    "check_rms_norm",
    "check_rope",
    "check_expand_kv_heads",
    "check_online_softmax_merge",
    "set_language",
    "get_language",
    "available_languages",
]
