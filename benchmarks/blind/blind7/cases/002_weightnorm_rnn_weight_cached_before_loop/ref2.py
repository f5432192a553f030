"""Character-level RNN with weight-normalised recurrent/input matrices; the normalised weights are
cached so that the (expensive) normalisation is not repeated at every time step."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

VOCAB, HIDDEN, SEQ, BATCH = 12, 24, 10, 8


class WeightNormLinear(nn.Module):
    """w = g * v / ||v|| (per output row), cached in self._weight until refresh() is called."""

    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.v = nn.Parameter(torch.randn(out_features, in_features) * 0.3)
        self.g = nn.Parameter(torch.ones(out_features))
        self.bias = nn.Parameter(torch.zeros(out_features)) if bias else None
        self._weight = None

    def refresh(self):
        self._weight = self.g[:, None] * self.v / self.v.norm(dim=1, keepdim=True)

    def forward(self, x):
        weight = self.g[:, None] * self.v / self.v.norm(dim=1, keepdim=True)
        return F.linear(x, weight, self.bias)


class WNCharRNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.w_ih = WeightNormLinear(HIDDEN, HIDDEN)
        self.w_hh = WeightNormLinear(HIDDEN, HIDDEN, bias=False)
        self.head = nn.Linear(HIDDEN, VOCAB)

    def refresh_weights(self):
        for m in self.modules():
            if isinstance(m, WeightNormLinear):
                m.refresh()

    def forward(self, tokens):
        h = torch.zeros(tokens.size(0), HIDDEN)
        logits = []
        for t in range(tokens.size(1)):
            h = torch.tanh(self.w_ih(self.embed(tokens[:, t])) + self.w_hh(h))
            logits.append(self.head(h))
        return torch.stack(logits, 1)


def batches(n):
    out = []
    for _ in range(n):
        start = torch.randint(0, VOCAB, (BATCH, 1))
        seq = (start + torch.arange(SEQ + 1)[None, :] * 3) % VOCAB
        out.append((seq[:, :-1], seq[:, 1:]))
    return out


model = WNCharRNN()
optimizer = torch.optim.SGD(model.parameters(), lr=0.3, momentum=0.9)
data = batches(25)

model.refresh_weights()  # normalise once; every time step reuses the cached matrices
for epoch in range(2):
    for step, (inp, target) in enumerate(data):
        logits = model(inp)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), target.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
