# CycleGAN's loop shape (eriklindernoren/PyTorch-GAN cyclegan.py): three optimizers (both
# generators, D_A, D_B) step in turn; `loss_D = (loss_D_A + loss_D_B) / 2` is overwritten every
# iteration and kept only for the log line. One iteration's value spans three optimizer steps:
# nothing accumulates.
import sys

import torch
from torch import nn

torch.manual_seed(0)


def net(i, o):
    return nn.Sequential(nn.Linear(i, 32), nn.LeakyReLU(0.2), nn.Linear(32, o))


G_AB, G_BA, D_A, D_B = net(8, 8), net(8, 8), net(8, 1), net(8, 1)
optimizer_G = torch.optim.Adam([*G_AB.parameters(), *G_BA.parameters()], lr=2e-4)
optimizer_D_A = torch.optim.Adam(D_A.parameters(), lr=2e-4)
optimizer_D_B = torch.optim.Adam(D_B.parameters(), lr=2e-4)
mse, l1 = nn.MSELoss(), nn.L1Loss()
valid, fake_label = torch.ones(16, 1), torch.zeros(16, 1)

for i in range(30):
    real_A, real_B = torch.randn(16, 8), torch.randn(16, 8)
    optimizer_G.zero_grad()
    fake_B, fake_A = G_AB(real_A), G_BA(real_B)
    loss_GAN = (mse(D_B(fake_B), valid) + mse(D_A(fake_A), valid)) / 2
    loss_cycle = (l1(G_BA(fake_B), real_A) + l1(G_AB(fake_A), real_B)) / 2
    loss_G = loss_GAN + 10.0 * loss_cycle
    loss_G.backward()
    optimizer_G.step()

    optimizer_D_A.zero_grad()
    loss_D_A = (mse(D_A(real_A), valid) + mse(D_A(fake_A.detach()), fake_label)) / 2
    loss_D_A.backward()
    optimizer_D_A.step()

    optimizer_D_B.zero_grad()
    loss_D_B = (mse(D_B(real_B), valid) + mse(D_B(fake_B.detach()), fake_label)) / 2
    loss_D_B.backward()
    optimizer_D_B.step()

    loss_D = (loss_D_A + loss_D_B) / 2
    sys.stdout.write("\r[Batch %d/30] [D loss: %f] [G loss: %f]" % (i, loss_D.item(), loss_G.item()))
