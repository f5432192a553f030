"""A super-resolution GAN in miniature: the critic's score of the fake is computed once and
used by both losses; the critic's loss keeps the graph (retain_graph=True), the critic steps,
and the generator's loss (pixel + adversarial) then backpropagates through the critic's old
weights. Detaching the score in the generator's loss also runs, and the generator still gets
a gradient from its pixel term, but its adversarial gradient is gone. The expert scores the
fake again with the stepped critic."""
import torch

torch.manual_seed(0)
G = torch.nn.Sequential(torch.nn.Linear(3, 6), torch.nn.Tanh(), torch.nn.Linear(6, 4))
D = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.LeakyReLU(0.2), torch.nn.Linear(5, 1))
opt_g = torch.optim.Adam(G.parameters(), lr=1e-2)
opt_d = torch.optim.Adam(D.parameters(), lr=1e-2)


def generator_loss(score, fake, target):
    return (fake - target).pow(2).mean() + 0.1 * (1 - score)


for i in range(5):
    low = torch.randn(8, 3)
    high = torch.cat([low, low.sum(1, keepdim=True)], 1)
    fake = G(low)
    D.zero_grad()
    real_score = torch.sigmoid(D(high)).mean()
    fake_score = torch.sigmoid(D(fake)).mean()
    d_loss = 1 - real_score + fake_score
    d_loss.backward(retain_graph=True)
    opt_d.step()
    G.zero_grad()
    fake_score = torch.sigmoid(D(fake)).mean()
    g_loss = generator_loss(fake_score, fake, high)
    g_loss.backward()
    opt_g.step()
print("done", G[0].weight.sum().item(), D[0].weight.sum().item())
