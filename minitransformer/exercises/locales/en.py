"""English messages of the exercise checkers (the complete catalogue).

Ids are ``area.kind.name``; ``{fields}`` are filled by ``str.format`` (write
``{{`` for a literal brace). Hints speak to the reader ("you ...") and say
what to change.
"""

MESSAGES: dict[str, str] = {
    # ------------------------------------------------------------------ harness
    "harness.passed": "correct on all {count} tests.",
    "harness.tested": "Tested: {labels}.",
    "harness.note": "Note: {note}",
    "harness.failed_on": "(failed on: {label})",
    "harness.not_callable": "expected a function, got {got}.",
    "harness.not_implemented": (
        "Not implemented yet: replace 'raise NotImplementedError' with your code, run the "
        "cell, then run the check again."
    ),
    "harness.signature": (
        "your function cannot be called as {signature} ({error}): give it exactly these "
        "parameters."
    ),
    "harness.raised": "your function raised {error}",
    "harness.raised_at": "your line '{line}' raised {error}",
    "harness.mutated": (
        "your function changed one of its input tensors in place (a method ending in _, "
        "like masked_fill_ or div_, or an indexed assignment). Work on new tensors so the "
        "caller's inputs stay as they were."
    ),
    "harness.model_changed": (
        "your function changed the model's weights or buffers: leave the model as it is, and "
        "change a copy of what it returns (the logits) instead."
    ),
    "harness.model_mode": (
        "your function switched the model to training mode (model.train() turns dropout on): "
        "leave it in eval mode."
    ),
    "harness.random": (
        "your function returns different results for the same input: is dropout on? "
        "F.dropout(x, p) drops at random unless you pass training=False; leave dropout out "
        "here."
    ),
    "harness.timeout": (
        "your function did not finish within {seconds} s: is there a loop that never ends, or "
        "a wait for something that never comes?"
    ),
    "harness.exit": (
        "your function called sys.exit() (or exit()), which would end the program: return "
        "the result instead."
    ),
    "harness.huge": (
        "your result holds a tensor of shape {shape}, {numel} elements (more than {limit}): "
        "far larger than any expected result, so it is not compared. Check its shape (an "
        "expand() or a broadcast too many?)."
    ),
    "harness.device": (
        "your result is a tensor on the {device} device; the inputs are ordinary CPU tensors: "
        "compute on them, without .to(...) or device=... (a meta tensor holds no values to "
        "check)."
    ),
    "harness.uncomparable": (
        "your result could not be compared with the expected one ({error}): return tensors "
        "or numbers of the form the exercise asks for."
    ),
    "harness.wrong_values": "wrong values: {where}.",
    "harness.worst": "largest difference {diff} at index {index}: expected {expected}, got {got}",
    "harness.worst_nan": "your result has NaN, e.g. at index {index} (expected {expected})",
    "harness.in_item": "{what} (in item {index} of the returned tuple)",
    "harness.expected_got": "expected {expected}, got {got}",
    "harness.list_names": ", ",  # between the names of returned items: "the output, the weights"
    "harness.list_cases": "; ",  # between the descriptions of the tests after "Tested:"
    # ------------------------------------------------------------------ describe
    "describe.tensor": "a tensor of shape {shape} and dtype {dtype}",
    "describe.sequence": "a {kind} of {n} items",
    "describe.other": "a {kind}",
    "describe.none": "None (is a 'return' missing?)",
    # ------------------------------------------------------------------ structure
    "struct.tuple": "return a tuple ({names}); your function returned {got}.",
    "struct.not_tensor": "{name}: expected a torch.Tensor, got {got}.",
    "struct.shape": "{name}: shape {got}, expected {expected}.",
    "struct.mask_dtype": "{name}: dtype {got}; a mask must be torch.bool (True = may attend).",
    "struct.bool": "{name}: dtype torch.bool, expected {expected}.",
    "struct.float": "{name}: dtype {got}, expected a floating-point tensor.",
    "struct.int": "{name}: dtype {got}, expected integer ids ({expected}).",
    "struct.dtype": (
        "{name}: dtype {got}, expected {expected}, the dtype of the inputs (don't hard-code "
        "float32 or float64)."
    ),
    "struct.number": "{name}: expected a number, got {got}.",
    # ------------------------------------------------------------------ names of results
    "name.result": "your result",
    "name.output": "the output",
    "name.weights": "the weights",
    "name.probabilities": "the probabilities",
    "name.mask": "the mask",
    "name.heads": "the heads",
    "name.merged": "the merged tensor",
    "name.y": "y",
    "name.table": "the table",
    "name.loss": "the loss",
    "name.next_tokens": "the next tokens",
    "name.cache_k": "the key cache",
    "name.cache_v": "the value cache",
    "name.lr": "the learning rate",
    "name.rotated": "the rotated tensor",
    "name.expanded": "the expanded keys or values",
    "name.max": "m",
    "name.sum": "l",
    "name.acc": "o",
    # ------------------------------------------------------------------ common errors
    "err.keyword": "'{func}' has no argument '{arg}': check its parameters with help({func}).",
    "err.ddof": "PyTorch has no ddof: use x.var(dim=-1, unbiased=False) (or correction=0).",
    "err.label_smoothing": "F.cross_entropy's keyword is label_smoothing=, not smoothing=.",
    "err.softmax_dim": "softmax needs the axis to normalise over: pass dim=-1.",
    "err.float_size": "a size is a float (D / H gives one): use integer division, D // H.",
    "err.max_relu": (
        "torch.max does not compare a number with a tensor: for ReLU use torch.relu(h) (or "
        "h.clamp(min=0))."
    ),
    "err.view_contiguous": (
        "after a transpose the tensor is not contiguous, so .view() fails: use .reshape(...) "
        "or .contiguous().view(...)."
    ),
    # ------------------------------------------------------------------ scaled dot-product
    "sdpa.case.plain": "q (2, 5, 8), k and v (2, 6, 8), no mask",
    "sdpa.case.heads": "heads: q (2, 3, 4, 8), k (2, 3, 6, 8), v (2, 3, 6, 5), d_v != d_k, no mask",
    "sdpa.case.length1": "length 1: q, k, v of shape (3, 1, 4)",
    "sdpa.case.causal": "causal mask (5, 5) broadcast over a batch of 2, d_k 4",
    "sdpa.case.padding": "padding mask (2, 1, 1, 6) broadcast over 2 heads and 3 queries",
    "sdpa.case.dead_row": "a fully masked row: mask (3, 4) whose second row is all False",
    "sdpa.case.float64": "float64 inputs (1, 4, 6)",
    "sdpa.case.large": "large scores: q, k entries of size ~30 (|q·k/√d_k| up to ~1000)",
    "sdpa.hint.swapped": "you returned (weights, output); return (output, weights) in that order.",
    "sdpa.hint.no_scale": (
        "the scores are not scaled: divide q @ kᵀ by √d_k = math.sqrt(q.shape[-1]) before "
        "the softmax."
    ),
    "sdpa.hint.scale_d": (
        "you divided the scores by d_k; divide by its square root √d_k (the standard "
        "deviation of q·k)."
    ),
    "sdpa.hint.scale_mul": "you multiplied the scores by √d_k; divide by it.",
    "sdpa.hint.scale_dv": (
        "you scaled by the square root of v's width; use √d_k, with d_k the width of q and "
        "k (q.shape[-1])."
    ),
    "sdpa.hint.post_scale": (
        "you divided the weights by √d_k after the softmax; scale the scores before it."
    ),
    "sdpa.hint.implicit_dim": (
        "your softmax has no dim=, so PyTorch picks an axis (here not the last one): pass "
        "dim=-1 to normalise over the keys."
    ),
    "sdpa.hint.axis": (
        "softmax over the wrong axis: each query's weights must sum to 1 over the keys, the "
        "last axis of the (..., Lq, Lk) scores: softmax(dim=-1)."
    ),
    "sdpa.hint.no_mask": "the mask is ignored: blocked keys still get weight. Apply it to the scores.",
    "sdpa.hint.inverted": (
        "the mask is inverted: True means *may attend*, so fill the scores where the mask is "
        "False: scores.masked_fill(~mask, ...). (nn.MultiheadAttention uses the opposite "
        "convention.)"
    ),
    "sdpa.hint.after": (
        "you applied the mask after the softmax, so rows no longer sum to 1: fill the blocked "
        "scores with -inf before the softmax instead."
    ),
    "sdpa.hint.fill0": (
        "you filled the blocked scores with 0, but exp(0) = 1, so blocked keys still get "
        "weight: fill them with -inf (or torch.finfo(scores.dtype).min)."
    ),
    "sdpa.hint.nan": (
        "a query whose keys are all masked gets NaN (softmax of a row of -inf is 0/0): fill "
        "with torch.finfo(dtype).min instead, or set such rows to zero after the softmax."
    ),
    "sdpa.hint.overflow": (
        "your softmax overflows on large scores (exp(1000) is inf, inf/inf is NaN): subtract "
        "each row's maximum before exp, or use torch.softmax, which does."
    ),
    "sdpa.err.mask_shape": (
        "after your change the mask no longer broadcasts against the scores: the mask you "
        "are given, {mask}, already broadcasts to the scores {scores}, so use it as it is, "
        "without unsqueeze or view."
    ),
    "sdpa.err.matmul": (
        "a shape mismatch in a matrix product: compute q @ k.transpose(-2, -1) (k.T reverses "
        "*all* axes of a batched tensor), then weights @ v."
    ),
    "sdpa.note.uniform": (
        "your fully masked row is uniform (1/Lk each), as a large finite fill gives; the "
        "package returns zeros there. Both are accepted: such a query has nothing to attend "
        "to, and padding queries are ignored by the loss."
    ),
    "sdpa.fallback": "Compare with softmax(q @ k.transpose(-2, -1) / math.sqrt(d_k)) @ v, step by step.",
    # ------------------------------------------------------------------ masked softmax
    "ms.case.random": "scores (3, 5), random mask (3, 5)",
    "ms.case.padding": "scores (2, 2, 4, 4) with a padding mask (2, 1, 1, 4)",
    "ms.case.causal": "causal mask (6, 6) on scores (2, 6, 6)",
    "ms.case.length1": "length 1: scores (4, 1), mask all True",
    "ms.case.large": "large scores (±20000) and mask (3, 6): a row's largest score masked, a row whose kept scores are all below -10000",
    "ms.case.dead_row": "a fully masked row: mask (2, 3) whose second row is all False",
    "ms.case.float16": "float16 scores (2, 5)",
    "ms.hint.fill0": (
        "you filled the masked scores with 0, but exp(0) = 1, so masked entries still get "
        "probability: fill them with -inf (or torch.finfo(scores.dtype).min)."
    ),
    "ms.hint.after": (
        "you applied the mask after the softmax, so the kept entries no longer sum to 1: fill "
        "the masked scores with -inf before the softmax."
    ),
    "ms.hint.inverted": (
        "the mask is inverted: True means *keep*, so fill where the mask is False: "
        "scores.masked_fill(~mask, float('-inf'))."
    ),
    "ms.hint.no_mask": "the mask is ignored: masked entries still get probability.",
    "ms.hint.implicit_dim": (
        "your softmax has no dim=, so PyTorch picks an axis (here not the last one): pass "
        "dim=-1."
    ),
    "ms.hint.axis": "softmax over the wrong axis: normalise over the last axis (dim=-1).",
    "ms.hint.weak_fill": (
        "your fill value is not negative enough: here the scores reach about ±20000, so "
        "entries filled with -10000 still win probability. Use float('-inf') or "
        "torch.finfo(scores.dtype).min."
    ),
    "ms.hint.nan": (
        "a fully masked row comes out as NaN (softmax of only -inf is 0/0): set such rows to "
        "zero, e.g. probs.nan_to_num(0.0)."
    ),
    "ms.hint.overflow": (
        "you exponentiated the raw scores: exp(20000) is inf, and inf/inf is NaN. Fill the "
        "masked scores with -inf and use torch.softmax, which subtracts each row's maximum."
    ),
    "ms.hint.renormalise": (
        "you masked after the softmax and renormalised: when a masked entry held all the "
        "mass, the kept ones underflow to 0 and you divide 0 by 0. Fill the masked scores "
        "with -inf before the softmax instead."
    ),
    "ms.hint.uniform": (
        "a fully masked row must be all zeros; yours spreads 1/L over masked entries (what a "
        "finite fill such as -1e9 gives): zero the rows where no entry is kept."
    ),
    "ms.err.half_fill": (
        "your fill value does not fit in float16 (largest magnitude 65504; -1e9 overflows): "
        "use float('-inf') or torch.finfo(scores.dtype).min."
    ),
    "ms.err.mask_shape": (
        "after your change the mask no longer broadcasts against the scores: use the mask as "
        "it is given, without adding axes."
    ),
    "ms.fallback": (
        "Fill the scores where mask is False with -inf, softmax over dim=-1, then zero the "
        "fully masked rows."
    ),
    # ------------------------------------------------------------------ causal mask
    "causal.case.length": "length {n}",
    "causal.hint.inverted": (
        "the mask is inverted: True must mean *may attend*, on and below the diagonal (query "
        "i sees keys j <= i). True for the future is nn.Transformer's convention (True = "
        "blocked)."
    ),
    "causal.hint.strict": (
        "the diagonal is False: a position may attend to itself (j <= i, not j < i). Use "
        "torch.tril(..., diagonal=0)."
    ),
    "causal.hint.future": (
        "your mask lets each position see the next one (diagonal=1): use torch.tril with "
        "diagonal=0."
    ),
    "causal.hint.upper": (
        "you kept the upper triangle: rows are queries and columns keys, so query i may see "
        "columns 0..i, the lower triangle: torch.ones(L, L, dtype=torch.bool).tril()."
    ),
    "causal.hint.nothing": "your mask blocks nothing: block every key j > i (the upper triangle).",
    "causal.hint.additive": (
        "you returned the additive float form (0 where allowed, a large negative number where "
        "blocked); return the bool mask, True = may attend. "
        "minitransformer.to_additive_mask converts one into the other."
    ),
    "causal.hint.numbers": (
        "you returned numbers (0 and 1); return a bool tensor (dtype=torch.bool), True = may "
        "attend. A float mask would be *added* to the scores."
    ),
    "causal.hint.batched": "you added a batch axis: return the (L, L) mask; it broadcasts by itself.",
    "causal.fallback": "Row i (a query) must be True in columns 0..i and False after.",
    # ------------------------------------------------------------------ padding mask
    "padding.case.end": "tokens (3, 7) padded with pad_id 0 at the end",
    "padding.case.pad5": "tokens (2, 6) with pad_id 5 (and real tokens 0 and 3)",
    "padding.case.length1": "length 1: tokens (2, 1) = [[7], [0]], pad_id 0",
    "padding.case.all_pad": "a row that is all padding: tokens (2, 3), pad_id 1",
    "padding.hint.inverted": (
        "the mask is inverted: True must mean *may attend*, a real token (tokens != pad_id). "
        "True at padding is nn.MultiheadAttention's key_padding_mask convention."
    ),
    "padding.hint.flat": (
        "your mask has shape (B, L); give it two singleton axes, (B, 1, 1, L), so it "
        "broadcasts over the heads and queries: (tokens != pad_id)[:, None, None, :]."
    ),
    "padding.hint.three": (
        "your mask has shape (B, 1, L); add one more singleton axis, (B, 1, 1, L), to "
        "broadcast against (B, H, Lq, L) scores."
    ),
    "padding.hint.keys_last": (
        "the length axis is in the wrong place: padding hides *keys*, the last axis of the "
        "scores, so the mask is (B, 1, 1, L)."
    ),
    "padding.hint.square": (
        "you also masked the padding *queries*: the mask hides keys only, (B, 1, 1, L); "
        "outputs at padding positions are ignored later anyway."
    ),
    "padding.hint.pad0": (
        "you compared with 0 instead of the pad_id argument: here pad_id is 5, and 0 is an "
        "ordinary token."
    ),
    "padding.hint.greater": (
        "you kept only ids above pad_id, but ids below it are real tokens too: use tokens != "
        "pad_id."
    ),
    "padding.hint.numbers": "you returned numbers; return a bool tensor (True = real token).",
    "padding.hint.key_padding": (
        "you returned nn.MultiheadAttention's key_padding_mask, (B, L) with True at padding. "
        "Return the opposite, True = real token, shaped (B, 1, 1, L): "
        "(tokens != pad_id)[:, None, None, :]."
    ),
    "padding.fallback": "The mask is (tokens != pad_id)[:, None, None, :].",
    # ------------------------------------------------------------------ split / merge heads
    "split.case.plain": "x (2, 5, 12), 3 heads",
    "split.case.length1": "length 1: x (2, 1, 6), 2 heads",
    "split.case.one_head": "one head: x (3, 4, 8), 1 head",
    "split.case.width1": "head width 1: x (2, 3, 4), 4 heads",
    "split.case.float64": "x (1, 7, 10), 5 heads, float64",
    "split.hint.no_transpose": (
        "you returned (B, L, H, Dh): move the heads before the length with .transpose(1, 2)."
    ),
    "split.hint.direct": (
        "you reshaped (B, L, D) straight to (B, H, L, Dh), which mixes positions between "
        "heads: view as (B, L, H, Dh) first, then .transpose(1, 2)."
    ),
    "split.hint.strided": (
        "each head got every H-th feature instead of a contiguous slice: view the last axis "
        "as (H, Dh), in that order, not (Dh, H)."
    ),
    "split.hint.swapped": (
        "you made Dh heads of width H: split the last axis as (num_heads, D // num_heads). "
        "(torch.split takes the size of each piece, not their number; x.chunk(H, dim=-1) "
        "takes the number.)"
    ),
    "split.hint.reversed": (
        "your heads come in reverse order: head 0 must hold the *first* Dh features."
    ),
    "split.hint.last_two": (
        "you returned (B, H, Dh, L): the length comes before the head width; use "
        ".transpose(1, 2) (or permute(0, 2, 1, 3))."
    ),
    "split.fallback": "x.view(B, L, H, D // H).transpose(1, 2) is one right answer.",
    "merge.case.plain": "heads (2, 3, 5, 4) → (2, 5, 12)",
    "merge.case.length1": "length 1: heads (2, 2, 1, 3)",
    "merge.case.one_head": "one head: heads (3, 1, 4, 8)",
    "merge.case.width1": "head width 1: heads (2, 4, 3, 1)",
    "merge.case.float64": "heads (1, 5, 7, 2), float64",
    "merge.hint.direct": (
        "you reshaped (B, H, L, Dh) straight to (B, L, D), which mixes positions: first "
        ".transpose(1, 2) to (B, L, H, Dh), then .reshape(B, L, H * Dh)."
    ),
    "merge.hint.strided": (
        "you interleaved the heads' features: put each head's Dh features side by side, "
        "(B, L, H, Dh) → (B, L, H*Dh), not (B, L, Dh, H)."
    ),
    "merge.hint.reversed": "your heads come in reverse order: head 0's features go first.",
    "merge.hint.no_reshape": (
        "you returned (B, L, H, Dh): finish with .reshape(B, L, H * Dh) to join the heads."
    ),
    "merge.hint.cat_length": (
        "you concatenated the heads along the length: concatenate along the features, "
        "dim=-1."
    ),
    "merge.hint.summed": (
        "you added or averaged the heads: concatenate them, so each keeps its own Dh features."
    ),
    "merge.fallback": "heads.transpose(1, 2).reshape(B, L, H * Dh) is one right answer.",
    # ------------------------------------------------------------------ layer norm
    "ln.case.plain": "x (2, 3, 8), random weight and bias",
    "ln.case.odd": "odd width: x (4, 7)",
    "ln.case.four_axes": "four axes: x (2, 2, 3, 6)",
    "ln.case.constant": "a constant row: x (3, 6) whose second row is all 2.5",
    "ln.case.eps": "eps=0.5 with small features (x of size ~0.3)",
    "ln.case.width1": "width 1: x (3, 1)",
    "ln.case.large_mean": "a large mean: x (2, 4, 8) = 3000 + noise",
    "ln.case.float64": "float64: x (2, 5)",
    "ln.hint.unbiased": (
        "you used the unbiased variance (dividing by D − 1, torch.var's default); LayerNorm "
        "divides by D: x.var(dim=-1, keepdim=True, unbiased=False)."
    ),
    "ln.hint.eps_outside": (
        "you added ε outside the square root: use (x − mean) / √(Var + ε), not "
        "(x − mean) / (√Var + ε)."
    ),
    "ln.hint.no_eps": (
        "a constant row gives NaN: its variance is 0, so add eps inside the square root, "
        "√(Var + ε)."
    ),
    "ln.hint.eps_fixed": (
        "you ignored the eps argument (this test passes eps=0.5): use it instead of a "
        "hard-coded 1e-5."
    ),
    "ln.hint.axis_all": (
        "you took the statistics over the whole tensor: normalise each token over its own "
        "features, mean(dim=-1, keepdim=True)."
    ),
    "ln.hint.axis_len": (
        "you took the statistics over the sequence or the batch: use each token's own "
        "features, dim=-1."
    ),
    "ln.hint.swap": "you swapped weight and bias: y = x̂ · weight + bias.",
    "ln.hint.no_affine": "you did not apply weight and bias: finish with x̂ * weight + bias.",
    "ln.hint.naive_var": (
        "E[x²] − E[x]² loses precision when the mean is large (here about 3000): subtract the "
        "mean first, mean((x − mean)²), or use x.var(dim=-1, unbiased=False)."
    ),
    "ln.err.keepdim": (
        "a broadcasting error: keep the reduced axis with keepdim=True, so the mean and "
        "variance are (..., 1) and subtract from (..., D)."
    ),
    "ln.fallback": (
        "Compute mean and biased variance over dim=-1 (keepdim=True), then (x - mean) / "
        "torch.sqrt(var + eps) * weight + bias."
    ),
    # ------------------------------------------------------------------ feed-forward
    "ffn.case.plain": "x (2, 3, 4), d_ff 8",
    "ffn.case.square": "d_model = d_ff: x (2, 5, 6), d_ff 6",
    "ffn.case.one": "one position: x (1, 1, 3), d_ff 5",
    "ffn.case.no_batch": "no batch axis: x (7, 4), d_ff 16",
    "ffn.case.float64": "float64: x (2, 2, 4), d_ff 4",
    "ffn.hint.no_relu": (
        "there is no ReLU between the two layers, so they collapse into one linear map: apply "
        "torch.relu to the first layer's output."
    ),
    "ffn.hint.relu_out": (
        "you also applied a ReLU after the second layer: the FFN ends with the linear layer, "
        "so its outputs can be negative."
    ),
    "ffn.hint.relu_in": (
        "you applied the ReLU to the input: it goes between the layers, on x @ w1.T + b1."
    ),
    "ffn.hint.bias_after": "you added b1 after the ReLU: add it before, relu(x @ w1.T + b1).",
    "ffn.hint.gelu": "you used GELU; the paper's FFN (and this book's) uses ReLU.",
    "ffn.hint.other_act": "you used another activation; the paper's FFN uses ReLU, torch.relu.",
    "ffn.hint.no_bias": "a bias is missing: add b1 after w1 and b2 after w2.",
    "ffn.err.transpose": (
        "a shape error in a matrix product: nn.Linear stores w1 as (d_ff, d_model), so "
        "multiply by its transpose: x @ w1.T + b1."
    ),
    "ffn.err.transpose_w2": (
        "a shape error in the second matrix product: nn.Linear stores w2 as (d_model, d_ff), "
        "so multiply the hidden layer by its transpose: h @ w2.T + b2."
    ),
    "ffn.err.linear_transposed": (
        "F.linear(x, w, b) already computes x @ w.T + b: pass w1 and w2 as they are, without "
        ".T."
    ),
    "ffn.fallback": "Compute torch.relu(x @ w1.T + b1) @ w2.T + b2.",
    # ------------------------------------------------------------------ sinusoidal encoding
    "pe.case.sizes": "max_len {n}, d_model {d}",
    "pe.case.length1": "length 1: max_len 1, d_model 8",
    "pe.case.odd": "odd width: max_len 20, d_model 7",
    "pe.case.long": "a long table: max_len 200, d_model 64",
    "pe.hint.transposed": "the table is transposed: rows are positions, (max_len, d_model).",
    "pe.hint.halves": (
        "you put the sines in the first half and the cosines in the second: interleave them, "
        "pe[:, 0::2] = sin, pe[:, 1::2] = cos of the same frequency."
    ),
    "pe.hint.swapped": (
        "sine and cosine are swapped: even columns hold sin, odd columns cos, so row 0 reads "
        "0, 1, 0, 1, ..."
    ),
    "pe.hint.exp_j": (
        "each column has its own frequency: columns 2i and 2i+1 share 10000^(2i/d_model); "
        "use the even column's index for both."
    ),
    "pe.hint.exp_2j": (
        "the exponent is doubled: for columns 2i and 2i+1 it is 2i/d_model, with 2i from "
        "torch.arange(0, d_model, 2), not 2 × that."
    ),
    "pe.hint.no_d": "the exponent is not divided by d_model: use 10000^(2i / d_model).",
    "pe.hint.max_len": "you divided the exponent by max_len: use 10000^(2i / d_model).",
    "pe.hint.start1": "positions start at 1; start them at 0, so row 0 is sin 0 = 0, cos 0 = 1.",
    "pe.hint.multiply": (
        "you multiplied the position by 10000^(2i/d_model); divide: the angle is "
        "pos / 10000^(2i/d_model)."
    ),
    "pe.hint.log10": (
        "a logarithm of the wrong base: 10000^(2i/d_model) = exp(2i · ln(10000) / d_model), "
        "with the natural logarithm, math.log(10000.0), not math.log10 (and exp, not 10 ** ...)."
    ),
    "pe.err.odd": (
        "odd d_model ({d}) fails: there are {n_sin} sine columns but only {n_cos} cosine "
        "columns, so use angle[:, : d_model // 2] for the cosines."
    ),
    "pe.fallback": (
        "Column 2i is sin(pos / 10000**(2i / d_model)), column 2i+1 the cos of the same angle."
    ),
    # ------------------------------------------------------------------ label smoothing
    "ls.case.plain": "logits (3, 6, 11), padded targets, smoothing 0.1",
    "ls.case.eps03": "smoothing 0.3, targets of uneven lengths",
    "ls.case.eps0": "smoothing 0 (plain cross-entropy)",
    "ls.case.pad3": "pad_id=3, and real targets equal to 0",
    "ls.case.length1": "length 1: logits (4, 1, 6)",
    "ls.case.float64": "float64 logits (2, 3, 5)",
    "ls.case.large": "large logits (about ±2000)",
    "ls.hint.no_smoothing": (
        "you did not apply the smoothing (this is the plain cross-entropy): mix "
        "(1 − ε)·(−log p_true) with ε·mean over the vocabulary of (−log p_v)."
    ),
    "ls.hint.swap": (
        "you swapped ε and 1 − ε: the true token keeps most of the mass, (1 − ε)·(−log "
        "p_true) + ε·mean_v(−log p_v)."
    ),
    "ls.hint.no_pad": (
        "you counted the padding positions: leave out every position whose target is pad_id, "
        "and average over the others."
    ),
    "ls.hint.numel": (
        "you divided by all B·T positions: divide by the number of non-pad targets, (target "
        "!= pad_id).sum()."
    ),
    "ls.hint.sum": "you returned the sum over tokens; return the mean over the non-pad tokens.",
    "ls.hint.sentences": (
        "you averaged each sentence, then the sentences: average over all non-pad tokens at "
        "once (every token weighs the same)."
    ),
    "ls.hint.one_minus": (
        "you did not multiply the NLL term by (1 − ε): loss = (1 − ε)·(−log p_true) + "
        "ε·mean_v(−log p_v)."
    ),
    "ls.hint.v_minus_1": (
        "you spread ε over the V − 1 wrong tokens; this book follows PyTorch's "
        "label_smoothing, ε/V on *every* token: loss = (1 − ε)·nll + ε·mean_v(−log p_v)."
    ),
    "ls.hint.v_minus_2": (
        "you spread ε over V − 2 tokens (as The Annotated Transformer does); this book "
        "follows PyTorch's label_smoothing, ε/V on every token: loss = (1 − ε)·nll + "
        "ε·mean_v(−log p_v)."
    ),
    "ls.hint.kl": (
        "you computed the KL divergence to the smoothed target (nn.KLDivLoss); it differs by "
        "the target's entropy. Compute the cross-entropy, −Σ_v q_v log p_v."
    ),
    "ls.hint.sum_uniform": (
        "you summed the uniform part over the vocabulary: each token gets ε/V, so use "
        "ε · *mean*_v(−log p_v)."
    ),
    "ls.hint.pad0": "you compared with 0 instead of the pad_id argument (here pad_id=3).",
    "ls.hint.naive_log": (
        "log(softmax(x)) underflows for large logits (log 0 = −inf): use "
        "torch.log_softmax(logits, dim=-1)."
    ),
    "ls.err.flatten": (
        "F.cross_entropy reads (B, T, V) logits as (N, C, ...), classes on axis 1: flatten "
        "first, logits.reshape(-1, V) and target.reshape(-1)."
    ),
    "ls.err.shapes": (
        "a shape error: logits are (B, T, V) and target (B, T); flatten to (N, V) and (N,) "
        "with logits.reshape(-1, V), target.reshape(-1)."
    ),
    "ls.fallback": (
        "One right answer: F.cross_entropy(logits.reshape(-1, V), target.reshape(-1), "
        "ignore_index=pad_id, label_smoothing=smoothing)."
    ),
    # ------------------------------------------------------------------ greedy step
    "greedy.case.plain": "3 sources (2 padded), prefix of 5 tokens",
    "greedy.case.first_step": "first step: prefix [BOS] only",
    "greedy.case.finished": "a finished row: its prefix already holds EOS",
    "greedy.case.padding": "mostly padding: sources (3, 8) with 1 to 3 real tokens",
    "greedy.case.favour_bos": "a model whose logits favour BOS",
    "greedy.case.favour_pad": "a model whose logits favour PAD",
    "greedy.case.batch1": "batch of 1, source of length 1",
    "greedy.case.other_ids": "bos_id=3, eos_id=4 (not the defaults), a model favouring id 3",
    "greedy.hint.whole": (
        "you returned the extended prefix; return only the next token of each row, (B,) "
        "int64."
    ),
    "greedy.hint.first": (
        "you read the prediction at the first position; the next token comes from the *last* "
        "one: logits[:, -1]."
    ),
    "greedy.hint.extra_bos": "you added BOS again: the prefix already starts with it.",
    "greedy.hint.drop_last": (
        "you dropped the last token of the prefix: decode the whole prefix (it ends with the "
        "token chosen at the previous step)."
    ),
    "greedy.hint.no_ban": (
        "BOS or PAD was chosen: set their logits to -inf before the argmax (greedy_decode does "
        "the same)."
    ),
    "greedy.hint.pad_chosen": "PAD was chosen: ban it too (model.config.pad_id), not only BOS.",
    "greedy.hint.bos_chosen": "BOS was chosen: ban bos_id too, not only PAD.",
    "greedy.hint.bos_constant": (
        "you banned id 1, not the bos_id argument (here bos_id=3): use the ids you are given."
    ),
    "greedy.hint.eos_constant": (
        "you looked for EOS as id 2, not the eos_id argument (here eos_id=4): use the ids you "
        "are given."
    ),
    "greedy.hint.finished": (
        "a row whose prefix already contains EOS is finished: make it emit EOS again, as "
        "greedy_decode does."
    ),
    "greedy.hint.finished_pad": "finished rows emit EOS again in this book, not PAD.",
    "greedy.hint.no_memory_mask": (
        "you did not mask the source padding: pass model.src_mask(src) to model.encode and as "
        "memory_mask to model.decode."
    ),
    "greedy.hint.axis": "you took the argmax over the wrong axis: pick over the vocabulary, dim=-1.",
    "greedy.err.interface": (
        "use the model's interface: mask = model.src_mask(src); memory = model.encode(src, "
        "mask); logits = model.decode(prefix, memory, mask), which is (B, t, V)."
    ),
    "greedy.fallback": (
        "Decode the prefix against the encoded source, take logits[:, -1], ban BOS and PAD, "
        "argmax, and keep finished rows at EOS."
    ),
    # ------------------------------------------------------------------ multi-head attention
    "mha.case.self": "self-attention: x (2, 5, 8), 2 heads, no mask",
    "mha.case.cross": "cross-attention: query (2, 3, 12), key and value (2, 6, 12), 3 heads",
    "mha.case.causal": "causal mask (5, 5), 4 heads of width 2",
    "mha.case.padding": "padding mask (2, 1, 1, 6) on cross-attention, 2 heads",
    "mha.case.combined": "padding & causal mask (2, 1, 5, 5), 2 heads",
    "mha.case.one_head": "one head: x (1, 4, 6)",
    "mha.case.width1": "head width 1: x (2, 3, 4), 4 heads",
    "mha.case.float64": "float64: x (2, 4, 6), 3 heads",
    "mha.hint.untransposed": (
        "the weights are stored as nn.Linear stores them, (out, in): project with x @ w.T, "
        "not x @ w."
    ),
    "mha.hint.kv_from_query": (
        "you computed the keys and values from query: use key @ w_k.T and value @ w_v.T "
        "(they differ in cross-attention)."
    ),
    "mha.hint.swapped_kv": "you swapped w_k and w_v: keys use w_k, values use w_v.",
    "mha.hint.w_o_untransposed": (
        "w_o is stored as nn.Linear stores it, (out, in), like the other three: finish with "
        "concat @ w_o.T, not concat @ w_o."
    ),
    "mha.hint.scale_model": (
        "you scaled by √d_model; each head's scores are divided by √(d_model / num_heads), "
        "the head width."
    ),
    "mha.hint.no_scale": "the scores are not scaled: divide them by √Dh, Dh = d_model // num_heads.",
    "mha.hint.scale_dh": (
        "you divided the scores by Dh, the head width itself: divide by its square root, "
        "math.sqrt(d_model // num_heads)."
    ),
    "mha.hint.split_direct": (
        "you reshaped (B, L, D) straight to (B, H, L, Dh), which mixes positions: view as "
        "(B, L, H, Dh), then .transpose(1, 2)."
    ),
    "mha.hint.split_strided": (
        "each head got every H-th feature: head h owns the contiguous features h*Dh to "
        "(h+1)*Dh - 1, so view as (B, L, H, Dh)."
    ),
    "mha.hint.split_swapped": (
        "you made Dh heads of width H: view the last axis as (num_heads, D // num_heads), "
        "x.view(B, L, H, Dh), then .transpose(1, 2)."
    ),
    "mha.hint.merge_direct": (
        "you merged (B, H, L, Dh) straight to (B, L, D), which mixes positions: "
        ".transpose(1, 2) first, then reshape."
    ),
    "mha.hint.merge_strided": (
        "you merged the heads by interleaving their features: head h goes back to the "
        "contiguous features h*Dh to (h+1)*Dh - 1, so .transpose(1, 2), then reshape to "
        "(B, L, D)."
    ),
    "mha.hint.no_w_o": "you left out the output projection: finish with concat @ w_o.T.",
    "mha.hint.averaged": (
        "you averaged the weights over the heads (nn.MultiheadAttention's default); return "
        "them per head, (B, H, Lq, Lk)."
    ),
    "mha.hint.scores": "you returned the scores; return the weights after the softmax.",
    "mha.hint.axis": "softmax over the wrong axis: normalise over the keys, dim=-1.",
    "mha.hint.no_mask": "the mask is ignored: fill the scores where it is False with -inf.",
    "mha.hint.inverted": (
        "the mask is inverted: True means *may attend*, so fill where it is False: "
        "scores.masked_fill(~mask, float('-inf'))."
    ),
    "mha.hint.mask_after": (
        "you applied the mask after the softmax: zeroing weights afterwards leaves rows that "
        "no longer sum to 1. Fill the scores with -inf where the mask is False, then softmax."
    ),
    "mha.err.mask_shape": (
        "after your change the mask no longer broadcasts against the (B, H, Lq, Lk) scores: "
        "the mask you are given, {mask}, already does, so use it as it is, without adding "
        "axes."
    ),
    "mha.err.reshape": (
        "a reshape failed: split with x.view(B, L, H, D // H) using each tensor's own length "
        "(query and key may differ), and merge with .reshape after the transpose."
    ),
    "mha.err.matmul": (
        "a shape mismatch in a matrix product: project with x @ w.T, score with "
        "q @ k.transpose(-2, -1), then weights @ v."
    ),
    "mha.fallback": (
        "Project (x @ w.T), split into (B, H, L, Dh), attend per head with the mask, merge to "
        "(B, L, D), then @ w_o.T."
    ),
    # ------------------------------------------------------------------ KV-cache step
    "kv.case.plain": "x (2, 1, 8), 4 cached positions, 2 heads",
    "kv.case.first": "the first step: an empty cache (2, 2, 0, 4)",
    "kv.case.one_cached": "one cached position, 3 heads",
    "kv.case.one_head": "one head, 3 cached positions",
    "kv.case.width1": "head width 1: 4 heads of d_model 4, 5 cached positions",
    "kv.case.long": "batch 1, 9 cached positions, d_model 12",
    "kv.case.float64": "float64, 2 cached positions",
    "kv.hint.order": "you returned (output, value cache, key cache); return (output, cache_k, cache_v).",
    "kv.hint.no_append": (
        "the new position is neither attended to nor cached: append its key and value to the "
        "caches (torch.cat on dim 2), attend over all t + 1 positions, and return the new "
        "caches."
    ),
    "kv.hint.not_returned": (
        "you returned the old caches: return them with the new key and value appended, "
        "(B, H, t + 1, Dh), for the next step."
    ),
    "kv.hint.before_append": (
        "you attended to the cache before appending: the new token must see itself too, so "
        "append first, then attend over all t + 1 positions."
    ),
    "kv.hint.only_new": (
        "your output ignores the cached positions: attend over the cache *and* the new key."
    ),
    "kv.hint.prepend": (
        "you put the new key and value in front of the cache: append them at the end "
        "(torch.cat([cache_k, k_new], dim=2)), so positions stay in order."
    ),
    "kv.hint.mask_first": (
        "you masked the new query down to position 0: it may see every cached position and "
        "itself, so no mask is needed at this step."
    ),
    "kv.hint.raw_x": "you cached x itself: cache its key x @ w_k.T and value x @ w_v.T, split into heads.",
    "kv.hint.swapped_kv": "you swapped w_k and w_v: keys use w_k, values use w_v.",
    "kv.hint.untransposed": (
        "the weights are stored as nn.Linear stores them, (out, in): project with x @ w.T."
    ),
    "kv.hint.scale_model": "you scaled by √d_model; divide by √Dh, the head width.",
    "kv.hint.no_scale": "the scores are not scaled: divide them by √Dh, Dh = d_model // num_heads.",
    "kv.hint.split_strided": (
        "each head got every H-th feature: split as (B, 1, H, Dh), then .transpose(1, 2), "
        "the same way the cache was split."
    ),
    "kv.hint.no_w_o": "you left out the output projection: finish with @ w_o.T.",
    "kv.hint.axis": (
        "softmax over the wrong axis: the new query's weights must sum to 1 over the t + 1 "
        "keys, the last axis of the (B, H, 1, t + 1) scores: softmax(dim=-1)."
    ),
    "kv.hint.full_mask": (
        "you applied the whole (t + 1, t + 1) causal mask: it broadcasts the one query's "
        "scores to t + 1 rows. A step has a single query, the last position, which may see "
        "every key: no mask is needed (its row of the causal mask is all True)."
    ),
    "kv.hint.reproject": (
        "you projected the cache again: cache_k and cache_v already hold projected keys and "
        "values, split into heads; project only the new x and append its key and value."
    ),
    "kv.err.cat_dim": (
        "torch.cat joins along one axis: append along the length, dim=2 of (B, H, L, Dh)."
    ),
    "kv.err.split_shape": (
        "the new key or value does not fit the cache: split it as the cache was split, "
        "(B, 1, D) → view(B, 1, H, D // H) → .transpose(1, 2), giving (B, H, 1, Dh)."
    ),
    "kv.err.key_transpose": (
        "the keys are not transposed: the scores are q @ k.transpose(-2, -1), "
        "(B, H, 1, Dh) @ (B, H, Dh, t + 1)."
    ),
    "kv.err.shapes": (
        "a shape mismatch: split the new key and value into (B, H, 1, Dh) like the cache "
        "before appending, and attend with q @ k.transpose(-2, -1)."
    ),
    "kv.fallback": (
        "Project x to q, k, v (x @ w.T), split into (B, H, 1, Dh), append k and v to the "
        "caches on dim 2, attend with the new q over all of them, merge, then @ w_o.T."
    ),
    # ------------------------------------------------------------------ warm-up schedule
    "warmup.case.default": "step {step}, d_model {d}, the default warm-up ({w} steps)",
    "warmup.case.values": "step {step}, d_model {d}, warmup_steps {w}",
    "warmup.hint.max": (
        "you took the max of the two terms: take the min, so the rate rises during the "
        "warm-up and decays after it."
    ),
    "warmup.hint.d_exp": "d_model enters as d_model^-0.5: divide by √d_model.",
    "warmup.hint.no_d": "you left out the factor d_model^-0.5: multiply by it.",
    "warmup.hint.warmup_exp": (
        "the warm-up term is step · warmup_steps^-1.5 (exponent −1.5), so the two terms meet "
        "at step = warmup_steps."
    ),
    "warmup.hint.decay": "after the warm-up the rate decays as step^-0.5 (1/√step).",
    "warmup.hint.fixed_warmup": (
        "you ignored the warmup_steps argument: use it instead of a hard-coded 4000."
    ),
    "warmup.hint.off_by_one": "steps count from 1: use step as it is given, not step + 1.",
    "warmup.hint.normalised": (
        "the shape is right but the scale is not: multiply by d_model^-0.5 and write the "
        "warm-up term as step · warmup_steps^-1.5 (the peak is (d_model · warmup_steps)^-0.5)."
    ),
    "warmup.hint.precedence": (
        "** binds tighter than /: x ** -1/2 is (x ** -1) / 2, not x^-0.5. Write the "
        "exponents as numbers, ** -0.5 and ** -1.5 (or in brackets, ** (-1 / 2))."
    ),
    "warmup.hint.no_step": (
        "the warm-up term lacks its step factor: it is step · warmup_steps^-1.5, so the rate "
        "rises in proportion to step until warmup_steps."
    ),
    "warmup.hint.rounded": (
        "you rounded the rate: early rates are about 1e-7, so round() turns them into 0 or "
        "loses their digits; return it unrounded (round only when you print it)."
    ),
    "warmup.hint.decay_form": (
        "your warm-up is right, but the rate falls differently after it: the paper's decay is "
        "d_model^-0.5 · step^-0.5, in proportion to 1/√step (not exponential, linear or "
        "1/step)."
    ),
    "warmup.err.zero_step": (
        "a division by zero: steps count from 1, so use step as it is given, not step − 1."
    ),
    "warmup.fallback": "lrate = d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5).",
    # ------------------------------------------------------------------ top-p filtering
    "name.inputs": "the inputs",
    "name.labels": "the labels",
    "top_p.case.plain": "logits (4, 10), p = {p}",
    "top_p.case.half": "logits (3, 12), p = {p}",
    "top_p.case.peaked": "rows whose most probable token alone holds more than p = {p}",
    "top_p.case.small_p": "a small p = {p}",
    "top_p.case.all": "p = 1 (every token kept)",
    "top_p.case.two": "a vocabulary of 2, p = {p}",
    "top_p.case.float64": "float64 logits (3, 16), p = {p}",
    "top_p.hint.logits": (
        "you returned the filtered logits (-inf outside the nucleus): return the "
        "probabilities, the softmax of those logits, so that each row sums to 1."
    ),
    "top_p.hint.no_renormalise": (
        "the right tokens are kept, but their probabilities do not sum to 1: divide the kept "
        "probabilities by their sum (renormalise), or apply the softmax after setting the "
        "dropped logits to -inf."
    ),
    "top_p.hint.drop_crossing": (
        "you dropped the token that carries the sum across p: keep a token while the "
        "tokens *before* it sum to less than p (cumsum - probs < p), so the kept ones sum to "
        "at least p."
    ),
    "top_p.hint.no_top": (
        "you keep a token while the sum up to and including it is at most p: that drops the "
        "token that carries the sum across p and, when the most probable token alone holds "
        "more than p, keeps nothing (the nucleus always contains the top token). Keep a "
        "token while the tokens before it sum to less than p (cumsum - probs < p)."
    ),
    "top_p.hint.ascending": (
        "you sorted the probabilities from the smallest up: sort with descending=True, so "
        "the nucleus is made of the most probable tokens."
    ),
    "top_p.hint.unsorted": (
        "you summed the probabilities in vocabulary order: sort them from the largest down "
        "first (torch.sort(..., descending=True)), then map the kept positions back with the "
        "sort's indices."
    ),
    "top_p.hint.logit_mass": (
        "you summed the logits: p is a share of the probability mass, so take the softmax "
        "first and sum the sorted probabilities."
    ),
    "top_p.hint.top_k": (
        "you kept a fixed number of tokens (p times the vocabulary): that is top-k. Top-p "
        "keeps as many tokens as it takes for their probabilities to reach p, a different "
        "number in each row."
    ),
    "top_p.hint.axis": (
        "softmax over the wrong axis: each row (the last axis, one distribution over the "
        "vocabulary) must sum to 1: softmax(dim=-1)."
    ),
    "top_p.err.sort": (
        "torch.sort(x, dim=-1, descending=True) returns (values, indices); sort the "
        "probabilities of each row along the last axis."
    ),
    "top_p.err.scatter": (
        "to map the kept positions back to vocabulary order, scatter along the last axis "
        "with the sort's indices: keep = torch.zeros_like(keep_sorted).scatter(-1, indices, "
        "keep_sorted)."
    ),
    "top_p.fallback": (
        "Softmax the logits, sort each row descending, keep a token while the sorted "
        "probabilities before it sum to less than p, zero the others, renormalise."
    ),
    # ------------------------------------------------------------------ next-token loss
    "lm_loss.case.plain": "logits (3, 7, 11), rows padded with 0",
    "lm_loss.case.full": "rows without padding",
    "lm_loss.case.pad3": "pad_id=3, and real tokens equal to 0",
    "lm_loss.case.length2": "length 2: one prediction per row",
    "lm_loss.case.float64": "float64 logits (2, 5, 8)",
    "lm_loss.hint.not_shifted": (
        "you scored each position against its own token: position t has seen tokens 0..t "
        "and predicts token t + 1, so pair logits[:, :-1] with tokens[:, 1:]."
    ),
    "lm_loss.hint.wrong_way": (
        "you shifted the wrong way (logits[:, 1:] with tokens[:, :-1]): that asks each "
        "position for the token before it. Pair logits[:, :-1] with tokens[:, 1:]."
    ),
    "lm_loss.hint.pad_counted": (
        "you counted the targets that are padding: leave out every prediction whose target "
        "(tokens[:, 1:]) equals pad_id, e.g. with ignore_index=pad_id."
    ),
    "lm_loss.hint.input_pad": (
        "you left out the positions whose own token is padding, but padding is decided by "
        "the target: the prediction made at EOS (target: padding) must be left out too, so "
        "mask with tokens[:, 1:] != pad_id."
    ),
    "lm_loss.hint.mean_all": (
        "you divided by all B·(L − 1) predictions: divide by the number of non-pad targets, "
        "(tokens[:, 1:] != pad_id).sum()."
    ),
    "lm_loss.hint.sum": "you returned the sum: return the mean over the non-pad targets.",
    "lm_loss.hint.sentences": (
        "you averaged each sentence, then the sentences: average over all non-pad targets at "
        "once (every token weighs the same)."
    ),
    "lm_loss.hint.pad0": "you compared with 0 instead of the pad_id argument (here pad_id=3).",
    "lm_loss.hint.double_softmax": (
        "you applied a softmax before F.cross_entropy, which does its own log_softmax: give "
        "it the logits."
    ),
    "lm_loss.hint.raw_nll": (
        "F.nll_loss expects log-probabilities: apply log_softmax(dim=-1) to the logits first "
        "(or use F.cross_entropy on the logits)."
    ),
    "lm_loss.err.flatten": (
        "F.cross_entropy reads (B, L, V) logits as (N, C, ...), classes on axis 1: flatten "
        "to (B·(L − 1), V) with .reshape(-1, V) and the targets to (B·(L − 1),)."
    ),
    "lm_loss.err.shapes": (
        "the logits and the targets do not line up: after the shift both cover L − 1 "
        "positions, logits[:, :-1] (B, L − 1, V) and tokens[:, 1:] (B, L − 1)."
    ),
    "lm_loss.fallback": (
        "Take logits[:, :-1] and targets tokens[:, 1:], the cross-entropy of each pair, and "
        "the mean over the targets that are not pad_id."
    ),
    # ------------------------------------------------------------------ BERT's masking
    "bert.case.plain": "64 rows of 512 tokens, p = {p}, mask_id outside the vocabulary",
    "bert.case.half": "p = {p}, mask_id 4 inside the vocabulary",
    "bert.case.small_vocab": "a vocabulary of 12, p = {p}",
    "bert.hint.not_ignored": (
        "no label is -100: the labels must be the original token only where a token was "
        "chosen, and -100 (ignored by the loss) everywhere else."
    ),
    "bert.hint.labels_inverted": (
        "the labels are inverted: -100 where a token was chosen and the token elsewhere. "
        "The loss is computed on the chosen tokens: labels = torch.where(chosen, tokens, "
        "-100)."
    ),
    "bert.hint.labels_corrupted": (
        "your labels hold the new inputs (mask_id, random tokens): they must hold the "
        "original tokens, what the model is asked to recover. Take them from tokens, not from "
        "the masked copy."
    ),
    "bert.hint.pad": (
        "you chose padding tokens: padding is never chosen. Choose only ordinary tokens, "
        "those not in special_ids (padding, BOS, EOS, UNK)."
    ),
    "bert.hint.specials": (
        "you chose special tokens (BOS, EOS or UNK): you left out the padding, but every id in "
        "special_ids must be left out, e.g. ~torch.isin(tokens, torch.tensor(special_ids))."
    ),
    "bert.hint.p_inverted": (
        "you chose about 1 − p of the tokens: choose a token when torch.rand(...) < p."
    ),
    "bert.hint.p_fixed": (
        "you chose 15% of the tokens whatever p is: use the argument p (here p = 0.5)."
    ),
    "bert.hint.all_tokens": (
        "the 80/10/10 rule changed tokens that were not chosen: apply it only to the chosen "
        "tokens (and the chosen ones alone get labels); every other input stays as it was."
    ),
    "bert.hint.random_pool": (
        "some random replacements are special tokens, mask_id or ids outside the vocabulary: "
        "draw them from the ordinary ids only, below vocab_size, not in special_ids, not "
        "mask_id."
    ),
    "bert.hint.all_masked": (
        "you replaced every chosen token by mask_id: of the chosen, 80% become mask_id, 10% "
        "a random token, and 10% stay as they are."
    ),
    "bert.hint.no_keep": (
        "no chosen token stays as it was: 10% of the chosen must be left unchanged (still "
        "with their label), so that the model cannot tell which visible tokens it is asked "
        "about."
    ),
    "bert.hint.no_random": (
        "no chosen token became a random token: 10% of the chosen must be replaced by a "
        "random ordinary id."
    ),
    "bert.hint.overlap": (
        "about 72% of the chosen tokens became mask_id, not 80%: your random 10% was drawn "
        "with a second random number that overlaps the 80%. Draw one number r per token: "
        "r < 0.8 mask, 0.8 ≤ r < 0.9 random, else keep."
    ),
    "bert.hint.shares": (
        "the chosen tokens are right, but not their shares: 80% must become mask_id, 10% a "
        "random ordinary id and 10% stay as they are. Draw one number r per token: r < 0.8 "
        "mask, 0.8 ≤ r < 0.9 random, else keep."
    ),
    "bert.err.isin": (
        "'token in special_ids' does not work on a tensor: build the bool tensor of special "
        "positions with torch.isin(tokens, torch.tensor(special_ids))."
    ),
    "bert.err.randint": (
        "torch.randint(low, high, size) draws ids in [low, high): pass the shape as a tuple, "
        "e.g. torch.randint(len(pool), tokens.shape), and index the pool of ordinary ids with "
        "it."
    ),
    "bert.fallback": (
        "Choose each ordinary token (not in special_ids, not mask_id) with probability p; of "
        "the chosen, 80% become mask_id, 10% a random ordinary id below vocab_size, 10% stay; "
        "labels: the original token where chosen, -100 elsewhere."
    ),
    # ------------------------------------------------------------------ RMSNorm
    "rms.case.plain": "x (2, 3, 8) with a mean of about 0.5, a random weight",
    "rms.case.odd": "odd width: x (4, 7) = 1 + 3 · noise",
    "rms.case.four_axes": "four axes: x (2, 2, 3, 6)",
    "rms.case.scales": "tokens of different sizes: x (4, 8), rows of size 0.1, 1, 10 and 100",
    "rms.case.zero": "an all-zero token: x (3, 6) whose second row is 0",
    "rms.case.eps": "eps=0.5 with small features (x of size ~0.3)",
    "rms.case.width1": "width 1: x (3, 1)",
    "rms.case.float64": "float64: x (2, 5)",
    "rms.hint.centered": (
        "you subtracted the mean: that is LayerNorm. RMSNorm only rescales, "
        "x / √(mean(x²) + ε) · weight, with nothing subtracted."
    ),
    "rms.hint.std": (
        "you divided by the standard deviation (or the variance): torch.std and torch.var "
        "subtract the mean first. RMSNorm divides by the root mean square, "
        "√(mean(x²) + ε) = torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)."
    ),
    "rms.hint.eps_outside": (
        "you added ε outside the square root: use x / √(mean(x²) + ε), not "
        "x / (√mean(x²) + ε)."
    ),
    "rms.hint.no_sqrt": (
        "you divided by the mean square, not by its square root: x / √(mean(x²) + ε) "
        "(torch.rsqrt(ms + eps) gives 1 / √ at once)."
    ),
    "rms.hint.sum": (
        "you divided by √(Σx²), the Euclidean norm: that is √D times the root mean square. "
        "Take the mean of the squares, x.pow(2).mean(dim=-1, keepdim=True)."
    ),
    "rms.hint.mean_squared": (
        "you squared the mean, mean(x)², instead of taking the mean of the squares, mean(x²): "
        "square first, then average."
    ),
    "rms.hint.no_eps": (
        "an all-zero token gives NaN (0 / 0): add eps inside the square root, "
        "√(mean(x²) + ε)."
    ),
    "rms.hint.eps_fixed": (
        "you ignored the eps argument (this test passes eps=0.5): use it instead of a "
        "hard-coded value."
    ),
    "rms.hint.no_weight": "you did not apply the weight: finish with x̂ * weight.",
    "rms.hint.one_plus": (
        "you multiplied by 1 + weight (Gemma's way of storing g, whose weights start at 0): "
        "here weight is g itself, ones at first, so multiply by weight."
    ),
    "rms.hint.weight_before": (
        "you multiplied by the weight before normalising, so the normalisation undid part of "
        "it: normalise x first, then multiply by weight."
    ),
    "rms.hint.axis_all": (
        "you took the mean over the whole tensor: normalise each token over its own features, "
        "mean(dim=-1, keepdim=True)."
    ),
    "rms.hint.axis_len": (
        "you took the mean over the sequence or the batch: use each token's own features, "
        "dim=-1."
    ),
    "rms.err.keepdim": (
        "a broadcasting error: keep the reduced axis with keepdim=True, so the mean square is "
        "(..., 1) and divides (..., D)."
    ),
    "rms.fallback": (
        "Compute ms = x.pow(2).mean(dim=-1, keepdim=True), then x / torch.sqrt(ms + eps) "
        "* weight (no mean subtracted, no bias)."
    ),
    # ------------------------------------------------------------------ rotary positions
    "rope.case.plain": "x (2, 4, 4, 8) (as many heads as positions), positions 0..3",
    "rope.case.offset": "positions 7..11, as after a cache of 7 positions: x (1, 2, 5, 8)",
    "rope.case.unordered": "positions [5, 0, 2, 9]: x (2, 3, 4, 6)",
    "rope.case.one_pair": "one pair: x (2, 2, 3, 2), positions [1, 2, 3]",
    "rope.case.base": "base=100: x (1, 3, 6, 12), positions 10..15",
    "rope.case.far": "positions up to 80: x (1, 1, 4, 16), positions [30, 47, 61, 80]",
    "rope.case.float64": "float64: x (2, 2, 3, 4), positions [0, 4, 8]",
    "rope.hint.interleaved": (
        "you paired neighbouring features (2i, 2i + 1), RoFormer's convention: this exercise "
        "(and the package) pairs the halves, feature i with feature i + Dh/2: "
        "a, b = x.chunk(2, dim=-1)."
    ),
    "rope.hint.direction": (
        "you turned the pairs the other way (by −angle): (a, b) → (a cos − b sin, "
        "a sin + b cos)."
    ),
    "rope.hint.not_inverted": (
        "your frequencies grow with i: θ_i = base^(−2i/Dh), a negative exponent (or "
        "1 / base^(2i/Dh)), so that pair 0 turns fastest."
    ),
    "rope.hint.exp_i": (
        "the exponent is missing its factor 2: θ_i = base^(−2i/Dh) for pair i = 0 .. Dh/2 − 1 "
        "(or torch.arange(0, Dh, 2) / Dh)."
    ),
    "rope.hint.exp_4i": (
        "the exponent is doubled: with 2i from torch.arange(0, Dh, 2), θ_i = base^(−2i/Dh); "
        "do not multiply by 2 again."
    ),
    "rope.hint.positions_ignored": (
        "you used 0 .. L − 1 instead of the positions argument: rotate row l by "
        "positions[l] · θ_i (with a cache the positions do not start at 0)."
    ),
    "rope.hint.start1": "your positions are off by one: use positions as given, from 0.",
    "rope.hint.degrees": (
        "you read the angles as degrees: pos · θ_i is in radians, as torch.cos and torch.sin "
        "take them; convert nothing."
    ),
    "rope.hint.one_half": (
        "you changed only the first member of each pair: a rotation changes both, "
        "(a, b) → (a cos − b sin, a sin + b cos)."
    ),
    "rope.hint.swapped": (
        "cos and sin are exchanged: (a, b) → (a cos − b sin, a sin + b cos), so that "
        "position 0 (angle 0) leaves x as it is."
    ),
    "rope.hint.head_axis": (
        "your angles run along the heads (axis 1): x is (B, H, L, Dh), so the positions "
        "belong to axis 2; cos and sin of shape (L, Dh/2) broadcast against it as they are."
    ),
    "rope.hint.base_fixed": (
        "you ignored the base argument (this test passes base=100): use it instead of a "
        "hard-coded 10000."
    ),
    "rope.err.broadcast": (
        "a broadcasting error: the angles are (L, Dh/2), one row a position, one column a "
        "pair; they multiply the two halves, a = x[..., : Dh // 2] and b = x[..., Dh // 2 :], "
        "each (B, H, L, Dh/2) (for the rotate_half form, repeat them to width Dh first: "
        "torch.cat([angle, angle], dim=-1))."
    ),
    "rope.fallback": (
        "θ = base ** (-torch.arange(Dh // 2) * 2 / Dh); angle = positions[:, None] * θ; "
        "a, b = x.chunk(2, dim=-1); return torch.cat([a * cos - b * sin, a * sin + b * cos], "
        "dim=-1)."
    ),
    # ------------------------------------------------------------------ grouped key/value heads
    "gqa.case.plain": "{hkv} key/value heads for {h} query heads (groups of {g})",
    "gqa.case.multi_query": "multi-query: one key/value head for 4 query heads",
    "gqa.case.same": "no grouping: 3 key/value heads for 3 query heads",
    "gqa.case.float64": "float64: kv (1, 2, 3, 4) for 8 query heads",
    "gqa.hint.tiled": (
        "you repeated the whole set of heads (kv.repeat, torch.cat([kv] * g), or a new axis "
        "before the heads), so query heads 0, 1, 2, ... read key/value heads 0, 1, 0, 1, ...: "
        "each key/value head serves g = H / Hkv consecutive query heads, "
        "kv.repeat_interleave(g, dim=1)."
    ),
    "gqa.hint.reshape_mixed": (
        "you put the new axis after the length axis, so the reshape mixed positions into the "
        "heads: insert it right after the heads, kv[:, :, None].expand(B, Hkv, g, L, Dh)"
        ".reshape(B, H, L, Dh)."
    ),
    "gqa.hint.axis": (
        "you repeated along the wrong axis: kv is (B, Hkv, L, Dh), and it is the heads, "
        "dim=1, that are repeated."
    ),
    "gqa.hint.times_heads": (
        "you repeated each key/value head num_heads times: repeat it g = num_heads // Hkv "
        "times, so that there are num_heads heads in all."
    ),
    "gqa.hint.times_kv_heads": (
        "you repeated each head Hkv times, the number of key/value heads: repeat it "
        "g = num_heads // Hkv times, the size of a group."
    ),
    "gqa.hint.divide_by_kv_heads": (
        "query head h reads key/value head h // Hkv in your answer: it reads head h // g, "
        "with g = num_heads // Hkv the size of a group."
    ),
    "gqa.hint.averaged": (
        "you averaged the key/value heads into one: each of the Hkv heads keeps its own keys "
        "and values and serves its own group of query heads."
    ),
    "gqa.hint.first_only": (
        "every query head reads key/value head 0: each of the Hkv heads serves its own group "
        "of g = num_heads // Hkv query heads."
    ),
    "gqa.err.float_group": (
        "the group size is a float (num_heads / Hkv gives one): use integer division, "
        "g = num_heads // kv.shape[1]."
    ),
    "gqa.fallback": (
        "With g = num_heads // kv.shape[1], return kv.repeat_interleave(g, dim=1): head h of "
        "the result is key/value head h // g."
    ),
    # ------------------------------------------------------------------ online softmax
    "online.case.plain": "random scores: 2 × 3 rows, blocks of 4 and 5 keys, Dv 6",
    "online.case.second_larger": "block 2 holds every row's largest score",
    "online.case.first_larger": "block 1 holds every row's largest score",
    "online.case.heads": "heads as a leading axis: m (2, 2, 3, 1), o (2, 2, 3, 3)",
    "online.case.masked": "one block fully masked in some rows (m = −inf, l = 0, o = 0)",
    "online.case.both_masked": "rows whose two blocks are both fully masked",
    "online.case.large": "large scores (size ~40)",
    "online.case.float64": "float64 inputs",
    "online.hint.order": "return (m, l, o) in that order.",
    "online.hint.no_rescale": (
        "you added the two blocks' sums as they are: each was taken against its own max, so "
        "bring both to the new max first, e_i = exp(m_i − m): l = e1·l1 + e2·l2, "
        "o = e1·o1 + e2·o2."
    ),
    "online.hint.o_not_rescaled": (
        "you rescaled l but not o: o1 and o2 were summed against their own maxima too, "
        "o = exp(m1 − m)·o1 + exp(m2 − m)·o2."
    ),
    "online.hint.l_not_rescaled": (
        "you rescaled o but not l: l1 and l2 were summed against their own maxima too, "
        "l = exp(m1 − m)·l1 + exp(m2 − m)·l2."
    ),
    "online.hint.one_block": (
        "you rescaled only one block: the new max can come from either block, so rescale both "
        "by exp(m_i − m) (the one that holds the max gets exp(0) = 1)."
    ),
    "online.hint.flipped": (
        "the factor is upside down: bring block i to the new max with exp(m_i − m), at most 1, "
        "not exp(m − m_i)."
    ),
    "online.hint.no_exp": (
        "you scaled by m_i − m: the factor is exp(m_i − m), since exp(s − m_i) · exp(m_i − m) "
        "= exp(s − m)."
    ),
    "online.hint.crossed": (
        "you crossed the factors: block 1's sums take exp(m1 − m), block 2's exp(m2 − m)."
    ),
    "online.hint.summed_max": (
        "the merged m is the larger of the two maxima, torch.maximum(m1, m2), not their sum."
    ),
    "online.hint.min": (
        "the merged m is the larger of the two maxima, torch.maximum(m1, m2): against the "
        "smaller one, exp(m_i − m) can overflow."
    ),
    "online.hint.normalised": (
        "you divided o by l: the merge keeps o unnormalised, Σ exp(s − m)·v, so that more "
        "blocks can still be added; divide by l only once, after the last block."
    ),
    "online.hint.weighted_by_l": (
        "you multiplied each o_i by its l_i, as if o_i were normalised: here o_i is already "
        "the sum Σ exp(s − m_i)·v; weight it by exp(m_i − m) only."
    ),
    "online.hint.averaged": (
        "you averaged the two blocks: the union's l and o are sums over all its keys, "
        "l = e1·l1 + e2·l2 and o = e1·o1 + e2·o2 with e_i = exp(m_i − m), not halves of them."
    ),
    "online.hint.nan": (
        "rows whose two blocks are both masked give NaN: m = −inf there, and "
        "exp(−inf − (−inf)) is NaN. Subtract 0 instead where m is −inf, "
        "torch.where(torch.isinf(m), 0.0, m), so that both factors are 0 and l, o stay 0."
    ),
    "online.err.python_max": (
        "Python's max(m1, m2) compares whole tensors, which is ambiguous: take the larger "
        "entry by entry with torch.maximum(m1, m2)."
    ),
    "online.fallback": (
        "m = torch.maximum(m1, m2); with e_i = exp(m_i − m) (and m replaced by 0 where it is "
        "−inf), return m, e1·l1 + e2·l2, e1·o1 + e2·o2."
    ),
}
