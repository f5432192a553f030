"""A minimal Trainer (modelled on the Hugging Face one) and a subclass that adds an n-gram
consistency term to the language-model loss."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

VOCAB, DIM, SEQ = 16, 24, 8


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.mix = nn.Linear(2 * DIM, DIM)
        self.out = nn.Linear(DIM, VOCAB)

    def forward(self, ids):
        e = self.emb(ids)
        prev = torch.cat([torch.zeros_like(e[:, :1]), e[:, :-1]], 1)
        return self.out(torch.tanh(self.mix(torch.cat([e, prev], -1))))


class Trainer:
    def __init__(self, model, train_data, lr=0.1, max_grad_norm=1.0):
        self.model = model
        self.train_data = train_data
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        self.max_grad_norm = max_grad_norm
        self.global_step = 0

    def compute_loss(self, model, inputs):
        logits = model(inputs["input_ids"])
        return F.cross_entropy(logits.reshape(-1, VOCAB), inputs["labels"].reshape(-1))

    def training_step(self, model, inputs):
        """Forward pass; returns the loss of the batch (the trainer does the backward pass)."""
        model.train()
        return self.compute_loss(model, inputs)

    def _backward(self, loss):
        loss.backward()

    def train(self, epochs):
        for epoch in range(epochs):
            tr_loss = 0.0
            for inputs in self.train_data:
                self.optimizer.zero_grad()
                loss = self.training_step(self.model, inputs)
                self._backward(loss)
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
                self.optimizer.step()
                self.global_step += 1
                tr_loss += loss.item()
            print(f"epoch {epoch}: loss {tr_loss / len(self.train_data):.4f}")


class NgramTrainer(Trainer):
    """Adds a penalty that keeps predicted bigram statistics close to the corpus statistics."""

    def __init__(self, *args, bigram_prior, ngram_weight=0.5, **kwargs):
        super().__init__(*args, **kwargs)
        self.bigram_prior = bigram_prior
        self.ngram_weight = ngram_weight

    def training_step(self, model, inputs):
        model.train()
        logits = model(inputs["input_ids"])
        lm_loss = F.cross_entropy(logits.reshape(-1, VOCAB), inputs["labels"].reshape(-1))
        probs = logits.softmax(-1)
        prev = F.one_hot(inputs["input_ids"], VOCAB).float()
        bigram = torch.einsum("bti,btj->ij", prev, probs) / probs.shape[0] / probs.shape[1]
        ngram_loss = (bigram - self.bigram_prior).abs().sum()
        loss = lm_loss + self.ngram_weight * ngram_loss
        return loss


def make_data(n_batches=20, batch=8):
    data = []
    for _ in range(n_batches):
        start = torch.randint(0, VOCAB, (batch, 1))
        ids = (start + torch.arange(SEQ + 1)[None] * torch.randint(1, 3, (batch, 1))) % VOCAB
        data.append({"input_ids": ids[:, :-1], "labels": ids[:, 1:]})
    return data


data = make_data()
prior = torch.zeros(VOCAB, VOCAB)
for b in data:
    prior.index_put_((b["input_ids"].reshape(-1), b["labels"].reshape(-1)), torch.tensor(1.0), accumulate=True)
prior /= prior.sum()

model = TinyLM()
trainer = NgramTrainer(model, data, bigram_prior=prior)
trainer.train(epochs=3)


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
