# A corpus object embeds its token ids once, in its constructor, with an embedding handed in
# while autograd records: every batch it serves is a slice of that one graph.
import torch
from torch import nn

torch.manual_seed(0)


class Corpus:
    def __init__(self, ids, embedding, batch_size):
        self.vectors = embedding(ids)
        self.batch_size = batch_size

    def batches(self):
        for start in range(0, len(self.vectors), self.batch_size):
            yield self.vectors[start : start + self.batch_size]


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
