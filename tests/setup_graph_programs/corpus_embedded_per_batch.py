# The corpus embeds each batch when it serves it: every batch has a graph of its own.
import torch
from torch import nn

torch.manual_seed(0)


class Corpus:
    def __init__(self, ids, embedding, batch_size):
        self.ids, self.embedding = ids, embedding
        self.batch_size = batch_size

    def batches(self):
        for start in range(0, len(self.ids), self.batch_size):
            yield self.embedding(self.ids[start : start + self.batch_size])


embedding = nn.Embedding(50, 8)
corpus = Corpus(torch.randint(0, 50, (40,)), embedding, batch_size=10)
scorer = nn.Linear(8, 1)
optimizer = torch.optim.SGD(scorer.parameters(), lr=0.1)
for epoch in range(3):
    for vectors in corpus.batches():
        optimizer.zero_grad()
        loss = scorer(vectors).pow(2).mean()
        loss.backward()
        optimizer.step()
print(float(sum(p.detach().abs().sum() for p in scorer.parameters())))
