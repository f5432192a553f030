"""Weak-supervision label model: learns the accuracy/propensity of each labeling function by
maximising the marginal likelihood of their (possibly abstaining) votes."""
import torch
import torch.nn as nn

torch.manual_seed(0)

N_LF, N_CLASSES = 6, 3


class LearningConfig:
    def __init__(self, epochs=3, batch_size=32, lr=0.05, momentum=0.9, l2=1e-3, verbose=True):
        self.epochs, self.batch_size, self.lr = epochs, batch_size, lr
        self.momentum, self.l2, self.verbose = momentum, l2, verbose


class NaiveBayesLabelModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.accuracy = nn.Parameter(torch.full((N_LF,), 0.7))
        self.propensity = nn.Parameter(torch.zeros(N_LF))
        self.class_balance = nn.Parameter(torch.zeros(N_CLASSES))

    def forward(self, votes):
        """Log marginal likelihood of each row of votes (0 = abstain, 1..K = class)."""
        log_acc = torch.nn.functional.logsigmoid(self.accuracy)
        log_err = torch.nn.functional.logsigmoid(-self.accuracy) - torch.log(torch.tensor(N_CLASSES - 1.0))
        log_vote = torch.nn.functional.logsigmoid(self.propensity)
        log_abstain = torch.nn.functional.logsigmoid(-self.propensity)
        ll = []
        for y in range(1, N_CLASSES + 1):
            per_lf = torch.where(votes == 0, log_abstain,
                                 log_vote + torch.where(votes == y, log_acc, log_err))
            ll.append(per_lf.sum(1))
        joint = torch.stack(ll, 1) + torch.log_softmax(self.class_balance, 0)
        return torch.logsumexp(joint, 1)

    def _regularization(self, l2):
        return l2 * ((self.accuracy - 0.7) ** 2).sum()

    def estimate_label_model(self, votes, config=None):
        config = config or LearningConfig()
        batches = list(votes.split(config.batch_size))
        self._do_estimate(batches, config)

    def _do_estimate(self, batches, config):
        optimizer = torch.optim.SGD(self.parameters(), lr=config.lr, momentum=config.momentum)
        for epoch in range(config.epochs):
            running_loss = 0.0
            for i, batch in enumerate(batches):
                optimizer.zero_grad()
                loss = -self(batch).mean()
                loss += self._regularization(config.l2)
                loss.backward()
                optimizer.step()
                running_loss += loss
            epoch_loss = running_loss / len(batches)
            if config.verbose:
                print(f"epoch {epoch}: loss {float(epoch_loss):.4f}")


def simulate_votes(n=1280):
    y = torch.randint(1, N_CLASSES + 1, (n,))
    acc = torch.tensor([0.9, 0.8, 0.75, 0.7, 0.6, 0.55])
    prop = torch.tensor([0.3, 0.5, 0.6, 0.4, 0.8, 0.9])
    vote = torch.rand(n, N_LF) < prop
    correct = torch.rand(n, N_LF) < acc
    wrong = (y[:, None] + torch.randint(1, N_CLASSES, (n, N_LF)) - 1) % N_CLASSES + 1
    return torch.where(vote, torch.where(correct, y[:, None], wrong), torch.zeros_like(wrong))


model = NaiveBayesLabelModel()
model.estimate_label_model(simulate_votes())


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
