"""Word-level LSTM language model trained with truncated BPTT (hidden state carried across batches)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from utils import batchify, get_batch, make_corpus, repackage_hidden

torch.manual_seed(0)

VOCAB, EMB, NHID, BPTT, BSZ = 24, 16, 32, 10, 4


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid)
        self.decoder = nn.Linear(nhid, ntoken)

    def forward(self, inp, hidden):
        emb = self.encoder(inp)
        output, hidden = self.rnn(emb, hidden)
        return self.decoder(output).view(-1, self.decoder.out_features), hidden

    def init_hidden(self, bsz):
        w = next(self.parameters())
        return (w.new_zeros(1, bsz, self.rnn.hidden_size), w.new_zeros(1, bsz, self.rnn.hidden_size))


def train_epoch(model, optimizer, train_data, epoch):
    model.train()
    total_loss = 0.0
    hidden = model.init_hidden(BSZ)
    n = 0
    for i in range(0, train_data.size(0) - 1, BPTT):
        data, targets = get_batch(train_data, i, BPTT)
        # Starting each batch, we detach the hidden state from how it was previously produced.
        hidden = repackage_hidden(hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = F.cross_entropy(output, targets)
        loss.backward(retain_graph=True)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
        total_loss += loss.item()
        n += 1
    print(f"epoch {epoch}: loss {total_loss / n:.4f}")


train_data = batchify(make_corpus(), BSZ)
model = RNNModel(VOCAB, EMB, NHID)
optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
for epoch in range(2):
    train_epoch(model, optimizer, train_data, epoch)


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
