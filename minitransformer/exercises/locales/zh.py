"""Chinese messages of the exercise checkers (简体中文), complete: every id of ``en.py``.

The Chinese edition's chapters select this language in their first code
cell after the Colab cell (``set_language("zh")``, added by
``tools/make_chinese_edition.py``). Same ids and ``{fields}`` as ``en.py``
(``tests/test_exercises.py`` checks both). The words of the glossary
(``book/glossary.md``): 掩码, 填充, 查询/键/值, 词元, 词表, 头, 广播, ...;
code, identifiers and shapes stay as in English, with a space between them
and Chinese characters. Hints speak to the reader (你) and say what to
change. No line breaks needed: verdicts are wrapped between Chinese
characters by width (:mod:`minitransformer.exercises._text`).
"""

MESSAGES: dict[str, str] = {
    # ------------------------------------------------------------------ harness
    "harness.passed": "全部 {count} 个测试都正确。",
    "harness.tested": "已测试：{labels}。",
    "harness.note": "注：{note}",
    "harness.failed_on": "（出错的输入：{label}）",
    "harness.not_callable": "这里需要一个函数，你传入的是{got}。",
    "harness.not_implemented": (
        "还没有实现：把 'raise NotImplementedError' 换成你的代码，运行这个单元格，"
        "然后再运行一次检查。"
    ),
    "harness.signature": (
        "你的函数无法以 {signature} 的形式调用（{error}）：请让它恰好带有这些参数。"
    ),
    "harness.raised": "你的函数抛出了 {error}",
    "harness.raised_at": "你写的这一行 '{line}' 抛出了 {error}",
    "harness.mutated": (
        "你的函数原地修改了某个输入张量（以 _ 结尾的方法，如 masked_fill_ 或 div_，"
        "或者下标赋值）。请在新张量上计算，让调用者的输入保持原样。"
    ),
    "harness.model_changed": (
        "你的函数修改了模型的权重或缓冲区：请保持模型不变，改为修改它返回结果（logits）的副本。"
    ),
    "harness.model_mode": (
        "你的函数把模型切换到了训练模式（model.train() 会打开 dropout）：请让它保持 eval 模式。"
    ),
    "harness.random": (
        "对同一个输入，你的函数返回了不同的结果：是不是开着 dropout？除非传入 "
        "training=False，F.dropout(x, p) 会随机丢弃；这里不要用 dropout。"
    ),
    "harness.timeout": (
        "你的函数在 {seconds} 秒内没有结束：是不是有一个永不结束的循环，或者在等待一件永远不会"
        "发生的事？"
    ),
    "harness.exit": "你的函数调用了 sys.exit()（或 exit()），这会结束整个程序：请改为返回结果。",
    "harness.huge": (
        "你的结果里有一个形状为 {shape} 的张量，共 {numel} 个元素（超过 {limit}）：远大于任何"
        "预期的结果，因此不做比较。请检查它的形状（是不是多了一次 expand() 或广播？）。"
    ),
    "harness.device": (
        "你的结果是 {device} 设备上的张量，而输入是普通的 CPU 张量：请直接在输入上计算，不要用 "
        ".to(...) 或 device=...（meta 张量没有可供检查的数值）。"
    ),
    "harness.uncomparable": (
        "你的结果无法与预期结果比较（{error}）：请按练习要求的形式返回张量或数值。"
    ),
    "harness.wrong_values": "数值不对：{where}。",
    "harness.worst": "最大差异 {diff}，位于下标 {index}：应为 {expected}，实际为 {got}",
    "harness.worst_nan": "你的结果含有 NaN，例如下标 {index}（应为 {expected}）",
    "harness.in_item": "{what}（在返回的元组的第 {index} 项）",
    "harness.expected_got": "应为 {expected}，实际为 {got}",
    "harness.list_names": "、",
    "harness.list_cases": "；",
    # ------------------------------------------------------------------ describe
    # (each starts with a Chinese character: the messages put no space before {got})
    "describe.tensor": "形状为 {shape}、dtype 为 {dtype} 的张量",
    "describe.sequence": "含 {n} 项的 {kind}",
    "describe.other": "一个 {kind}",
    "describe.none": "空值 None（是不是少了 'return'？）",
    # ------------------------------------------------------------------ structure
    "struct.tuple": "请返回一个元组（{names}）；你的函数返回的是{got}。",
    "struct.not_tensor": "{name}：应为 torch.Tensor，实际是{got}。",
    "struct.shape": "{name}：形状为 {got}，应为 {expected}。",
    "struct.mask_dtype": "{name}：dtype 为 {got}；掩码必须是 torch.bool（True = 可以关注）。",
    "struct.bool": "{name}：dtype 为 torch.bool，应为 {expected}。",
    "struct.float": "{name}：dtype 为 {got}，应为浮点张量。",
    "struct.int": "{name}：dtype 为 {got}，应为整数 id（{expected}）。",
    "struct.dtype": (
        "{name}：dtype 为 {got}，应为 {expected}，即输入的 dtype（不要写死 float32 或 float64）。"
    ),
    "struct.number": "{name}：应为一个数，实际是{got}。",
    # ------------------------------------------------------------------ names of results
    "name.result": "你的结果",
    "name.output": "输出",
    "name.weights": "权重",
    "name.probabilities": "概率",
    "name.mask": "掩码",
    "name.heads": "拆分后的各头",
    "name.merged": "合并后的张量",
    "name.y": "y",
    "name.table": "编码表",
    "name.loss": "损失",
    "name.next_tokens": "下一个词元",
    "name.cache_k": "键缓存",
    "name.cache_v": "值缓存",
    "name.lr": "学习率",
    "name.rotated": "旋转后的张量",
    "name.expanded": "扩展后的键或值",
    "name.max": "m（最大值）",
    "name.sum": "l（指数和）",
    "name.acc": "o（未归一化的加权和）",
    # ------------------------------------------------------------------ common errors
    "err.keyword": "'{func}' 没有参数 '{arg}'：用 help({func}) 查看它的参数。",
    "err.ddof": "PyTorch 没有 ddof：请用 x.var(dim=-1, unbiased=False)（或 correction=0）。",
    "err.label_smoothing": "F.cross_entropy 的关键字参数是 label_smoothing=，不是 smoothing=。",
    "err.softmax_dim": "softmax 需要知道在哪个轴上归一化：请传入 dim=-1。",
    "err.float_size": "尺寸成了浮点数（D / H 得到的就是浮点数）：请用整数除法 D // H。",
    "err.max_relu": (
        "torch.max 不能拿一个数和张量比较：ReLU 请用 torch.relu(h)（或 h.clamp(min=0)）。"
    ),
    "err.view_contiguous": (
        "转置之后张量不再连续，所以 .view() 会失败：请用 .reshape(...) 或 "
        ".contiguous().view(...)。"
    ),
    # ------------------------------------------------------------------ scaled dot-product
    "sdpa.case.plain": "q (2, 5, 8)，k 和 v (2, 6, 8)，无掩码",
    "sdpa.case.heads": "多头：q (2, 3, 4, 8)，k (2, 3, 6, 8)，v (2, 3, 6, 5)，d_v != d_k，无掩码",
    "sdpa.case.length1": "长度 1：q、k、v 的形状都是 (3, 1, 4)",
    "sdpa.case.causal": "因果掩码 (5, 5) 在大小为 2 的批上广播，d_k 为 4",
    "sdpa.case.padding": "填充掩码 (2, 1, 1, 6) 在 2 个头和 3 个查询上广播",
    "sdpa.case.dead_row": "整行被屏蔽：掩码 (3, 4) 的第二行全为 False",
    "sdpa.case.float64": "float64 输入 (1, 4, 6)",
    "sdpa.case.large": "很大的分数：q、k 的元素大小约为 30（|q·k/√d_k| 可达约 1000）",
    "sdpa.hint.swapped": "你返回的是 (weights, output)；请按 (output, weights) 的顺序返回。",
    "sdpa.hint.no_scale": (
        "分数没有缩放：在 softmax 之前把 q @ kᵀ 除以 √d_k = math.sqrt(q.shape[-1])。"
    ),
    "sdpa.hint.scale_d": "你把分数除以了 d_k；应该除以它的平方根 √d_k（q·k 的标准差）。",
    "sdpa.hint.scale_mul": "你把分数乘以了 √d_k；应该除以它。",
    "sdpa.hint.scale_dv": (
        "你用 v 的宽度的平方根来缩放；请用 √d_k，d_k 是 q 和 k 的宽度（q.shape[-1]）。"
    ),
    "sdpa.hint.post_scale": "你在 softmax 之后把权重除以 √d_k；请在 softmax 之前缩放分数。",
    "sdpa.hint.implicit_dim": (
        "你的 softmax 没有写 dim=，PyTorch 会自己挑一个轴（这里挑的不是最后一个）："
        "请传入 dim=-1，在键上归一化。"
    ),
    "sdpa.hint.axis": (
        "softmax 的轴不对：每个查询的权重在键上求和应为 1，键是 (..., Lq, Lk) 分数的最后一个轴："
        "softmax(dim=-1)。"
    ),
    "sdpa.hint.no_mask": "掩码被忽略了：被屏蔽的键仍然得到了权重。请把掩码作用到分数上。",
    "sdpa.hint.inverted": (
        "掩码反了：True 表示“可以关注”，所以要在掩码为 False 的地方填充分数："
        "scores.masked_fill(~mask, ...)。（nn.MultiheadAttention 用的是相反的约定。）"
    ),
    "sdpa.hint.after": (
        "你在 softmax 之后才施加掩码，各行的和不再是 1：请改为在 softmax 之前把被屏蔽的分数填成 -inf。"
    ),
    "sdpa.hint.fill0": (
        "你把被屏蔽的分数填成了 0，但 exp(0) = 1，被屏蔽的键仍会得到权重：请填 -inf"
        "（或 torch.finfo(scores.dtype).min）。"
    ),
    "sdpa.hint.nan": (
        "所有键都被屏蔽的查询得到了 NaN（一整行 -inf 的 softmax 是 0/0）：请改填 "
        "torch.finfo(dtype).min，或者在 softmax 之后把这样的行置零。"
    ),
    "sdpa.hint.overflow": (
        "分数很大时你的 softmax 会溢出（exp(1000) 是 inf，inf/inf 是 NaN）：请在 exp "
        "之前减去每行的最大值，或者直接用 torch.softmax（它就是这样做的）。"
    ),
    "sdpa.err.mask_shape": (
        "你改动之后，掩码不再能和分数广播：给你的掩码 {mask} 本来就能广播到分数的形状 "
        "{scores}，请原样使用，不要 unsqueeze 或 view。"
    ),
    "sdpa.err.matmul": (
        "矩阵乘法中形状不匹配：先算 q @ k.transpose(-2, -1)（对批量张量，k.T 会把所有轴都反过来），"
        "再算 weights @ v。"
    ),
    "sdpa.note.uniform": (
        "你在整行被屏蔽的那一行给出了均匀分布（每项 1/Lk），这是填一个很大的有限负数时的结果；"
        "本书的包在这里返回全零。两种都算对：这样的查询没有可以关注的键，而填充位置的查询会被损失忽略。"
    ),
    "sdpa.fallback": "请逐步与 softmax(q @ k.transpose(-2, -1) / math.sqrt(d_k)) @ v 对照。",
    # ------------------------------------------------------------------ masked softmax
    "ms.case.random": "分数 (3, 5)，随机掩码 (3, 5)",
    "ms.case.padding": "分数 (2, 2, 4, 4)，填充掩码 (2, 1, 1, 4)",
    "ms.case.causal": "分数 (2, 6, 6) 上的因果掩码 (6, 6)",
    "ms.case.length1": "长度 1：分数 (4, 1)，掩码全为 True",
    "ms.case.large": (
        "很大的分数（±20000）和掩码 (3, 6)：有一行的最大分数被屏蔽，有一行保留的分数都低于 -10000"
    ),
    "ms.case.dead_row": "整行被屏蔽：掩码 (2, 3) 的第二行全为 False",
    "ms.case.float16": "float16 分数 (2, 5)",
    "ms.hint.fill0": (
        "你把被屏蔽的分数填成了 0，但 exp(0) = 1，被屏蔽的位置仍会得到概率：请填 -inf"
        "（或 torch.finfo(scores.dtype).min）。"
    ),
    "ms.hint.after": (
        "你在 softmax 之后才施加掩码，保留的项加起来不再是 1：请在 softmax 之前把被屏蔽的分数填成 -inf。"
    ),
    "ms.hint.inverted": (
        "掩码反了：True 表示“保留”，所以要在掩码为 False 的地方填充："
        "scores.masked_fill(~mask, float('-inf'))。"
    ),
    "ms.hint.no_mask": "掩码被忽略了：被屏蔽的位置仍然得到了概率。",
    "ms.hint.implicit_dim": (
        "你的 softmax 没有写 dim=，PyTorch 会自己挑一个轴（这里挑的不是最后一个）：请传入 dim=-1。"
    ),
    "ms.hint.axis": "softmax 的轴不对：请在最后一个轴上归一化（dim=-1）。",
    "ms.hint.weak_fill": (
        "你的填充值不够小：这里的分数可达约 ±20000，填成 -10000 的位置仍会分到概率。请用 "
        "float('-inf') 或 torch.finfo(scores.dtype).min。"
    ),
    "ms.hint.nan": (
        "整行被屏蔽时结果是 NaN（全是 -inf 的 softmax 是 0/0）：请把这样的行置零，例如 "
        "probs.nan_to_num(0.0)。"
    ),
    "ms.hint.overflow": (
        "你直接对原始分数取了指数：exp(20000) 是 inf，inf/inf 是 NaN。请把被屏蔽的分数填成 -inf，"
        "并使用 torch.softmax（它会减去每行的最大值）。"
    ),
    "ms.hint.renormalise": (
        "你在 softmax 之后施加掩码再重新归一化：当被屏蔽的项占了全部概率时，保留的项下溢为 0，"
        "于是成了 0 除以 0。请改为在 softmax 之前把被屏蔽的分数填成 -inf。"
    ),
    "ms.hint.uniform": (
        "整行被屏蔽的行必须全为零；你的结果把 1/L 分给了被屏蔽的项（填 -1e9 这样的有限值就会如此）："
        "请把没有保留项的行置零。"
    ),
    "ms.err.half_fill": (
        "你的填充值超出了 float16 的范围（最大绝对值 65504，-1e9 会溢出）：请用 float('-inf') 或 "
        "torch.finfo(scores.dtype).min。"
    ),
    "ms.err.mask_shape": "你改动之后，掩码不再能和分数广播：请原样使用给你的掩码，不要添加轴。",
    "ms.fallback": (
        "在 mask 为 False 的地方把分数填成 -inf，在 dim=-1 上做 softmax，再把整行被屏蔽的行置零。"
    ),
    # ------------------------------------------------------------------ causal mask
    "causal.case.length": "长度 {n}",
    "causal.hint.inverted": (
        "掩码反了：True 必须表示“可以关注”，即对角线及其下方（查询 i 能看到键 j <= i）。"
        "对未来位置为 True 是 nn.Transformer 的约定（True = 屏蔽）。"
    ),
    "causal.hint.strict": (
        "对角线是 False：一个位置可以关注它自己（j <= i，而不是 j < i）。请用 "
        "torch.tril(..., diagonal=0)。"
    ),
    "causal.hint.future": (
        "你的掩码让每个位置看到了下一个位置（diagonal=1）：请用 diagonal=0 的 torch.tril。"
    ),
    "causal.hint.upper": (
        "你保留的是上三角：行是查询、列是键，查询 i 可以看到第 0..i 列，也就是下三角："
        "torch.ones(L, L, dtype=torch.bool).tril()。"
    ),
    "causal.hint.nothing": "你的掩码什么也没屏蔽：请屏蔽所有 j > i 的键（上三角）。",
    "causal.hint.additive": (
        "你返回的是加性的浮点形式（允许处为 0，屏蔽处为很大的负数）；请返回布尔掩码，"
        "True = 可以关注。minitransformer.to_additive_mask 会把布尔掩码转换成加性形式。"
    ),
    "causal.hint.numbers": (
        "你返回的是数字（0 和 1）；请返回布尔张量（dtype=torch.bool），True = 可以关注。"
        "浮点掩码会被“加”到分数上。"
    ),
    "causal.hint.batched": "你多加了一个批轴：请返回 (L, L) 的掩码，它自己会广播。",
    "causal.fallback": "第 i 行（一个查询）在第 0..i 列必须为 True，之后为 False。",
    # ------------------------------------------------------------------ padding mask
    "padding.case.end": "词元 (3, 7)，末尾用 pad_id 0 填充",
    "padding.case.pad5": "词元 (2, 6)，pad_id 为 5（还有真实词元 0 和 3）",
    "padding.case.length1": "长度 1：词元 (2, 1) = [[7], [0]]，pad_id 0",
    "padding.case.all_pad": "有一行全是填充：词元 (2, 3)，pad_id 1",
    "padding.hint.inverted": (
        "掩码反了：True 必须表示“可以关注”，即真实词元（tokens != pad_id）。在填充处为 True 是 "
        "nn.MultiheadAttention 的 key_padding_mask 的约定。"
    ),
    "padding.hint.flat": (
        "你的掩码形状是 (B, L)；请给它加两个长度为 1 的轴，变成 (B, 1, 1, L)，这样它能在头和查询上"
        "广播：(tokens != pad_id)[:, None, None, :]。"
    ),
    "padding.hint.three": (
        "你的掩码形状是 (B, 1, L)；请再加一个长度为 1 的轴，变成 (B, 1, 1, L)，才能和 "
        "(B, H, Lq, L) 的分数广播。"
    ),
    "padding.hint.keys_last": (
        "长度轴的位置不对：填充屏蔽的是“键”，即分数的最后一个轴，所以掩码是 (B, 1, 1, L)。"
    ),
    "padding.hint.square": (
        "你把填充位置的“查询”也屏蔽了：掩码只屏蔽键，形状为 (B, 1, 1, L)；填充位置的输出之后反正会被忽略。"
    ),
    "padding.hint.pad0": "你拿 0 比较，而不是用参数 pad_id：这里 pad_id 是 5，0 是普通词元。",
    "padding.hint.greater": (
        "你只保留了大于 pad_id 的 id，但小于它的 id 也是真实词元：请用 tokens != pad_id。"
    ),
    "padding.hint.numbers": "你返回的是数字；请返回布尔张量（True = 真实词元）。",
    "padding.hint.key_padding": (
        "你返回的是 nn.MultiheadAttention 的 key_padding_mask，形状 (B, L)，填充处为 True。"
        "请返回相反的掩码：True = 真实词元，形状 (B, 1, 1, L)："
        "(tokens != pad_id)[:, None, None, :]。"
    ),
    "padding.fallback": "掩码就是 (tokens != pad_id)[:, None, None, :]。",
    # ------------------------------------------------------------------ split / merge heads
    "split.case.plain": "x (2, 5, 12)，3 个头",
    "split.case.length1": "长度 1：x (2, 1, 6)，2 个头",
    "split.case.one_head": "一个头：x (3, 4, 8)，1 个头",
    "split.case.width1": "头宽度 1：x (2, 3, 4)，4 个头",
    "split.case.float64": "x (1, 7, 10)，5 个头，float64",
    "split.hint.no_transpose": (
        "你返回的是 (B, L, H, Dh)：请用 .transpose(1, 2) 把头轴移到长度轴前面。"
    ),
    "split.hint.direct": (
        "你把 (B, L, D) 直接 reshape 成 (B, H, L, Dh)，这会把不同位置混进同一个头：请先 view 成 "
        "(B, L, H, Dh)，再 .transpose(1, 2)。"
    ),
    "split.hint.strided": (
        "每个头拿到的是每隔 H 个取一个的特征，而不是连续的一段：请把最后一个轴 view 成 (H, Dh)，"
        "按这个顺序，而不是 (Dh, H)。"
    ),
    "split.hint.swapped": (
        "你做出了 Dh 个宽度为 H 的头：请把最后一个轴拆成 (num_heads, D // num_heads)。"
        "（torch.split 接收的是每块的大小，不是块数；x.chunk(H, dim=-1) 接收的才是块数。）"
    ),
    "split.hint.reversed": "你的头顺序反了：第 0 个头必须是“最前面”的 Dh 个特征。",
    "split.hint.last_two": (
        "你返回的是 (B, H, Dh, L)：长度轴应在头宽度之前；请用 .transpose(1, 2)"
        "（或 permute(0, 2, 1, 3)）。"
    ),
    "split.fallback": "x.view(B, L, H, D // H).transpose(1, 2) 是一种正确写法。",
    "merge.case.plain": "heads (2, 3, 5, 4) → (2, 5, 12)",
    "merge.case.length1": "长度 1：heads (2, 2, 1, 3)",
    "merge.case.one_head": "一个头：heads (3, 1, 4, 8)",
    "merge.case.width1": "头宽度 1：heads (2, 4, 3, 1)",
    "merge.case.float64": "heads (1, 5, 7, 2)，float64",
    "merge.hint.direct": (
        "你把 (B, H, L, Dh) 直接 reshape 成 (B, L, D)，这会把位置混在一起：先 .transpose(1, 2) "
        "成 (B, L, H, Dh)，再 .reshape(B, L, H * Dh)。"
    ),
    "merge.hint.strided": (
        "你把各头的特征交错排列了：请把每个头的 Dh 个特征并排放置，(B, L, H, Dh) → (B, L, H*Dh)，"
        "而不是 (B, L, Dh, H)。"
    ),
    "merge.hint.reversed": "你的头顺序反了：第 0 个头的特征应排在最前面。",
    "merge.hint.no_reshape": (
        "你返回的是 (B, L, H, Dh)：最后用 .reshape(B, L, H * Dh) 把各头拼起来。"
    ),
    "merge.hint.cat_length": "你沿长度轴拼接了各头：请沿特征轴拼接，dim=-1。",
    "merge.hint.summed": "你把各头相加或取了平均：请把它们拼接起来，让每个头保留自己的 Dh 个特征。",
    "merge.fallback": "heads.transpose(1, 2).reshape(B, L, H * Dh) 是一种正确写法。",
    # ------------------------------------------------------------------ layer norm
    "ln.case.plain": "x (2, 3, 8)，随机的 weight 和 bias",
    "ln.case.odd": "奇数宽度：x (4, 7)",
    "ln.case.four_axes": "四个轴：x (2, 2, 3, 6)",
    "ln.case.constant": "常数行：x (3, 6) 的第二行全为 2.5",
    "ln.case.eps": "eps=0.5，特征很小（x 的大小约为 0.3）",
    "ln.case.width1": "宽度 1：x (3, 1)",
    "ln.case.large_mean": "均值很大：x (2, 4, 8) = 3000 + 噪声",
    "ln.case.float64": "float64：x (2, 5)",
    "ln.hint.unbiased": (
        "你用的是无偏方差（除以 D − 1，torch.var 的默认做法）；LayerNorm 除以 D："
        "x.var(dim=-1, keepdim=True, unbiased=False)。"
    ),
    "ln.hint.eps_outside": (
        "你把 ε 加在了平方根外面：应为 (x − mean) / √(Var + ε)，而不是 (x − mean) / (√Var + ε)。"
    ),
    "ln.hint.no_eps": "常数行得到了 NaN：它的方差是 0，所以要在平方根里加上 eps，√(Var + ε)。",
    "ln.hint.eps_fixed": (
        "你忽略了参数 eps（这个测试传入 eps=0.5）：请使用它，不要写死 1e-5。"
    ),
    "ln.hint.axis_all": (
        "你在整个张量上求统计量：应让每个词元在它自己的特征上归一化，mean(dim=-1, keepdim=True)。"
    ),
    "ln.hint.axis_len": "你在序列或批上求统计量：请用每个词元自己的特征，dim=-1。",
    "ln.hint.swap": "你把 weight 和 bias 弄反了：y = x̂ · weight + bias。",
    "ln.hint.no_affine": "你没有乘 weight、加 bias：最后要算 x̂ * weight + bias。",
    "ln.hint.naive_var": (
        "均值很大时（这里约为 3000），E[x²] − E[x]² 会损失精度：请先减去均值，mean((x − mean)²)，"
        "或者用 x.var(dim=-1, unbiased=False)。"
    ),
    "ln.err.keepdim": (
        "广播出错：请用 keepdim=True 保留被归约的轴，这样均值和方差的形状是 (..., 1)，可以从 "
        "(..., D) 中减去。"
    ),
    "ln.fallback": (
        "在 dim=-1 上求均值和有偏方差（keepdim=True），然后计算 (x - mean) / "
        "torch.sqrt(var + eps) * weight + bias。"
    ),
    # ------------------------------------------------------------------ feed-forward
    "ffn.case.plain": "x (2, 3, 4)，d_ff 8",
    "ffn.case.square": "d_model = d_ff：x (2, 5, 6)，d_ff 6",
    "ffn.case.one": "一个位置：x (1, 1, 3)，d_ff 5",
    "ffn.case.no_batch": "没有批轴：x (7, 4)，d_ff 16",
    "ffn.case.float64": "float64：x (2, 2, 4)，d_ff 4",
    "ffn.hint.no_relu": (
        "两层之间没有 ReLU，它们会合并成一个线性映射：请对第一层的输出使用 torch.relu。"
    ),
    "ffn.hint.relu_out": (
        "你在第二层之后也用了 ReLU：FFN 以线性层结束，所以它的输出可以是负数。"
    ),
    "ffn.hint.relu_in": "你把 ReLU 用在了输入上：它应放在两层之间，作用于 x @ w1.T + b1。",
    "ffn.hint.bias_after": "你在 ReLU 之后才加 b1：应在之前加，relu(x @ w1.T + b1)。",
    "ffn.hint.gelu": "你用的是 GELU；论文的 FFN（以及本书的）用的是 ReLU。",
    "ffn.hint.other_act": "你用了别的激活函数；论文的 FFN 用的是 ReLU，即 torch.relu。",
    "ffn.hint.no_bias": "缺了一个偏置：在 w1 之后加 b1，在 w2 之后加 b2。",
    "ffn.err.transpose": (
        "矩阵乘法中形状出错：nn.Linear 把 w1 存成 (d_ff, d_model)，所以要乘它的转置："
        "x @ w1.T + b1。"
    ),
    "ffn.err.transpose_w2": (
        "第二个矩阵乘法中形状出错：nn.Linear 把 w2 存成 (d_model, d_ff)，所以隐藏层要乘它的"
        "转置：h @ w2.T + b2。"
    ),
    "ffn.err.linear_transposed": (
        "F.linear(x, w, b) 本身就会计算 x @ w.T + b：请直接传入 w1 和 w2，不要加 .T。"
    ),
    "ffn.fallback": "计算 torch.relu(x @ w1.T + b1) @ w2.T + b2。",
    # ------------------------------------------------------------------ sinusoidal encoding
    "pe.case.sizes": "max_len {n}，d_model {d}",
    "pe.case.length1": "长度 1：max_len 1，d_model 8",
    "pe.case.odd": "奇数宽度：max_len 20，d_model 7",
    "pe.case.long": "很长的表：max_len 200，d_model 64",
    "pe.hint.transposed": "编码表转置了：行是位置，形状为 (max_len, d_model)。",
    "pe.hint.halves": (
        "你把正弦放在前一半、余弦放在后一半：请交错排列，同一频率下 pe[:, 0::2] = sin，"
        "pe[:, 1::2] = cos。"
    ),
    "pe.hint.swapped": (
        "正弦和余弦弄反了：偶数列是 sin，奇数列是 cos，所以第 0 行是 0, 1, 0, 1, ..."
    ),
    "pe.hint.exp_j": (
        "你让每一列都有自己的频率：第 2i 列和第 2i+1 列共用 10000^(2i/d_model)；两列都用偶数列的下标。"
    ),
    "pe.hint.exp_2j": (
        "指数翻倍了：第 2i 列和第 2i+1 列的指数是 2i/d_model，其中 2i 来自 "
        "torch.arange(0, d_model, 2)，不要再乘 2。"
    ),
    "pe.hint.no_d": "指数没有除以 d_model：请用 10000^(2i / d_model)。",
    "pe.hint.max_len": "你把指数除以了 max_len：请用 10000^(2i / d_model)。",
    "pe.hint.start1": "位置从 1 开始了；请从 0 开始，这样第 0 行是 sin 0 = 0，cos 0 = 1。",
    "pe.hint.multiply": (
        "你把位置乘以了 10000^(2i/d_model)；应该除：角度是 pos / 10000^(2i/d_model)。"
    ),
    "pe.hint.log10": (
        "对数的底数不对：10000^(2i/d_model) = exp(2i · ln(10000) / d_model)，用的是自然对数 "
        "math.log(10000.0)，不是 math.log10（而且用 exp，不是 10 ** ...）。"
    ),
    "pe.err.odd": (
        "d_model 为奇数（{d}）时出错：有 {n_sin} 个正弦列，却只有 {n_cos} 个余弦列，所以余弦要用 "
        "angle[:, : d_model // 2]。"
    ),
    "pe.fallback": (
        "第 2i 列是 sin(pos / 10000**(2i / d_model))，第 2i+1 列是同一角度的 cos。"
    ),
    # ------------------------------------------------------------------ label smoothing
    "ls.case.plain": "logits (3, 6, 11)，目标含填充，smoothing 0.1",
    "ls.case.eps03": "smoothing 0.3，目标长短不一",
    "ls.case.eps0": "smoothing 0（普通的交叉熵）",
    "ls.case.pad3": "pad_id=3，且有真实目标等于 0",
    "ls.case.length1": "长度 1：logits (4, 1, 6)",
    "ls.case.float64": "float64 logits (2, 3, 5)",
    "ls.case.large": "很大的 logits（约 ±2000）",
    "ls.hint.no_smoothing": (
        "你没有做平滑（这就是普通的交叉熵）：请把 (1 − ε)·(−log p_true) 和 ε 乘以 (−log p_v) "
        "在词表上的平均值相加。"
    ),
    "ls.hint.swap": (
        "你把 ε 和 1 − ε 弄反了：正确词元保留大部分概率，(1 − ε)·(−log p_true) + "
        "ε·mean_v(−log p_v)。"
    ),
    "ls.hint.no_pad": "你把填充位置也算进去了：请去掉所有目标为 pad_id 的位置，只对其余位置求平均。",
    "ls.hint.numel": (
        "你除以了全部 B·T 个位置：应除以非填充目标的个数，(target != pad_id).sum()。"
    ),
    "ls.hint.sum": "你返回的是所有词元的和；请返回非填充词元的平均值。",
    "ls.hint.sentences": (
        "你先对每个句子求平均，再对句子求平均：请一次性对所有非填充词元求平均（每个词元的权重相同）。"
    ),
    "ls.hint.one_minus": (
        "你没有把 NLL 项乘以 (1 − ε)：loss = (1 − ε)·(−log p_true) + ε·mean_v(−log p_v)。"
    ),
    "ls.hint.v_minus_1": (
        "你把 ε 分给了 V − 1 个错误词元；本书沿用 PyTorch 的 label_smoothing，给“每个”词元 ε/V："
        "loss = (1 − ε)·nll + ε·mean_v(−log p_v)。"
    ),
    "ls.hint.v_minus_2": (
        "你把 ε 分给了 V − 2 个词元（The Annotated Transformer 的做法）；本书沿用 PyTorch 的 "
        "label_smoothing，给每个词元 ε/V：loss = (1 − ε)·nll + ε·mean_v(−log p_v)。"
    ),
    "ls.hint.kl": (
        "你算的是到平滑目标的 KL 散度（nn.KLDivLoss），它与交叉熵相差目标分布的熵。请计算交叉熵 "
        "−Σ_v q_v log p_v。"
    ),
    "ls.hint.sum_uniform": (
        "你把均匀部分在词表上求了和：每个词元得到 ε/V，所以应取平均：ε · mean_v(−log p_v)。"
    ),
    "ls.hint.pad0": "你拿 0 比较，而不是用参数 pad_id（这里 pad_id=3）。",
    "ls.hint.naive_log": (
        "logits 很大时 log(softmax(x)) 会下溢（log 0 = −inf）：请用 "
        "torch.log_softmax(logits, dim=-1)。"
    ),
    "ls.err.flatten": (
        "F.cross_entropy 把 (B, T, V) 的 logits 当作 (N, C, ...)，类别在第 1 轴：请先展平，"
        "logits.reshape(-1, V) 和 target.reshape(-1)。"
    ),
    "ls.err.shapes": (
        "形状出错：logits 是 (B, T, V)，target 是 (B, T)；请用 logits.reshape(-1, V) 和 "
        "target.reshape(-1) 展平成 (N, V) 和 (N,)。"
    ),
    "ls.fallback": (
        "一种正确写法：F.cross_entropy(logits.reshape(-1, V), target.reshape(-1), "
        "ignore_index=pad_id, label_smoothing=smoothing)。"
    ),
    # ------------------------------------------------------------------ greedy step
    "greedy.case.plain": "3 个源句（其中 2 个有填充），前缀有 5 个词元",
    "greedy.case.first_step": "第一步：前缀只有 [BOS]",
    "greedy.case.finished": "已结束的行：它的前缀里已经有 EOS",
    "greedy.case.padding": "大部分是填充：源句 (3, 8) 只有 1 到 3 个真实词元",
    "greedy.case.favour_bos": "logits 偏向 BOS 的模型",
    "greedy.case.favour_pad": "logits 偏向 PAD 的模型",
    "greedy.case.batch1": "批大小 1，源句长度 1",
    "greedy.case.other_ids": "bos_id=3，eos_id=4（不是默认值），模型偏向 id 3",
    "greedy.hint.whole": "你返回了延长后的前缀；请只返回每一行的下一个词元，(B,) int64。",
    "greedy.hint.first": (
        "你读的是第一个位置的预测；下一个词元来自“最后”一个位置：logits[:, -1]。"
    ),
    "greedy.hint.extra_bos": "你又加了一次 BOS：前缀本来就以它开头。",
    "greedy.hint.drop_last": (
        "你丢掉了前缀的最后一个词元：请解码整个前缀（它以上一步选出的词元结尾）。"
    ),
    "greedy.hint.no_ban": (
        "选中了 BOS 或 PAD：在 argmax 之前把它们的 logits 设为 -inf（greedy_decode 也是这样做的）。"
    ),
    "greedy.hint.pad_chosen": "选中了 PAD：把它也禁掉（model.config.pad_id），不只是 BOS。",
    "greedy.hint.bos_chosen": "选中了 BOS：把 bos_id 也禁掉，不只是 PAD。",
    "greedy.hint.bos_constant": (
        "你禁掉的是 id 1，而不是参数 bos_id（这里 bos_id=3）：请使用传给你的 id。"
    ),
    "greedy.hint.eos_constant": (
        "你把 EOS 当作 id 2 来找，而不是用参数 eos_id（这里 eos_id=4）：请使用传给你的 id。"
    ),
    "greedy.hint.finished": (
        "前缀里已经有 EOS 的行已经结束：让它再输出一次 EOS，和 greedy_decode 一样。"
    ),
    "greedy.hint.finished_pad": "在本书中，已结束的行再次输出 EOS，而不是 PAD。",
    "greedy.hint.no_memory_mask": (
        "你没有屏蔽源句的填充：把 model.src_mask(src) 传给 model.encode，并作为 memory_mask "
        "传给 model.decode。"
    ),
    "greedy.hint.axis": "你在错误的轴上取 argmax：请在词表上选，dim=-1。",
    "greedy.err.interface": (
        "请使用模型的接口：mask = model.src_mask(src); memory = model.encode(src, mask); "
        "logits = model.decode(prefix, memory, mask)，其形状为 (B, t, V)。"
    ),
    "greedy.fallback": (
        "用编码后的源句解码前缀，取 logits[:, -1]，禁掉 BOS 和 PAD，取 argmax，并让已结束的行保持 EOS。"
    ),
    # ------------------------------------------------------------------ multi-head attention
    "mha.case.self": "自注意力：x (2, 5, 8)，2 个头，无掩码",
    "mha.case.cross": "交叉注意力：query (2, 3, 12)，key 和 value (2, 6, 12)，3 个头",
    "mha.case.causal": "因果掩码 (5, 5)，4 个宽度为 2 的头",
    "mha.case.padding": "交叉注意力上的填充掩码 (2, 1, 1, 6)，2 个头",
    "mha.case.combined": "填充与因果的组合掩码 (2, 1, 5, 5)，2 个头",
    "mha.case.one_head": "一个头：x (1, 4, 6)",
    "mha.case.width1": "头宽度 1：x (2, 3, 4)，4 个头",
    "mha.case.float64": "float64：x (2, 4, 6)，3 个头",
    "mha.hint.untransposed": (
        "权重按 nn.Linear 的方式存储，形状为 (out, in)：投影要写 x @ w.T，而不是 x @ w。"
    ),
    "mha.hint.kv_from_query": (
        "你用 query 计算了键和值：请用 key @ w_k.T 和 value @ w_v.T（在交叉注意力中它们不同）。"
    ),
    "mha.hint.swapped_kv": "你把 w_k 和 w_v 弄反了：键用 w_k，值用 w_v。",
    "mha.hint.w_o_untransposed": (
        "w_o 和另外三个矩阵一样按 nn.Linear 的方式存储，(out, in)：最后要算 concat @ w_o.T，"
        "而不是 concat @ w_o。"
    ),
    "mha.hint.scale_model": (
        "你按 √d_model 缩放了；每个头的分数应除以 √(d_model / num_heads)，即头宽度的平方根。"
    ),
    "mha.hint.no_scale": "分数没有缩放：请除以 √Dh，Dh = d_model // num_heads。",
    "mha.hint.scale_dh": (
        "你把分数除以了头宽 Dh 本身：应除以它的平方根，math.sqrt(d_model // num_heads)。"
    ),
    "mha.hint.split_direct": (
        "你把 (B, L, D) 直接 reshape 成 (B, H, L, Dh)，这会把位置混在一起：请先 view 成 "
        "(B, L, H, Dh)，再 .transpose(1, 2)。"
    ),
    "mha.hint.split_strided": (
        "每个头拿到的是每隔 H 个取一个的特征：第 h 个头拥有连续的第 h*Dh 到 (h+1)*Dh - 1 个特征，"
        "所以要 view 成 (B, L, H, Dh)。"
    ),
    "mha.hint.split_swapped": (
        "你做出了 Dh 个宽为 H 的头：最后一个轴应看作 (num_heads, D // num_heads)，"
        "即 x.view(B, L, H, Dh)，再 .transpose(1, 2)。"
    ),
    "mha.hint.merge_direct": (
        "你把 (B, H, L, Dh) 直接 reshape 成 (B, L, D)，这会把位置混在一起：先 .transpose(1, 2)，"
        "再 reshape。"
    ),
    "mha.hint.merge_strided": (
        "你合并时把各个头的特征交错排列了：第 h 个头应回到连续的特征 h*Dh 到 (h+1)*Dh - 1，"
        "所以先 .transpose(1, 2)，再 reshape 成 (B, L, D)。"
    ),
    "mha.hint.no_w_o": "你漏掉了输出投影：最后要算 concat @ w_o.T。",
    "mha.hint.averaged": (
        "你把权重在各头上取了平均（nn.MultiheadAttention 的默认做法）；请按头返回，"
        "(B, H, Lq, Lk)。"
    ),
    "mha.hint.scores": "你返回的是分数；请返回 softmax 之后的权重。",
    "mha.hint.axis": "softmax 的轴不对：请在键上归一化，dim=-1。",
    "mha.hint.no_mask": "掩码被忽略了：请在掩码为 False 的地方把分数填成 -inf。",
    "mha.hint.inverted": (
        "掩码反了：True 表示“可以关注”，所以要在掩码为 False 的地方填充："
        "scores.masked_fill(~mask, float('-inf'))。"
    ),
    "mha.hint.mask_after": (
        "你在 softmax 之后才用掩码：事后把权重置零，每行的和就不再是 1。请先在掩码为 False "
        "的地方把分数填成 -inf，再做 softmax。"
    ),
    "mha.err.mask_shape": (
        "你改动之后，掩码不再能和 (B, H, Lq, Lk) 的分数广播：给你的掩码 {mask} 本来就可以，"
        "请原样使用，不要添加轴。"
    ),
    "mha.err.reshape": (
        "reshape 失败了：拆分时用每个张量自己的长度，x.view(B, L, H, D // H)（query 和 key 的长度"
        "可以不同）；合并时在 transpose 之后用 .reshape。"
    ),
    "mha.err.matmul": (
        "矩阵乘法中形状不匹配：投影用 x @ w.T，打分用 q @ k.transpose(-2, -1)，然后算 weights @ v。"
    ),
    "mha.fallback": (
        "投影（x @ w.T），拆成 (B, H, L, Dh)，带着掩码在每个头上做注意力，合并成 (B, L, D)，"
        "再 @ w_o.T。"
    ),
    # ------------------------------------------------------------------ KV-cache step
    "kv.case.plain": "x (2, 1, 8)，缓存了 4 个位置，2 个头",
    "kv.case.first": "第一步：缓存为空 (2, 2, 0, 4)",
    "kv.case.one_cached": "缓存了 1 个位置，3 个头",
    "kv.case.one_head": "一个头，缓存了 3 个位置",
    "kv.case.width1": "头宽度 1：d_model 4 分成 4 个头，缓存了 5 个位置",
    "kv.case.long": "批大小 1，缓存了 9 个位置，d_model 12",
    "kv.case.float64": "float64，缓存了 2 个位置",
    "kv.hint.order": (
        "你返回的是 (output, value cache, key cache)；请返回 (output, cache_k, cache_v)。"
    ),
    "kv.hint.no_append": (
        "新位置既没有被关注，也没有被缓存：请把它的键和值追加到缓存中（在 dim 2 上 torch.cat），"
        "在全部 t + 1 个位置上做注意力，并返回新的缓存。"
    ),
    "kv.hint.not_returned": (
        "你返回了旧的缓存：请返回追加了新键和新值的缓存，(B, H, t + 1, Dh)，供下一步使用。"
    ),
    "kv.hint.before_append": (
        "你在追加之前就对缓存做了注意力：新词元也必须看到它自己，所以先追加，再在全部 t + 1 "
        "个位置上做注意力。"
    ),
    "kv.hint.only_new": "你的输出忽略了缓存的位置：请在缓存“和”新的键上一起做注意力。",
    "kv.hint.prepend": (
        "你把新的键和值放在了缓存前面：请追加到末尾（torch.cat([cache_k, k_new], dim=2)），"
        "让位置保持顺序。"
    ),
    "kv.hint.mask_first": (
        "你把新查询屏蔽得只能看到位置 0：它可以看到所有缓存的位置和它自己，所以这一步不需要掩码。"
    ),
    "kv.hint.raw_x": "你缓存的是 x 本身：请缓存它的键 x @ w_k.T 和值 x @ w_v.T，并拆分成多个头。",
    "kv.hint.swapped_kv": "你把 w_k 和 w_v 弄反了：键用 w_k，值用 w_v。",
    "kv.hint.untransposed": "权重按 nn.Linear 的方式存储，形状为 (out, in)：投影要写 x @ w.T。",
    "kv.hint.scale_model": "你按 √d_model 缩放了；应除以 √Dh（Dh 是头宽度）。",
    "kv.hint.no_scale": "分数没有缩放：请除以 √Dh，Dh = d_model // num_heads。",
    "kv.hint.split_strided": (
        "每个头拿到的是每隔 H 个取一个的特征：请拆成 (B, 1, H, Dh)，再 .transpose(1, 2)，"
        "与缓存的拆分方式相同。"
    ),
    "kv.hint.no_w_o": "你漏掉了输出投影：最后要 @ w_o.T。",
    "kv.hint.axis": (
        "softmax 的轴不对：新查询的权重要在 t + 1 个键上加起来等于 1，也就是 (B, H, 1, t + 1) "
        "分数的最后一个轴：softmax(dim=-1)。"
    ),
    "kv.hint.full_mask": (
        "你用了完整的 (t + 1, t + 1) 因果掩码：它把唯一一个查询的分数广播成了 t + 1 行。"
        "每一步只有一个查询，即最后一个位置，它可以看到所有的键：不需要掩码（因果掩码的这一行"
        "全是 True）。"
    ),
    "kv.hint.reproject": (
        "你又投影了一次缓存：cache_k 和 cache_v 里已经是投影过、按头拆分好的键和值；只需投影"
        "新的 x，再把它的键和值追加进去。"
    ),
    "kv.err.cat_dim": "torch.cat 沿一个轴拼接：请沿长度方向追加，即 (B, H, L, Dh) 的 dim=2。",
    "kv.err.split_shape": (
        "新的键或值与缓存的形状对不上：请按缓存的方式拆分，(B, 1, D) → view(B, 1, H, D // H) "
        "→ .transpose(1, 2)，得到 (B, H, 1, Dh)。"
    ),
    "kv.err.key_transpose": (
        "键没有转置：分数是 q @ k.transpose(-2, -1)，即 (B, H, 1, Dh) @ (B, H, Dh, t + 1)。"
    ),
    "kv.err.shapes": (
        "形状不匹配：追加之前，先把新的键和值拆成和缓存一样的 (B, H, 1, Dh)，再用 "
        "q @ k.transpose(-2, -1) 做注意力。"
    ),
    "kv.fallback": (
        "把 x 投影成 q、k、v（x @ w.T），拆成 (B, H, 1, Dh)，在 dim 2 上把 k 和 v 追加到缓存，"
        "用新的 q 对全部位置做注意力，合并，再 @ w_o.T。"
    ),
    # ------------------------------------------------------------------ warm-up schedule
    "warmup.case.default": "第 {step} 步，d_model {d}，默认的预热步数（{w} 步）",
    "warmup.case.values": "第 {step} 步，d_model {d}，warmup_steps {w}",
    "warmup.hint.max": (
        "你取了两项中的最大值：应取最小值，这样学习率在预热期间上升，之后衰减。"
    ),
    "warmup.hint.d_exp": "d_model 以 d_model^-0.5 的形式出现：请除以 √d_model。",
    "warmup.hint.no_d": "你漏掉了因子 d_model^-0.5：请乘上它。",
    "warmup.hint.warmup_exp": (
        "预热项是 step · warmup_steps^-1.5（指数为 −1.5），这样两项恰好在 step = warmup_steps "
        "处相等。"
    ),
    "warmup.hint.decay": "预热之后学习率按 step^-0.5（即 1/√step）衰减。",
    "warmup.hint.fixed_warmup": "你忽略了参数 warmup_steps：请使用它，不要写死 4000。",
    "warmup.hint.off_by_one": "步数从 1 开始：请直接使用给你的 step，不要用 step + 1。",
    "warmup.hint.normalised": (
        "形状对了，但尺度不对：请乘上 d_model^-0.5，并把预热项写成 step · warmup_steps^-1.5"
        "（峰值为 (d_model · warmup_steps)^-0.5）。"
    ),
    "warmup.hint.precedence": (
        "** 的优先级高于 /：x ** -1/2 是 (x ** -1) / 2，而不是 x^-0.5。请把指数写成数字，"
        "** -0.5 和 ** -1.5（或加括号，** (-1 / 2)）。"
    ),
    "warmup.hint.no_step": (
        "预热项缺了 step 这个因子：它是 step · warmup_steps^-1.5，所以在 warmup_steps 之前"
        "学习率与 step 成正比地上升。"
    ),
    "warmup.hint.rounded": (
        "你对学习率做了舍入：前期的学习率约为 1e-7，round() 会把它变成 0 或丢掉有效数字；"
        "请返回未舍入的值（只在打印时舍入）。"
    ),
    "warmup.hint.decay_form": (
        "你的预热部分是对的，但之后的下降方式不对：论文的衰减是 d_model^-0.5 · step^-0.5，"
        "与 1/√step 成正比（不是指数、线性或 1/step 衰减）。"
    ),
    "warmup.err.zero_step": (
        "除以了零：步数从 1 开始，所以请直接使用给你的 step，不要用 step − 1。"
    ),
    "warmup.fallback": "即 lrate = d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)。",
    # ------------------------------------------------------------------ top-p filtering
    "name.inputs": "输入",
    "name.labels": "标签",
    "top_p.case.plain": "logits (4, 10)，p = {p}",
    "top_p.case.half": "logits (3, 12)，p = {p}",
    "top_p.case.peaked": "最可能的词元单独就超过 p = {p} 的行",
    "top_p.case.small_p": "较小的 p = {p}",
    "top_p.case.all": "p = 1（保留所有词元）",
    "top_p.case.two": "词表大小为 2，p = {p}",
    "top_p.case.float64": "float64 的 logits (3, 16)，p = {p}",
    "top_p.hint.logits": (
        "你返回的是过滤后的 logits（核 nucleus 之外为 -inf）：请返回概率，即这些 logits 的 softmax，"
        "使每一行的和为 1。"
    ),
    "top_p.hint.no_renormalise": (
        "保留的词元是对的，但它们的概率之和不是 1：请把保留的概率除以它们的和（重新归一化），"
        "或者先把丢弃的 logits 设为 -inf，再做 softmax。"
    ),
    "top_p.hint.drop_crossing": (
        "你丢掉了让累计和越过 p 的那个词元：只要排在它“前面”的词元之和小于 p，就保留它"
        "（cumsum - probs < p），这样保留的词元之和至少为 p。"
    ),
    "top_p.hint.no_top": (
        "你在“累计到它为止的和不超过 p”时保留一个词元：这会丢掉让累计和越过 p 的那个词元；"
        "当最可能的词元单独就超过 p 时，更是一个词元也不保留（核里总是包含概率最大的词元）。"
        "请在排在它前面的词元之和小于 p 时保留它（cumsum - probs < p）。"
    ),
    "top_p.hint.ascending": (
        "你把概率从小到大排序了：请用 descending=True 排序，让核由最可能的词元组成。"
    ),
    "top_p.hint.unsorted": (
        "你按词表顺序累加了概率：请先从大到小排序（torch.sort(..., descending=True)），"
        "再用排序返回的索引把保留的位置映射回去。"
    ),
    "top_p.hint.logit_mass": (
        "你累加的是 logits：p 是概率质量的份额，所以请先做 softmax，再累加排序后的概率。"
    ),
    "top_p.hint.top_k": (
        "你保留了固定个数的词元（p 乘以词表大小）：那是 top-k。top-p 保留的词元个数是让它们的"
        "概率之和达到 p 所需的个数，每一行都可能不同。"
    ),
    "top_p.hint.axis": (
        "softmax 的轴不对：每一行（最后一个轴，词表上的一个分布）的和必须为 1：softmax(dim=-1)。"
    ),
    "top_p.err.sort": (
        "torch.sort(x, dim=-1, descending=True) 返回 (values, indices)；请沿最后一个轴对每一行的"
        "概率排序。"
    ),
    "top_p.err.scatter": (
        "要把保留的位置映射回词表顺序，请用排序返回的索引沿最后一个轴 scatter："
        "keep = torch.zeros_like(keep_sorted).scatter(-1, indices, keep_sorted)。"
    ),
    "top_p.fallback": (
        "对 logits 做 softmax，把每一行从大到小排序，只要排在某个词元前面的概率之和小于 p 就保留它，"
        "其余置零，再重新归一化。"
    ),
    # ------------------------------------------------------------------ next-token loss
    "lm_loss.case.plain": "logits (3, 7, 11)，各行用 0 填充",
    "lm_loss.case.full": "没有填充的行",
    "lm_loss.case.pad3": "pad_id=3，且有等于 0 的真实词元",
    "lm_loss.case.length2": "长度 2：每行只有一个预测",
    "lm_loss.case.float64": "float64 的 logits (2, 5, 8)",
    "lm_loss.hint.not_shifted": (
        "你让每个位置去预测它自己的词元：位置 t 看到的是词元 0..t，预测的是词元 t + 1，"
        "所以请把 logits[:, :-1] 与 tokens[:, 1:] 配对。"
    ),
    "lm_loss.hint.wrong_way": (
        "你移位的方向反了（logits[:, 1:] 配 tokens[:, :-1]）：这是让每个位置去预测它前面的词元。"
        "请把 logits[:, :-1] 与 tokens[:, 1:] 配对。"
    ),
    "lm_loss.hint.pad_counted": (
        "你把目标为填充的位置也算进去了：请去掉所有目标（tokens[:, 1:]）等于 pad_id 的预测，"
        "例如用 ignore_index=pad_id。"
    ),
    "lm_loss.hint.input_pad": (
        "你去掉的是自身词元为填充的位置，但是否为填充要看目标：在 EOS 处做出的预测（目标是填充）"
        "也必须去掉，所以请用 tokens[:, 1:] != pad_id 作掩码。"
    ),
    "lm_loss.hint.mean_all": (
        "你除以了全部 B·(L − 1) 个预测：应除以非填充目标的个数，(tokens[:, 1:] != pad_id).sum()。"
    ),
    "lm_loss.hint.sum": "你返回的是总和：请返回非填充目标上的平均值。",
    "lm_loss.hint.sentences": (
        "你先对每个句子求平均，再对句子求平均：请一次性对所有非填充目标求平均（每个词元的权重相同）。"
    ),
    "lm_loss.hint.pad0": "你与 0 作比较，而不是与参数 pad_id 比较（这里 pad_id=3）。",
    "lm_loss.hint.double_softmax": (
        "你在 F.cross_entropy 之前做了 softmax，而它自己会做 log_softmax：请直接把 logits 传给它。"
    ),
    "lm_loss.hint.raw_nll": (
        "F.nll_loss 需要的是对数概率：请先对 logits 做 log_softmax(dim=-1)（或者对 logits 用 "
        "F.cross_entropy）。"
    ),
    "lm_loss.err.flatten": (
        "F.cross_entropy 把 (B, L, V) 的 logits 当作 (N, C, ...)，类别在第 1 个轴上：请用 "
        ".reshape(-1, V) 展平成 (B·(L − 1), V)，目标展平成 (B·(L − 1),)。"
    ),
    "lm_loss.err.shapes": (
        "logits 和目标对不齐：移位之后两者都覆盖 L − 1 个位置，即 logits[:, :-1] (B, L − 1, V) "
        "和 tokens[:, 1:] (B, L − 1)。"
    ),
    "lm_loss.fallback": (
        "取 logits[:, :-1] 和目标 tokens[:, 1:]，算出每一对的交叉熵，再对目标不是 pad_id 的位置求平均。"
    ),
    # ------------------------------------------------------------------ BERT's masking
    "bert.case.plain": "64 行、每行 512 个词元，p = {p}，mask_id 在词表之外",
    "bert.case.half": "p = {p}，mask_id 4 在词表之内",
    "bert.case.small_vocab": "词表大小为 12，p = {p}",
    "bert.hint.not_ignored": (
        "没有一个标签是 -100：只有被选中的词元处，标签才是原来的词元；其他位置一律为 -100"
        "（损失会忽略它）。"
    ),
    "bert.hint.labels_inverted": (
        "标签反了：你在选中的位置放了 -100，在其他位置放了词元。损失是在选中的词元上计算的："
        "labels = torch.where(chosen, tokens, -100)。"
    ),
    "bert.hint.labels_corrupted": (
        "你的标签存的是新的输入（mask_id、随机词元）：标签必须是原来的词元，也就是模型要还原的内容。"
        "请从 tokens 取标签，而不是从加了掩码的副本取。"
    ),
    "bert.hint.pad": (
        "你选中了填充词元：填充永远不会被选中。只选普通词元，即不在 special_ids 中的词元"
        "（填充、BOS、EOS、UNK）。"
    ),
    "bert.hint.specials": (
        "你选中了特殊词元（BOS、EOS 或 UNK）：你排除了填充，但 special_ids 中的每个 id 都要排除，"
        "例如 ~torch.isin(tokens, torch.tensor(special_ids))。"
    ),
    "bert.hint.p_inverted": "你选中了大约 1 − p 的词元：应在 torch.rand(...) < p 时选中一个词元。",
    "bert.hint.p_fixed": "不论 p 是多少，你都选中了 15% 的词元：请使用参数 p（这里 p = 0.5）。",
    "bert.hint.all_tokens": (
        "80/10/10 规则改动了没有被选中的词元：只对选中的词元应用它（也只有选中的词元有标签）；"
        "其他输入都保持原样。"
    ),
    "bert.hint.random_pool": (
        "有些随机替换得到的是特殊词元、mask_id 或词表之外的 id：请只从普通 id 中抽取，即小于 "
        "vocab_size、不在 special_ids 中、也不是 mask_id 的 id。"
    ),
    "bert.hint.all_masked": (
        "你把每个选中的词元都换成了 mask_id：选中的词元中，80% 换成 mask_id，10% 换成随机词元，"
        "10% 保持原样。"
    ),
    "bert.hint.no_keep": (
        "没有一个选中的词元保持原样：选中的词元中必须有 10% 不变（仍然带着标签），这样模型就无法"
        "分辨它要回答的是哪些可见的词元。"
    ),
    "bert.hint.no_random": (
        "没有一个选中的词元变成随机词元：选中的词元中必须有 10% 换成一个随机的普通 id。"
    ),
    "bert.hint.overlap": (
        "大约 72% 的选中词元变成了 mask_id，而不是 80%：你抽那 10% 随机替换时用了第二个随机数，"
        "它与那 80% 重叠了。请每个词元只抽一个数 r：r < 0.8 换成掩码，0.8 ≤ r < 0.9 换成随机词元，"
        "其余保持不变。"
    ),
    "bert.hint.shares": (
        "选中的词元是对的，但比例不对：80% 要换成 mask_id，10% 换成随机的普通 id，10% 保持原样。"
        "请每个词元只抽一个数 r：r < 0.8 换成掩码，0.8 ≤ r < 0.9 换成随机词元，其余保持不变。"
    ),
    "bert.err.isin": (
        "'token in special_ids' 不能用于张量：请用 torch.isin(tokens, torch.tensor(special_ids)) "
        "构造标出特殊位置的布尔张量。"
    ),
    "bert.err.randint": (
        "torch.randint(low, high, size) 在 [low, high) 中抽取 id：形状要以元组传入，例如 "
        "torch.randint(len(pool), tokens.shape)，再用它去索引普通 id 组成的 pool。"
    ),
    "bert.fallback": (
        "以概率 p 选中每个普通词元（不在 special_ids 中，也不是 mask_id）；选中的词元中 80% 换成 "
        "mask_id，10% 换成小于 vocab_size 的随机普通 id，10% 保持不变；标签：选中处为原来的词元，"
        "其他位置为 -100。"
    ),
    # ------------------------------------------------------------------ RMSNorm
    "rms.case.plain": "x (2, 3, 8)，均值约为 0.5，随机的 weight",
    "rms.case.odd": "奇数宽度：x (4, 7) = 1 + 3 · 噪声",
    "rms.case.four_axes": "四个轴：x (2, 2, 3, 6)",
    "rms.case.scales": "大小不同的词元：x (4, 8)，各行的大小为 0.1、1、10 和 100",
    "rms.case.zero": "全为 0 的词元：x (3, 6) 的第二行全为 0",
    "rms.case.eps": "eps=0.5，特征很小（x 的大小约为 0.3）",
    "rms.case.width1": "宽度 1：x (3, 1)",
    "rms.case.float64": "float64：x (2, 5)",
    "rms.hint.centered": (
        "你减去了均值：那是 LayerNorm。RMSNorm 只做缩放，x / √(mean(x²) + ε) · weight，"
        "什么也不减。"
    ),
    "rms.hint.std": (
        "你除以的是标准差（或方差）：torch.std 和 torch.var 会先减去均值。RMSNorm 除以均方根，"
        "√(mean(x²) + ε) = torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)。"
    ),
    "rms.hint.eps_outside": (
        "你把 ε 加在了平方根外面：应为 x / √(mean(x²) + ε)，而不是 x / (√mean(x²) + ε)。"
    ),
    "rms.hint.no_sqrt": (
        "你除以的是均方，而不是它的平方根：x / √(mean(x²) + ε)"
        "（torch.rsqrt(ms + eps) 一步给出 1 / √）。"
    ),
    "rms.hint.sum": (
        "你除以的是 √(Σx²)，即欧几里得范数：它是均方根的 √D 倍。请对平方求平均，"
        "x.pow(2).mean(dim=-1, keepdim=True)。"
    ),
    "rms.hint.mean_squared": (
        "你算的是均值的平方 mean(x)²，而不是平方的均值 mean(x²)：先平方，再求平均。"
    ),
    "rms.hint.no_eps": (
        "全为 0 的词元得到了 NaN（0 / 0）：请在平方根里加上 eps，√(mean(x²) + ε)。"
    ),
    "rms.hint.eps_fixed": (
        "你忽略了参数 eps（这个测试传入 eps=0.5）：请使用它，不要写死一个值。"
    ),
    "rms.hint.no_weight": "你没有乘 weight：最后要算 x̂ * weight。",
    "rms.hint.one_plus": (
        "你乘的是 1 + weight（Gemma 存储 g 的方式，其权重从 0 开始）：这里的 weight 就是 g 本身，"
        "初始全为 1，所以直接乘 weight。"
    ),
    "rms.hint.weight_before": (
        "你在归一化之前就乘了 weight，于是归一化抵消了它的一部分：先把 x 归一化，再乘 weight。"
    ),
    "rms.hint.axis_all": (
        "你在整个张量上求均值：应让每个词元在它自己的特征上归一化，mean(dim=-1, keepdim=True)。"
    ),
    "rms.hint.axis_len": "你在序列或批上求均值：请用每个词元自己的特征，dim=-1。",
    "rms.err.keepdim": (
        "广播出错：请用 keepdim=True 保留被归约的轴，这样均方的形状是 (..., 1)，可以用来除 "
        "(..., D)。"
    ),
    "rms.fallback": (
        "先算 ms = x.pow(2).mean(dim=-1, keepdim=True)，再算 x / torch.sqrt(ms + eps) * weight"
        "（不减均值，没有偏置）。"
    ),
    # ------------------------------------------------------------------ rotary positions
    "rope.case.plain": "x (2, 4, 4, 8)（头数与位置数相同），位置 0..3",
    "rope.case.offset": "位置 7..11，就像缓存了 7 个位置之后：x (1, 2, 5, 8)",
    "rope.case.unordered": "位置 [5, 0, 2, 9]：x (2, 3, 4, 6)",
    "rope.case.one_pair": "只有一对：x (2, 2, 3, 2)，位置 [1, 2, 3]",
    "rope.case.base": "base=100：x (1, 3, 6, 12)，位置 10..15",
    "rope.case.far": "位置最大到 80：x (1, 1, 4, 16)，位置 [30, 47, 61, 80]",
    "rope.case.float64": "float64：x (2, 2, 3, 4)，位置 [0, 4, 8]",
    "rope.hint.interleaved": (
        "你把相邻的特征 (2i, 2i + 1) 配成一对，这是 RoFormer 的约定：本练习（以及本包）按两半配对，"
        "第 i 个特征与第 i + Dh/2 个特征一对：a, b = x.chunk(2, dim=-1)。"
    ),
    "rope.hint.direction": (
        "你把每一对朝反方向旋转了（转了 −angle）：应为 (a, b) → (a cos − b sin, a sin + b cos)。"
    ),
    "rope.hint.not_inverted": (
        "你的频率随 i 增大：θ_i = base^(−2i/Dh)，指数是负的（或写成 1 / base^(2i/Dh)），"
        "这样第 0 对转得最快。"
    ),
    "rope.hint.exp_i": (
        "指数少了因子 2：对第 i = 0 .. Dh/2 − 1 对，θ_i = base^(−2i/Dh)"
        "（或用 torch.arange(0, Dh, 2) / Dh）。"
    ),
    "rope.hint.exp_4i": (
        "指数翻倍了：2i 来自 torch.arange(0, Dh, 2) 时，θ_i = base^(−2i/Dh)；不要再乘 2。"
    ),
    "rope.hint.positions_ignored": (
        "你用的是 0 .. L − 1，而不是参数 positions：第 l 行要转 positions[l] · θ_i"
        "（有缓存时，位置不从 0 开始）。"
    ),
    "rope.hint.start1": "你的位置差了一：请原样使用 positions，从 0 开始。",
    "rope.hint.degrees": (
        "你把角度当成了度：pos · θ_i 的单位是弧度，torch.cos 和 torch.sin 正是按弧度计算的；"
        "不需要任何换算。"
    ),
    "rope.hint.one_half": (
        "你只改了每一对中的第一个成员：旋转会同时改变两个，(a, b) → (a cos − b sin, a sin + b cos)。"
    ),
    "rope.hint.swapped": (
        "cos 和 sin 弄反了：(a, b) → (a cos − b sin, a sin + b cos)，这样位置 0（角度 0）"
        "让 x 保持不变。"
    ),
    "rope.hint.head_axis": (
        "你的角度沿着头轴（第 1 轴）变化：x 的形状是 (B, H, L, Dh)，位置属于第 2 轴；"
        "形状为 (L, Dh/2) 的 cos 和 sin 原样就能与它广播。"
    ),
    "rope.hint.base_fixed": (
        "你忽略了参数 base（这个测试传入 base=100）：请使用它，不要写死 10000。"
    ),
    "rope.err.broadcast": (
        "广播出错：角度的形状是 (L, Dh/2)，每行一个位置，每列一对；它们乘的是两半，"
        "a = x[..., : Dh // 2] 和 b = x[..., Dh // 2 :]，形状都是 (B, H, L, Dh/2)"
        "（若用 rotate_half 的写法，先把它们重复到宽度 Dh：torch.cat([angle, angle], dim=-1)）。"
    ),
    "rope.fallback": (
        "θ = base ** (-torch.arange(Dh // 2) * 2 / Dh)；angle = positions[:, None] * θ；"
        "a, b = x.chunk(2, dim=-1)；返回 torch.cat([a * cos - b * sin, a * sin + b * cos], "
        "dim=-1)。"
    ),
    # ------------------------------------------------------------------ grouped key/value heads
    "gqa.case.plain": "{hkv} 个键/值头对应 {h} 个查询头（每组 {g} 个）",
    "gqa.case.multi_query": "多查询注意力：1 个键/值头对应 4 个查询头",
    "gqa.case.same": "不分组：3 个键/值头对应 3 个查询头",
    "gqa.case.float64": "float64：kv (1, 2, 3, 4) 对应 8 个查询头",
    "gqa.hint.tiled": (
        "你把整组头重复了一遍又一遍（kv.repeat、torch.cat([kv] * g)，或在头轴之前加新轴），"
        "于是查询头 0, 1, 2, ... 读的是键/值头 0, 1, 0, 1, ...：每个键/值头服务 g = H / Hkv 个"
        "相邻的查询头，kv.repeat_interleave(g, dim=1)。"
    ),
    "gqa.hint.reshape_mixed": (
        "你把新轴放在了长度轴之后，于是 reshape 把位置混进了头里：请把它紧接在头轴之后插入，"
        "kv[:, :, None].expand(B, Hkv, g, L, Dh).reshape(B, H, L, Dh)。"
    ),
    "gqa.hint.axis": (
        "你沿着错误的轴重复：kv 的形状是 (B, Hkv, L, Dh)，要重复的是头，即 dim=1。"
    ),
    "gqa.hint.times_heads": (
        "你把每个键/值头重复了 num_heads 次：应重复 g = num_heads // Hkv 次，"
        "这样总共才是 num_heads 个头。"
    ),
    "gqa.hint.times_kv_heads": (
        "你把每个头重复了 Hkv 次，即键/值头的个数：应重复 g = num_heads // Hkv 次，即一组的大小。"
    ),
    "gqa.hint.divide_by_kv_heads": (
        "在你的答案里，查询头 h 读的是键/值头 h // Hkv：它应该读第 h // g 个头，"
        "其中 g = num_heads // Hkv 是一组的大小。"
    ),
    "gqa.hint.averaged": (
        "你把各个键/值头平均成了一个：Hkv 个头各自保留自己的键和值，各自服务自己那一组查询头。"
    ),
    "gqa.hint.first_only": (
        "每个查询头读的都是第 0 个键/值头：Hkv 个头各自服务自己那一组 g = num_heads // Hkv 个"
        "查询头。"
    ),
    "gqa.err.float_group": (
        "组的大小是浮点数（num_heads / Hkv 得到的是浮点数）：请用整数除法，"
        "g = num_heads // kv.shape[1]。"
    ),
    "gqa.fallback": (
        "令 g = num_heads // kv.shape[1]，返回 kv.repeat_interleave(g, dim=1)：结果的第 h 个头"
        "就是第 h // g 个键/值头。"
    ),
    # ------------------------------------------------------------------ online softmax
    "online.case.plain": "随机分数：2 × 3 行，两块分别有 4 个和 5 个键，Dv 6",
    "online.case.second_larger": "每一行的最大分数都在第 2 块",
    "online.case.first_larger": "每一行的最大分数都在第 1 块",
    "online.case.heads": "头作为前导轴：m (2, 2, 3, 1)，o (2, 2, 3, 3)",
    "online.case.masked": "某些行中有一块被整块屏蔽（m = −inf，l = 0，o = 0）",
    "online.case.both_masked": "两块都被整块屏蔽的行",
    "online.case.large": "很大的分数（大小约为 40）",
    "online.case.float64": "float64 输入",
    "online.hint.order": "请按 (m, l, o) 的顺序返回。",
    "online.hint.no_rescale": (
        "你把两块的和原样相加了：它们各自是相对于自己的最大值求的，所以要先把两块都换算到新的最大值，"
        "e_i = exp(m_i − m)：l = e1·l1 + e2·l2，o = e1·o1 + e2·o2。"
    ),
    "online.hint.o_not_rescaled": (
        "你重新缩放了 l，却没有缩放 o：o1 和 o2 也是相对于各自的最大值求和的，"
        "o = exp(m1 − m)·o1 + exp(m2 − m)·o2。"
    ),
    "online.hint.l_not_rescaled": (
        "你重新缩放了 o，却没有缩放 l：l1 和 l2 也是相对于各自的最大值求和的，"
        "l = exp(m1 − m)·l1 + exp(m2 − m)·l2。"
    ),
    "online.hint.one_block": (
        "你只重新缩放了一块：新的最大值可能来自任何一块，所以两块都要乘 exp(m_i − m)"
        "（持有最大值的那一块乘的是 exp(0) = 1）。"
    ),
    "online.hint.flipped": (
        "因子倒过来了：把第 i 块换算到新的最大值要乘 exp(m_i − m)（不超过 1），而不是 exp(m − m_i)。"
    ),
    "online.hint.no_exp": (
        "你乘的是 m_i − m：因子应为 exp(m_i − m)，因为 exp(s − m_i) · exp(m_i − m) = exp(s − m)。"
    ),
    "online.hint.crossed": (
        "你把两个因子交叉用了：第 1 块的和乘 exp(m1 − m)，第 2 块的和乘 exp(m2 − m)。"
    ),
    "online.hint.summed_max": (
        "合并后的 m 是两个最大值中较大的那个，torch.maximum(m1, m2)，而不是它们的和。"
    ),
    "online.hint.min": (
        "合并后的 m 是两个最大值中较大的那个，torch.maximum(m1, m2)：相对于较小的那个，"
        "exp(m_i − m) 可能溢出。"
    ),
    "online.hint.normalised": (
        "你把 o 除以了 l：合并时 o 保持未归一化，即 Σ exp(s − m)·v，这样还能继续加入更多的块；"
        "只在最后一块之后除以 l 一次。"
    ),
    "online.hint.weighted_by_l": (
        "你把每个 o_i 乘上了它的 l_i，好像 o_i 是归一化过的：这里的 o_i 已经是和 "
        "Σ exp(s − m_i)·v，只需乘 exp(m_i − m)。"
    ),
    "online.hint.averaged": (
        "你把两块平均了：并集的 l 和 o 是对它所有键的和，l = e1·l1 + e2·l2，o = e1·o1 + e2·o2，"
        "其中 e_i = exp(m_i − m)，而不是它们的一半。"
    ),
    "online.hint.nan": (
        "两块都被遮住的行得到了 NaN：那里 m = −inf，而 exp(−inf − (−inf)) 是 NaN。在 m 为 −inf "
        "的地方改为减去 0，torch.where(torch.isinf(m), 0.0, m)，这样两个因子都是 0，l 和 o "
        "仍为 0。"
    ),
    "online.err.python_max": (
        "Python 的 max(m1, m2) 比较的是整个张量，结果是含糊的：请用 torch.maximum(m1, m2) "
        "逐元素取较大者。"
    ),
    "online.fallback": (
        "m = torch.maximum(m1, m2)；令 e_i = exp(m_i − m)（m 为 −inf 的地方用 0 代替 m），"
        "返回 m、e1·l1 + e2·l2、e1·o1 + e2·o2。"
    ),
}
