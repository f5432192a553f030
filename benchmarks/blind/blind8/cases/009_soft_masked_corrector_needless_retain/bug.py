"""Soft-Masked spelling correction: a GRU detector predicts per-token error probabilities,
the embeddings are soft-masked with them, and a GRU corrector predicts the right token.
Loss = gamma * correction loss + (1 - gamma) * detection loss."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

VOCAB, EMB, HID, SEQ = 20, 16, 24, 12
MASK_ID = 1


class SoftMaskedModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, EMB)
        self.detector = nn.GRU(EMB, HID, batch_first=True, bidirectional=True)
        self.det_out = nn.Linear(2 * HID, 1)
        self.corrector = nn.GRU(EMB, HID, batch_first=True)
        self.corr_proj = nn.Linear(HID, EMB)
        self.out = nn.Linear(EMB, VOCAB)

    def forward(self, tokens):
        e = self.embedding(tokens)
        h, _ = self.detector(e)
        p = torch.sigmoid(self.det_out(h))                  # (B, T, 1) error probability
        mask_e = self.embedding.weight[MASK_ID].expand_as(e)
        soft = p * mask_e + (1 - p) * e
        c, _ = self.corrector(soft)
        logits = self.out(self.corr_proj(c) + e)            # residual connection
        return logits, p.squeeze(-1)


class SoftMaskedBertTrainer:
    def __init__(self, model, lr=3e-3, gamma=0.8):
        self.model = model
        self.optim = torch.optim.Adam(model.parameters(), lr=lr)
        self.gamma = gamma
        self.criterion_c = nn.CrossEntropyLoss()
        self.criterion_d = nn.BCELoss()

    def iteration(self, data, train=True):
        self.model.train(train)
        out, prob = self.model(data["input_ids"])
        c_loss = self.criterion_c(out.reshape(-1, VOCAB), data["output_ids"].reshape(-1))
        d_loss = self.criterion_d(prob, data["label"].float())
        loss = self.gamma * c_loss + (1 - self.gamma) * d_loss
        if train:
            self.optim.zero_grad()
            loss.backward(retain_graph=True)
            self.optim.step()
        acc = (out.argmax(-1) == data["output_ids"]).float().mean().item()
        return loss.item(), d_loss.item(), acc

    def train(self, loader):
        return [self.iteration(d, train=True) for d in loader]

    def evaluate(self, loader):
        with torch.no_grad():
            return [self.iteration(d, train=False) for d in loader]


def make_loader(n, bs=16):
    out = []
    for _ in range(n):
        clean = torch.randint(2, VOCAB, (bs, SEQ))
        label = torch.rand(bs, SEQ) < 0.15
        noisy = torch.where(label, torch.randint(2, VOCAB, (bs, SEQ)), clean)
        out.append({"input_ids": noisy, "output_ids": clean, "label": label})
    return out


model = SoftMaskedModel()
trainer = SoftMaskedBertTrainer(model)
train_loader, val_loader = make_loader(20), make_loader(4)
for epoch in range(3):
    stats = trainer.train(train_loader)
    val = trainer.evaluate(val_loader)
    print(f"epoch {epoch}: train loss {sum(s[0] for s in stats) / len(stats):.4f} "
          f"val loss {sum(s[0] for s in val) / len(val):.4f} val acc {sum(s[2] for s in val) / len(val):.3f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
