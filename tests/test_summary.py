"""Model summaries and the architecture drawing."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

import minitransformer as mt  # noqa: E402
from minitransformer.instruments.diagram import draw_architecture  # noqa: E402
from minitransformer.instruments.summary import count_parameters, parameter_table, trace_shapes  # noqa: E402


def _config(**kw):
    return mt.TransformerConfig(30, 30, d_model=16, num_heads=2, num_encoder_layers=2,
                                num_decoder_layers=1, d_ff=32, **kw)


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_parameter_table_adds_up(tied, depth):
    model = mt.Transformer(_config(share_embeddings=tied, tie_output=tied))
    rows = parameter_table(model, depth=depth)
    assert sum(n for _, _, n in rows) == count_parameters(model)
    assert count_parameters(model) == sum(
        p.numel() for p in {id(p): p for p in model.parameters()}.values()
    )


def test_encoder_layer_count_closed_form():
    d, f = 16, 32
    layer = mt.EncoderLayer(d, 2, f)
    assert count_parameters(layer) == 4 * (d * d + d) + (d * f + f + f * d + d) + 2 * 2 * d


def test_trace_shapes_follows_the_data():
    model = mt.Transformer(_config()).eval()
    src, tgt = torch.randint(1, 30, (3, 7)), torch.randint(1, 30, (3, 5))
    records = trace_shapes(model, src, tgt, max_depth=4)
    by_name = {r.name: r.shape for r in records}
    assert by_name["encoder"] == (3, 7, 16)
    assert by_name["decoder.layers.0.cross_attn"] == (3, 5, 16)
    assert records[-1].name == "generator" and records[-1].shape == (3, 5, 30)
    # hooks are removed afterwards
    assert all(not m._forward_hooks for m in model.modules())


def test_draw_architecture_labels_the_config():
    ax = draw_architecture(_config(norm_first=True))
    texts = " ".join(t.get_text() for t in ax.texts)
    assert "2×" in texts and "×1" in texts and "16→32→16" in texts and "pre-LN" in texts
