"""Input-feeding LSTM decoder trained with truncated BPTT over long token streams.

The decoder state (LSTM hidden/cell and the input-feed vector) is kept in a
DecoderState object and carried from one chunk of the stream to the next.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

VOCAB, EMB, HID = 12, 8, 24


class DecoderState:
    """Holds the recurrent state of the decoder between truncation windows."""

    def __init__(self, hidden, input_feed):
        self.hidden = hidden          # (h, c)
        self.input_feed = input_feed  # previous attentional output

    @property
    def _all(self):
        return self.hidden + (self.input_feed,)

    def update_state(self, hidden, input_feed):
        self.hidden = hidden
        self.input_feed = input_feed

    def detach(self):
        # cut the history at the truncation boundary
        for h in self._all:
            h = h.detach()

    def repeat_beam_size_times(self, beam_size):
        vars = [e.repeat(beam_size, 1) for e in self._all]
        self.hidden = tuple(vars[:-1])
        self.input_feed = vars[-1]


class InputFeedDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embeddings = nn.Embedding(VOCAB, EMB)
        self.rnn = nn.LSTMCell(EMB + HID, HID)
        self.out_proj = nn.Linear(2 * HID, HID)
        self.generator = nn.Linear(HID, VOCAB)

    def init_decoder_state(self, batch_size):
        z = torch.zeros(batch_size, HID)
        return DecoderState((z, z.clone()), z.clone())

    def forward(self, tgt, state):
        emb = self.embeddings(tgt)
        h, c = state.hidden
        input_feed = state.input_feed
        outputs = []
        for t in range(tgt.size(1)):
            rnn_input = torch.cat([emb[:, t], input_feed], 1)
            h, c = self.rnn(rnn_input, (h, c))
            input_feed = torch.tanh(self.out_proj(torch.cat([h, input_feed], 1)))
            outputs.append(input_feed)
        state.update_state((h, c), input_feed)
        return self.generator(torch.stack(outputs, 1)), state


def make_streams(batch=8, length=121):
    trans = torch.softmax(torch.randn(VOCAB, VOCAB) * 2.0, 1)
    toks = torch.zeros(batch, length, dtype=torch.long)
    toks[:, 0] = torch.randint(0, VOCAB, (batch,))
    for t in range(1, length):
        toks[:, t] = torch.multinomial(trans[toks[:, t - 1]], 1).squeeze(1)
    return toks


def train(model, streams, epochs=4, trunc=20):
    optim = torch.optim.Adam(model.parameters(), lr=5e-3)
    for epoch in range(epochs):
        dec_state = model.init_decoder_state(streams.size(0))
        total, n = 0.0, 0
        for j in range(0, streams.size(1) - 1, trunc):
            inp = streams[:, j:j + trunc]
            tgt = streams[:, j + 1:j + 1 + trunc]
            logits, dec_state = model(inp, dec_state)
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), tgt.reshape(-1))
            optim.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optim.step()
            dec_state.detach()
            total += loss.item()
            n += 1
        print(f"epoch {epoch}: loss {total / n:.4f}")


model = InputFeedDecoder()
train(model, make_streams())


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
