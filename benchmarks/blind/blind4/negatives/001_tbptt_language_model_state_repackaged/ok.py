"""Character-level LSTM language model trained with truncated BPTT; the state is carried across chunks in a dataclass."""
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

VOCAB, EMBED, HIDDEN, SEQ_LEN = 20, 16, 48, 10


@dataclass
class CarryState:
    h: torch.Tensor
    c: torch.Tensor


def repackage(state):
    """Keep the values of the state, drop its history (truncated BPTT)."""
    return CarryState(state.h.detach(), state.c.detach())


class RNNLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, EMBED)
        self.lstm = nn.LSTM(EMBED, HIDDEN, batch_first=True)
        self.linear = nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens, state):
        out, (h, c) = self.lstm(self.embed(tokens), (state.h, state.c))
        return self.linear(out), CarryState(h, c)


def make_corpus(batch=8, length=SEQ_LEN * 25 + 1):
    gen = torch.Generator().manual_seed(3)
    trans = torch.softmax(torch.randn(VOCAB, VOCAB, generator=gen) * 2.5, 1)
    seq = torch.zeros(batch, length, dtype=torch.long)
    seq[:, 0] = torch.randint(0, VOCAB, (batch,), generator=gen)
    for t in range(1, length):
        seq[:, t] = torch.multinomial(trans[seq[:, t - 1]], 1, generator=gen).squeeze(1)
    return seq


model = RNNLM()
optimizer = torch.optim.Adam(model.parameters(), lr=4e-3)
ids = make_corpus()
for epoch in range(2):
    states = CarryState(torch.zeros(1, ids.shape[0], HIDDEN), torch.zeros(1, ids.shape[0], HIDDEN))
    total = 0.0
    for i in range(0, ids.shape[1] - SEQ_LEN, SEQ_LEN):
        inputs, targets = ids[:, i:i + SEQ_LEN], ids[:, i + 1:i + 1 + SEQ_LEN]
        states = repackage(states)
        logits, states = model(inputs, states)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
        total += loss.item()
    print(f"epoch {epoch}: mean loss {total / 25:.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
