"""Multi-category object counting with a small FPN: density maps regressed from fused pyramid levels."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

N_CLASSES = 3


def conv_relu(cin, cout, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1), nn.ReLU(inplace=True))


class FPNHead(nn.Module):
    def __init__(self, in_channels=(8, 16, 32), out_channels=16):
        super().__init__()
        self.lateral_convs = nn.ModuleList(
            nn.Sequential(nn.Conv2d(c, out_channels, 1), nn.ReLU(inplace=True)) for c in in_channels)
        self.fpn_convs = nn.ModuleList(conv_relu(out_channels, out_channels) for _ in in_channels)

    def forward(self, feats):
        laterals = [conv(f) for conv, f in zip(self.lateral_convs, feats)]
        for i in range(len(laterals) - 1, 0, -1):
            prev_shape = laterals[i - 1].shape[2:]
            laterals[i - 1] += F.interpolate(laterals[i], size=prev_shape, mode="nearest")
        return [conv(lat) for conv, lat in zip(self.fpn_convs, laterals)]


class CountingNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stage1 = conv_relu(3, 8)
        self.stage2 = conv_relu(8, 16, stride=2)
        self.stage3 = conv_relu(16, 32, stride=2)
        self.fpn = FPNHead()
        self.density = nn.Conv2d(16, N_CLASSES, 1)

    def forward(self, img):
        c1 = self.stage1(img)
        c2 = self.stage2(c1)
        c3 = self.stage3(c2)
        p1 = self.fpn([c1, c2, c3])[0]
        return F.softplus(self.density(p1))


def synthetic_batch(gen, n=4, size=16):
    img = 0.1 * torch.randn(n, 3, size, size, generator=gen)
    density = torch.zeros(n, N_CLASSES, size, size)
    for b in range(n):
        for c in range(N_CLASSES):
            k = int(torch.randint(1, 4, (1,), generator=gen))
            ys = torch.randint(0, size, (k,), generator=gen)
            xs = torch.randint(0, size, (k,), generator=gen)
            density[b, c, ys, xs] = 1.0
            img[b, c, ys, xs] += 1.0
    return img, F.avg_pool2d(density, 3, 1, 1) * 9


model = CountingNet()
optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
gen = torch.Generator().manual_seed(5)
for step in range(40):
    img, target = synthetic_batch(gen)
    pred = model(img)
    loss = F.mse_loss(pred, target) + 0.01 * (pred.sum((2, 3)) - target.sum((2, 3))).abs().mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 10 == 0:
        print(f"step {step}: loss {loss.item():.5f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
