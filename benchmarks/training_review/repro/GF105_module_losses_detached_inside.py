"""ok: a GAN wrapper's forward returns the generator's and the discriminator's losses; the
discriminator sees `fake.detach()` and the real image (data), so the two losses share no graph
and the generator's backward leaves nothing the discriminator's backward needs."""
import torch
from torch import nn


class GanPair(nn.Module):
    def __init__(self):
        super().__init__()
        self.netG, self.netD = nn.Linear(3, 6), nn.Linear(6, 1)

    def forward(self, z, real):
        fake = torch.tanh(self.netG(z))
        loss_g = nn.functional.softplus(-self.netD(fake)).mean()
        loss_d = nn.functional.softplus(self.netD(fake.detach())).mean() + nn.functional.softplus(-self.netD(real)).mean()
        return [loss_g, loss_d]


torch.manual_seed(0)
model = nn.DataParallel(GanPair())
opt_g = torch.optim.Adam(model.module.netG.parameters(), lr=1e-3)
opt_d = torch.optim.Adam(model.module.netD.parameters(), lr=1e-3)
for _ in range(3):
    losses = model(torch.randn(4, 3), torch.randn(4, 6))
    losses = [torch.mean(x) for x in losses]
    loss_G, loss_D = losses[0], losses[1]
    opt_g.zero_grad()
    loss_G.backward()
    opt_g.step()
    opt_d.zero_grad()
    loss_D.backward()
    opt_d.step()
print("ok")
