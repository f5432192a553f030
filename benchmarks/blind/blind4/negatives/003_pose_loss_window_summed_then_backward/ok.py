"""Keypoint-heatmap regressor trained with a loss accumulated over a window of micro-batches:
the window's losses are summed, backpropagated once, then the optimizer steps and the window restarts."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

N_JOINTS, FEAT = 5, 20


class PoseRegressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(FEAT, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.heat = nn.Linear(64, N_JOINTS * 2)
        self.vis = nn.Linear(64, N_JOINTS)

    def forward(self, x):
        h = self.backbone(x)
        return self.heat(h).view(-1, N_JOINTS, 2), self.vis(h)


def micro_batches(n, bs=16):
    gen = torch.Generator().manual_seed(2)
    proj = torch.randn(FEAT, N_JOINTS * 2, generator=gen) * 0.3
    for _ in range(n):
        x = torch.randn(bs, FEAT, generator=gen)
        joints = torch.tanh(x @ proj).view(bs, N_JOINTS, 2)
        yield x, joints, (joints.norm(dim=-1) > 0.6).float()


model = PoseRegressor()
optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
accumulation_steps = 4
window_loss, running_loss, n_updates = 0.0, 0.0, 0
optimizer.zero_grad()
for i, (x, joints, visible) in enumerate(micro_batches(200)):
    pred_joints, vis_logits = model(x)
    loss_2d = F.smooth_l1_loss(pred_joints, joints)
    loss_vis = F.binary_cross_entropy_with_logits(vis_logits, visible)
    window_loss = window_loss + (loss_2d + 0.2 * loss_vis) / accumulation_steps
    if (i + 1) % accumulation_steps == 0:
        window_loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        running_loss += window_loss.item()
        n_updates += 1
        window_loss = 0.0
        if n_updates % 10 == 0:
            print(f"update {n_updates}: mean window loss {running_loss / n_updates:.5f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
