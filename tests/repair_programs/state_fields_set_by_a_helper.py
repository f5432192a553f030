"""A character model trained on consecutive chunks of one stream, its LSTM cell's state kept in
the fields of a small ``Carry`` object that a helper method sets from the pair the cell returns
(``self.carry.hidden, self.carry.cell = pair``): the next chunk starts from a state whose graph
the previous chunk's backward freed. The expert detaches both fields where they are stored."""
import torch

torch.manual_seed(0)


class Carry:
    def __init__(self, width):
        self.hidden = torch.zeros(2, width)
        self.cell = torch.zeros(2, width)


class Reader:
    def __init__(self):
        self.embed = torch.nn.Embedding(5, 3)
        self.rnn = torch.nn.LSTMCell(3, 6)
        self.out = torch.nn.Linear(6, 5)
        self.params = [*self.embed.parameters(), *self.rnn.parameters(), *self.out.parameters()]
        self.opt = torch.optim.Adam(self.params, lr=0.01)
        self.carry = Carry(6)

    def keep(self, pair):
        self.carry.hidden, self.carry.cell = pair

    def chunk(self, tokens):
        pair = (self.carry.hidden, self.carry.cell)
        loss = 0.0
        for t in range(tokens.shape[1] - 1):
            pair = self.rnn(self.embed(tokens[:, t]), pair)
            loss = loss + torch.nn.functional.cross_entropy(self.out(pair[0]), tokens[:, t + 1])
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.keep(pair)


reader = Reader()
stream = torch.randint(0, 5, (2, 25))
for start in range(0, 20, 4):
    reader.chunk(stream[:, start:start + 5])
print("done", reader.out.weight.sum().item())
