"""Chinese messages of the exercise checkers (简体中文).

The Chinese edition's chapters select this language in their first code
cell after the Colab cell (``set_language("zh")``, added by
``tools/make_chinese_edition.py``). Ids missing here are printed in English:
so far only the harness's messages, common to every checker, are
translated; the checkers' own hints are added with the translation of the
book (issue 16, ``i18n/README.md``). Lines are wrapped at spaces only, so a
long Chinese message carries its own line breaks (``\\n``).
"""

MESSAGES: dict[str, str] = {
    # ------------------------------------------------------------------ harness
    "harness.passed": "全部 {count} 个测试都正确。",
    "harness.tested": "测试了：{labels}。",
    "harness.note": "注意：{note}",
    "harness.failed_on": "（出错的输入：{label}）",
    "harness.not_callable": "需要一个函数，得到的是 {got}。",
    "harness.not_implemented": (
        "还没有实现：把 `raise NotImplementedError` 换成你的代码，运行这个单元格，\n"
        "然后再运行一次检查。"
    ),
    "harness.signature": (
        "你的函数无法以 {signature} 的方式调用（{error}）：\n请让它恰好带有这些参数。"
    ),
    "harness.raised": "你的函数抛出了 {error}",
    "harness.raised_at": "你的代码 `{line}` 抛出了 {error}",
    "harness.mutated": (
        "你的函数原地修改了某个输入张量（以 _ 结尾的方法，如 masked_fill_ 或 div_，\n"
        "或者下标赋值）。请在新张量上计算，让调用者的输入保持原样。"
    ),
    "harness.model_changed": (
        "你的函数修改了模型的权重或缓冲区：请保持模型不变，\n改为修改它返回结果（logits）的副本。"
    ),
    "harness.model_mode": (
        "你的函数把模型切换到了训练模式（model.train() 会打开 dropout）：\n请让它保持 eval 模式。"
    ),
    "harness.random": (
        "对同一个输入，你的函数返回了不同的结果：dropout 是否开着？\n"
        "除非传入 training=False，F.dropout(x, p) 会随机丢弃；这里不要用 dropout。"
    ),
    "harness.wrong_values": "数值不对：{where}。",
    "harness.worst": "最大差异 {diff}，位于下标 {index}：应为 {expected}，实际为 {got}",
    "harness.worst_nan": "你的结果含有 NaN，例如下标 {index}（应为 {expected}）",
    "harness.in_item": "{what}（返回的元组的第 {index} 项）",
    "harness.expected_got": "应为 {expected}，实际为 {got}",
}
