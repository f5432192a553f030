"""Word-level LSTM language model trained with truncated BPTT: the hidden state is carried from one
BPTT window to the next and detached at the start of every window by a helper."""
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

VOCAB, EMB, HID, BPTT, BATCH = 30, 24, 48, 12, 8


@dataclass
class StreamState:
    hidden: tuple = None
    position: int = 0


class LSTMLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, EMB)
        self.rnn = nn.LSTM(EMB, HID, num_layers=2, batch_first=False)
        self.decoder = nn.Linear(HID, VOCAB)

    def init_hidden(self, bsz):
        return (torch.zeros(2, bsz, HID), torch.zeros(2, bsz, HID))

    def forward(self, tokens, hidden):
        out, hidden = self.rnn(self.embed(tokens), hidden)
        return self.decoder(out), hidden


def repackage_hidden(h):
    """Wraps hidden states in new tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def make_stream(n_tokens=BATCH * BPTT * 20 + 1):
    trans = torch.softmax(torch.randn(VOCAB, VOCAB) * 2.5, 1)
    seq = [0]
    for _ in range(n_tokens - 1):
        seq.append(int(torch.multinomial(trans[seq[-1]], 1)))
    data = torch.tensor(seq)
    n = data.size(0) // BATCH
    return data[: n * BATCH].view(BATCH, n).t().contiguous()


def get_batch(source, i):
    seq_len = min(BPTT, source.size(0) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len]


model = LSTMLM()
optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
train_data = make_stream()
for epoch in range(3):
    state = StreamState(hidden=model.init_hidden(BATCH))
    total = 0.0
    for i in range(0, train_data.size(0) - 1, BPTT):
        data, targets = get_batch(train_data, i)
        state.hidden = repackage_hidden(state.hidden)
        model.zero_grad()
        output, state.hidden = model(data, state.hidden)
        loss = F.cross_entropy(output.view(-1, VOCAB), targets.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        optimizer.step()
        state.position = i
        total += loss.item()
    print(f"epoch {epoch}: loss {total / (train_data.size(0) // BPTT):.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
