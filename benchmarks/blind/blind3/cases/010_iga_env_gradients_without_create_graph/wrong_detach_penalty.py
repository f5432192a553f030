"""DomainBed-style domain generalisation on a synthetic multi-environment task: an ERM base
algorithm and IGA (inter-environmental gradient alignment), which penalises the variance of the
per-environment loss gradients."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import autograd

torch.manual_seed(0)

N_FEAT, N_CLASSES = 6, 2
HPARAMS = {"lr": 1e-2, "weight_decay": 0.0, "mlp_width": 16, "penalty": 200.0, "batch_size": 32}


class Algorithm(nn.Module):
    def __init__(self, in_features, num_classes, num_domains, hparams):
        super().__init__()
        self.hparams = hparams
        self.num_domains = num_domains

    def update(self, minibatches, unlabeled=None):
        raise NotImplementedError

    def predict(self, x):
        raise NotImplementedError


class ERM(Algorithm):
    def __init__(self, in_features, num_classes, num_domains, hparams):
        super().__init__(in_features, num_classes, num_domains, hparams)
        width = hparams["mlp_width"]
        self.featurizer = nn.Sequential(nn.Linear(in_features, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU())
        self.classifier = nn.Linear(width, num_classes)
        self.network = nn.Sequential(self.featurizer, self.classifier)
        self.optimizer = torch.optim.Adam(self.network.parameters(), lr=hparams["lr"],
                                          weight_decay=hparams["weight_decay"])

    def update(self, minibatches, unlabeled=None):
        all_x = torch.cat([x for x, y in minibatches])
        all_y = torch.cat([y for x, y in minibatches])
        loss = F.cross_entropy(self.predict(all_x), all_y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return {"loss": loss.item()}

    def predict(self, x):
        return self.network(x)


class IGA(ERM):
    """Inter-environmental Gradient Alignment (https://arxiv.org/abs/2008.01883v2)."""

    def update(self, minibatches, unlabeled=None):
        total_loss = 0
        grads = []
        for i, (x, y) in enumerate(minibatches):
            logits = self.network(x)
            env_loss = F.cross_entropy(logits, y)
            total_loss += env_loss
            env_grad = autograd.grad(env_loss, self.network.parameters(), retain_graph=True)
            grads.append(env_grad)

        mean_loss = total_loss / len(minibatches)
        mean_grad = autograd.grad(mean_loss, self.network.parameters(), retain_graph=True)

        # trace of the gradient covariance across environments
        penalty_value = 0
        for grad in grads:
            for g, mean_g in zip(grad, mean_grad):
                penalty_value += (g - mean_g).pow(2).sum()

        objective = mean_loss + self.hparams["penalty"] * penalty_value.detach()
        self.optimizer.zero_grad()
        objective.backward()
        self.optimizer.step()
        return {"loss": mean_loss.item(), "penalty": penalty_value.item()}


def make_environment(n, spurious_corr):
    y = torch.randint(0, N_CLASSES, (n,))
    sign = y.float() * 2 - 1
    core = sign[:, None] * 0.6 + torch.randn(n, 3)
    flip = (torch.rand(n) > spurious_corr).float() * -2 + 1
    spurious = (sign * flip)[:, None] * 1.5 + 0.3 * torch.randn(n, 3)
    return torch.cat([core, spurious], 1), y


def minibatch_iterators(envs, batch_size):
    while True:
        yield [(x[idx], y[idx]) for x, y in envs for idx in [torch.randint(0, x.size(0), (batch_size,))]]


train_envs = [make_environment(400, c) for c in (0.95, 0.8, 0.65)]
algorithm = IGA(N_FEAT, N_CLASSES, len(train_envs), HPARAMS)
batches = minibatch_iterators(train_envs, HPARAMS["batch_size"])
for step in range(120):
    stats = algorithm.update(next(batches))
    if step % 40 == 39:
        print(f"step {step + 1}: loss {stats['loss']:.4f} penalty {stats['penalty']:.6f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(algorithm.network):.8f}")
