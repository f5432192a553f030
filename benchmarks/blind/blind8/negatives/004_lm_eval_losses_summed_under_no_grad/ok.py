"""Small causal language model: training loop with running statistics and a validator that
scores the model on held-out pages by summing per-batch loss tensors."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

VOCAB, CTX, D = 16, 8, 32


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D)
        self.pos = nn.Parameter(torch.zeros(CTX, D))
        self.attn = nn.MultiheadAttention(D, 2, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(), nn.Linear(2 * D, D))
        self.head = nn.Linear(D, VOCAB)
        self.register_buffer("causal", torch.triu(torch.ones(CTX, CTX, dtype=torch.bool), 1))

    def forward(self, ids):
        x = self.tok(ids) + self.pos[: ids.size(1)]
        a, _ = self.attn(x, x, x, attn_mask=self.causal[: ids.size(1), : ids.size(1)], need_weights=False)
        x = x + a
        x = x + self.mlp(x)
        return self.head(x)


def compute_losses(model, batches):
    """Average next-token loss per page, used to rank checkpoints."""
    model.eval()
    losses = []
    with torch.no_grad():
        for ids in batches:
            total_loss = 0
            for chunk in ids.split(4):
                logits = model(chunk[:, :-1])
                loss = F.cross_entropy(logits.reshape(-1, VOCAB), chunk[:, 1:].reshape(-1))
                total_loss += loss
            losses.append(total_loss / len(ids.split(4)))
    model.train()
    return torch.stack(losses)


def make_pages(n, bs=16):
    trans = torch.softmax(torch.randn(VOCAB, VOCAB, generator=torch.Generator().manual_seed(7)) * 3, 1)
    pages = []
    for _ in range(n):
        ids = torch.zeros(bs, CTX + 1, dtype=torch.long)
        ids[:, 0] = torch.randint(0, VOCAB, (bs,))
        for t in range(1, CTX + 1):
            ids[:, t] = torch.multinomial(trans[ids[:, t - 1]], 1).squeeze(1)
        pages.append(ids)
    return pages


model = TinyLM()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
train_pages, eval_pages = make_pages(30), make_pages(6)
best = None
for epoch in range(3):
    running_loss = 0.0
    for ids in train_pages:
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running_loss += loss.item()
    page_losses = compute_losses(model, eval_pages)
    best = page_losses.mean() if best is None else torch.minimum(best, page_losses.mean())
    print(f"epoch {epoch}: train {running_loss / len(train_pages):.4f} eval {page_losses.mean():.4f} best {best:.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
