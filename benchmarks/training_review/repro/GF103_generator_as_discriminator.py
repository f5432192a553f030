# ok: WGAN-style steps. The D step applies G to the noise and detaches its output; the G step
# applies G to the same noise again. `z` is data and `G(z).detach()` reaches no backward
# through G, so nothing is backpropagated twice.
import torch, torch.nn as nn
torch.manual_seed(0)

class Noise:  # an opaque producer of data (like Variable(Tensor(np.random.normal(...))))
    def draw(self, n):
        return torch.randn(n, 4)

G = nn.Linear(4, 6)
D = nn.Linear(6, 1)
opt_g = torch.optim.RMSprop(G.parameters(), lr=1e-3)
opt_d = torch.optim.RMSprop(D.parameters(), lr=1e-3)
real = torch.randn(5, 6)
source = Noise()
for _ in range(3):
    opt_d.zero_grad()
    z = source.draw(5)
    fake = G(z).detach()
    loss_d = -D(real).mean() + D(fake).mean()
    loss_d.backward()
    opt_d.step()
    opt_g.zero_grad()
    loss_g = -D(G(z)).mean()
    loss_g.backward()
    opt_g.step()
print("ran", round(loss_g.item(), 4))
