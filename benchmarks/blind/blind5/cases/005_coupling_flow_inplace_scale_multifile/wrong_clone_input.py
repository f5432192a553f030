"""RealNVP-style density estimation of a 4-D banana-shaped distribution (coupling layers from flows.py)."""
import torch

import flows
from flows import Flow, ReversePermutation


class AffineCoupling(flows.AffineCoupling):
    def forward(self, x):
        x_id, x_tr = x[:, self.mask.bool()], x[:, ~self.mask.bool()]
        params = self.transform_net(x_id)
        unconstrained_scale, shift = params[:, :self.n_transform], params[:, self.n_transform:]
        log_scale = torch.tanh(unconstrained_scale.clone() / self.clamp)
        log_scale *= self.clamp
        y_tr = x_tr * torch.exp(log_scale) + shift
        y = torch.empty_like(x)
        y[:, self.mask.bool()] = x_id
        y[:, ~self.mask.bool()] = y_tr
        return y, log_scale.sum(1)

torch.manual_seed(0)

FEATURES = 4


def build_flow(n_layers=4):
    mask = torch.tensor([1.0, 1.0, 0.0, 0.0])
    layers = []
    for _ in range(n_layers):
        layers += [AffineCoupling(FEATURES, mask, hidden_features=32), ReversePermutation()]
    return Flow(layers)


def sample_banana(n):
    z = torch.randn(n, FEATURES)
    x = z.clone()
    x[:, 1] = z[:, 1] + 0.8 * z[:, 0] ** 2 - 0.8
    x[:, 3] = 0.5 * z[:, 3] + torch.sin(2 * z[:, 2])
    return x


flow = build_flow()
optimizer = torch.optim.Adam(flow.parameters(), lr=2e-3)
data = sample_banana(2048)
for epoch in range(6):
    perm = torch.randperm(data.size(0))
    total = 0.0
    for i in range(0, data.size(0), 128):
        batch = data[perm[i:i + 128]]
        loss = -flow.log_prob(batch).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
    print(f"epoch {epoch}: nll {total / 16:.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(flow):.8f}")
