"""Writing-editing network (title -> abstract): a draft is written, then the same encoder-decoder
re-reads its previous draft (as token ids) and edits it, for ``num_exams`` passes per batch."""
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

VOCAB, EMB, HID, SRC_LEN, TGT_LEN = 40, 24, 48, 6, 10


@dataclass
class TrainConfig:
    num_exams: int = 3
    epochs: int = 3
    lr: float = 3e-3
    clip: float = 5.0


class WritingEditingModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, EMB)
        self.title_encoder = nn.GRU(EMB, HID, batch_first=True)
        self.draft_encoder = nn.GRU(EMB, HID, batch_first=True)
        self.decoder = nn.GRU(EMB + HID, HID, batch_first=True)
        self.attn = nn.Linear(HID, HID, bias=False)
        self.out = nn.Linear(2 * HID, VOCAB)

    def forward(self, title, prev_draft, target_in):
        _, h_title = self.title_encoder(self.embedding(title))
        if prev_draft is None:
            memory = torch.zeros(title.size(0), 1, HID)
        else:
            memory, _ = self.draft_encoder(self.embedding(prev_draft))
        ctx0 = memory.mean(1, keepdim=True).expand(-1, target_in.size(1), -1)
        dec, _ = self.decoder(torch.cat([self.embedding(target_in), ctx0], -1), h_title)
        scores = torch.bmm(self.attn(dec), memory.transpose(1, 2))
        ctx = torch.bmm(F.softmax(scores, -1), memory)
        return self.out(torch.cat([dec, ctx], -1))


class Trainer:
    def __init__(self, model, cfg):
        self.model, self.cfg = model, cfg
        self.optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)

    def _backprop(self, loss):
        self.optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.clip)
        self.optimizer.step()

    def train_batch(self, title, abstract):
        target_in, target_out = abstract[:, :-1], abstract[:, 1:]
        prev_draft, losses = None, []
        for exam in range(self.cfg.num_exams):
            logits = self.model(title, prev_draft, target_in)
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), target_out.reshape(-1))
            self._backprop(loss)
            prev_draft = logits.argmax(-1)
            losses.append(loss.item())
        return losses


def make_corpus(n_batches=12, bs=16):
    table = torch.randint(1, VOCAB, (VOCAB, TGT_LEN + 1))
    out = []
    for _ in range(n_batches):
        title = torch.randint(1, VOCAB, (bs, SRC_LEN))
        abstract = table[title[:, 0]].clone()
        abstract[:, 1:4] = title[:, 1:4]
        abstract[:, 0] = 0
        out.append((title, abstract))
    return out


cfg = TrainConfig()
model = WritingEditingModel()
trainer = Trainer(model, cfg)
corpus = make_corpus()
for epoch in range(cfg.epochs):
    per_exam = [0.0] * cfg.num_exams
    for title, abstract in corpus:
        for i, l in enumerate(trainer.train_batch(title, abstract)):
            per_exam[i] += l / len(corpus)
    print(f"epoch {epoch}: " + " ".join(f"exam{i} {l:.4f}" for i, l in enumerate(per_exam)))


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
