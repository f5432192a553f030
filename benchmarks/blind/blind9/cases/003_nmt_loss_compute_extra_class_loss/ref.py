"""Toy encoder-decoder translation model (reverse the source sentence) with an auxiliary
sentence-classification head on the encoder, trained through an OpenNMT-style LossCompute."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

VOCAB, EMB, HID, SRC_LEN, BOS = 12, 16, 32, 6, 0


class NMTModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.src_emb = nn.Embedding(VOCAB, EMB)
        self.tgt_emb = nn.Embedding(VOCAB, EMB)
        self.encoder = nn.GRU(EMB, HID, batch_first=True)
        self.decoder = nn.GRU(EMB, HID, batch_first=True)
        self.generator = nn.Linear(HID, VOCAB)
        self.classifier = nn.Sequential(nn.Linear(HID, HID), nn.Tanh(), nn.Linear(HID, 2))

    def forward(self, src, tgt_in):
        memory, enc_state = self.encoder(self.src_emb(src))
        dec_out, _ = self.decoder(self.tgt_emb(tgt_in), enc_state)
        return dec_out, enc_state


class NMTLossCompute:
    def __init__(self, model, normalization="tokens"):
        self.model = model
        self.normalization = normalization

    def _compute_loss(self, dec_out, target):
        scores = self.model.generator(dec_out).reshape(-1, VOCAB)
        return F.cross_entropy(scores, target.reshape(-1), reduction="sum")

    def _compute_class_loss(self, enc_state, labels):
        logits = self.model.classifier(enc_state[-1])
        return F.cross_entropy(logits, labels)

    def __call__(self, batch, dec_out, enc_state):
        class_loss = self._compute_class_loss(enc_state, batch["labels"])
        loss = self._compute_loss(dec_out, batch["tgt_out"])
        normalization = batch["tgt_out"].numel()
        (loss.div(normalization) + class_loss).backward()
        return loss.item() / normalization, class_loss.item()


class Trainer:
    def __init__(self, model, optim, train_loss):
        self.model, self.optim, self.train_loss = model, optim, train_loss

    def _gradient_accumulation(self, batch):
        self.optim.zero_grad()
        dec_out, enc_state = self.model(batch["src"], batch["tgt_in"])
        stats = self.train_loss(batch, dec_out, enc_state)
        nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optim.step()
        return stats

    def train(self, batches, epochs):
        for epoch in range(epochs):
            nmt, cls = 0.0, 0.0
            for batch in batches:
                a, b = self._gradient_accumulation(batch)
                nmt, cls = nmt + a, cls + b
            print(f"epoch {epoch}: nmt {nmt / len(batches):.4f} cls {cls / len(batches):.4f}")


def make_batches(n=20, bs=16):
    out = []
    for _ in range(n):
        src = torch.randint(1, VOCAB, (bs, SRC_LEN))
        tgt = src.flip(1)
        tgt_in = torch.cat([torch.full((bs, 1), BOS), tgt[:, :-1]], 1)
        out.append({"src": src, "tgt_in": tgt_in, "tgt_out": tgt, "labels": (src.sum(1) % 2)})
    return out


model = NMTModel()
optim = torch.optim.Adam(model.parameters(), lr=3e-3)
trainer = Trainer(model, optim, NMTLossCompute(model))
trainer.train(make_batches(), epochs=3)


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
