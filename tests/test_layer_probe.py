"""Linear probes (minitransformer.instruments.layer_probe): independent
references are a linearly separable problem (the probe must solve it), random
labels (it must not beat chance on held-out data) and the encoder's own
forward pass (the states must be what the layers compute)."""

import torch

from minitransformer import Transformer, TransformerConfig
from minitransformer.instruments.layer_probe import encoder_states, train_linear_probe


def test_probe_solves_a_linearly_separable_problem_and_not_random_labels():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(600, 16, generator=g) * 3 + 5  # standardisation must handle the offset
    w = torch.randn(4, 16, generator=g)
    y = (x @ w.T).argmax(-1)
    probe = train_linear_probe(x[:400], y[:400], 4)
    assert probe.accuracy(x[400:], y[400:]) > 0.9
    noise = torch.randint(0, 4, (600,), generator=g)
    fitted = train_linear_probe(x[:400], noise[:400], 4)
    assert fitted.accuracy(x[400:], noise[400:]) < 0.4  # chance is 0.25


def test_encoder_states_are_the_layers_outputs():
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(30, 30, d_model=16, num_heads=2, num_encoder_layers=3,
                                          num_decoder_layers=1, d_ff=32, norm_first=True,
                                          dropout=0.0))
    src = torch.randint(4, 30, (2, 7))
    src[1, 5:] = 0
    states = encoder_states(model, src)
    assert len(states) == 4 and all(s.shape == (2, 7, 16) for s in states)
    with torch.no_grad():
        x = states[0]
        for i, layer in enumerate(model.encoder.layers):
            x = layer(x, model.src_mask(src))
            torch.testing.assert_close(states[i + 1], x)
        torch.testing.assert_close(model.encoder.norm(states[-1]), model.encode(src))
    assert model.training  # mode restored
