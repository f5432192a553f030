"""makemore-style character MLP (embedding table C, one tanh hidden layer), trained with
hand-written SGD on minibatches of (context, next char) pairs."""
import torch
import torch.nn.functional as F

g = torch.Generator().manual_seed(2147483647)

VOCAB, BLOCK = 11, 3


def build_dataset(n_words=300):
    # words from a fixed random bigram chain; '.' (index 0) ends a word
    trans = torch.softmax(torch.randn(VOCAB, VOCAB, generator=g) * 2.0, 1)
    X, Y = [], []
    for _ in range(n_words):
        context = [0] * BLOCK
        ix = int(torch.randint(1, VOCAB, (1,), generator=g))
        for _ in range(12):
            X.append(context)
            Y.append(ix)
            context = context[1:] + [ix]
            if ix == 0:
                break
            ix = int(torch.multinomial(trans[ix], 1, generator=g))
    return torch.tensor(X), torch.tensor(Y)


class CharMLP:
    def __init__(self, n_embd=6, n_hidden=48):
        self.C = torch.randn((VOCAB, n_embd), generator=g)
        self.W1 = torch.randn((BLOCK * n_embd, n_hidden), generator=g) * 0.3
        self.b1 = torch.randn(n_hidden, generator=g) * 0.01
        self.W2 = torch.randn((n_hidden, VOCAB), generator=g) * 0.1
        self.b2 = torch.zeros(VOCAB)
        self.parameters = [self.C, self.W1, self.b1, self.W2, self.b2]
        for p in self.parameters:
            p.requires_grad = True

    def logits(self, emb):
        h = torch.tanh(emb.view(emb.shape[0], -1) @ self.W1 + self.b1)
        return h @ self.W2 + self.b2


class Trainer:
    def __init__(self, model, Xtr, Ytr, batch_size=32):
        self.model = model
        self.Xtr, self.Ytr = Xtr, Ytr
        self.batch_size = batch_size
        # the contexts never change, so look their embeddings up once
        self.emb_all = model.C[Xtr]

    def step(self, lr):
        ix = torch.randint(0, self.Xtr.shape[0], (self.batch_size,), generator=g)
        emb = self.emb_all[ix]
        loss = F.cross_entropy(self.model.logits(emb), self.Ytr[ix])
        for p in self.model.parameters:
            p.grad = None
        loss.backward()
        for p in self.model.parameters:
            p.data += -lr * p.grad
        return loss.item()

    def evaluate(self):
        with torch.no_grad():
            return F.cross_entropy(self.model.logits(self.model.C[self.Xtr]), self.Ytr).item()


Xtr, Ytr = build_dataset()
model = CharMLP()
trainer = Trainer(model, Xtr, Ytr)
for i in range(400):
    lr = 0.1 if i < 300 else 0.01
    loss = trainer.step(lr)
    if i % 100 == 0:
        print(f"step {i}: minibatch loss {loss:.4f}")
print(f"train loss {trainer.evaluate():.4f}")

print(f"CHECKSUM {sum(float(p.detach().double().abs().sum()) for p in model.parameters):.8f}")
