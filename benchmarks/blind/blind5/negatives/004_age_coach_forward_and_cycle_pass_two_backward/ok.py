"""SAM-style coach for a conditional (age) transformation model: one forward pass to the target
age and one cycle pass back to the source age, each backpropagated on its own before one step."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

D = 16


class AgeTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(D + 1, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU())
        self.decoder = nn.Linear(32, D)

    def forward(self, x, age):
        return x + self.decoder(self.encoder(torch.cat([x, age], 1)))


class AgingOracle(nn.Module):
    """Frozen pretrained age regressor (the aging loss network)."""

    def __init__(self):
        super().__init__()
        self.w = nn.Linear(D, 1)
        for p in self.parameters():
            p.requires_grad_(False)

    def forward(self, x):
        return torch.sigmoid(self.w(x))


class Coach:
    def __init__(self):
        self.net = AgeTransformer()
        self.aging = AgingOracle()
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=1e-3)
        self.lambdas = dict(l2=1.0, aging=0.5, id=0.1)

    def calc_loss(self, y, y_hat, target_age, x_ref):
        loss_dict = {
            "l2": F.mse_loss(y_hat, y),
            "aging": F.mse_loss(self.aging(y_hat), target_age),
            "id": 1 - F.cosine_similarity(y_hat, x_ref).mean(),
        }
        loss = sum(self.lambdas[k] * v for k, v in loss_dict.items())
        return loss, {k: v.item() for k, v in loss_dict.items()}

    def train_step(self, x):
        self.optimizer.zero_grad()
        source_age = self.aging(x)
        target_age = torch.rand(x.size(0), 1)
        # forward pass
        y_hat = self.net(x, target_age)
        loss, loss_dict = self.calc_loss(x, y_hat, target_age, x)
        loss.backward()
        # cycle pass
        y_hat_clone = y_hat.clone().detach().requires_grad_(True)
        y_recovered = self.net(y_hat_clone, source_age)
        loss_cycle, cycle_dict = self.calc_loss(x, y_recovered, source_age, x)
        loss_cycle.backward()
        self.optimizer.step()
        return loss.item() + loss_cycle.item()


coach = Coach()
for step in range(200):
    total = coach.train_step(torch.randn(32, D))
    if step % 50 == 0:
        print(f"step {step}: loss {total:.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(coach.net):.8f}")
