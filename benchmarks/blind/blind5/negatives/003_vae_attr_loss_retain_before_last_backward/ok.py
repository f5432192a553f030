"""Text-VAE with an attribute discriminator loss on the shared encoder (controlled generation).

The reconstruction gradient of the encoder is clipped on its own before the attribute loss adds
its gradient, so the two losses are backpropagated separately through the shared encoder graph:
the first backward keeps the graph, the last one frees it."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

VOCAB, EMB, HID, Z, SEQ = 25, 16, 32, 8, 7


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, EMB)
        self.rnn = nn.GRU(EMB, HID, batch_first=True)
        self.mu, self.logvar = nn.Linear(HID, Z), nn.Linear(HID, Z)

    def forward(self, x):
        _, h = self.rnn(self.embed(x))
        return self.mu(h[-1]), self.logvar(h[-1])


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, EMB)
        self.init = nn.Linear(Z + 1, HID)
        self.rnn = nn.GRU(EMB, HID, batch_first=True)
        self.out = nn.Linear(HID, VOCAB)

    def forward(self, z, c, x_in):
        h0 = torch.tanh(self.init(torch.cat([z, c], 1)))[None]
        out, _ = self.rnn(self.embed(x_in), h0)
        return self.out(out)


def make_batches(n=20, bs=24):
    out = []
    for _ in range(n):
        c = torch.randint(0, 2, (bs, 1)).float()
        x = torch.randint(1, VOCAB // 2, (bs, SEQ)) + (c.long() * (VOCAB // 2 - 1))
        x[:, 0] = 0
        out.append((x, c))
    return out


encoder, decoder = Encoder(), Decoder()
attr_head = nn.Linear(Z, 1)
vae_opt = torch.optim.Adam(list(encoder.parameters()) + list(decoder.parameters()), lr=2e-3)
attr_opt = torch.optim.Adam(attr_head.parameters(), lr=2e-3)

for epoch in range(3):
    for x, c in make_batches():
        mu, logvar = encoder(x)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        logits = decoder(z, c, x[:, :-1])
        rec = F.cross_entropy(logits.reshape(-1, VOCAB), x[:, 1:].reshape(-1))
        kl = -0.5 * torch.mean(1 + logvar - mu ** 2 - logvar.exp())
        vae_loss = rec + 0.1 * kl
        attr_loss = F.binary_cross_entropy_with_logits(attr_head(z), c)

        vae_opt.zero_grad()
        attr_opt.zero_grad()
        vae_loss.backward(retain_graph=True)
        enc_norm = torch.nn.utils.clip_grad_norm_(encoder.parameters(), 0.5)
        attr_loss.backward()
        vae_opt.step()
        attr_opt.step()
    print(f"epoch {epoch}: rec {rec.item():.4f} kl {kl.item():.4f} attr {attr_loss.item():.4f} |g_enc| {float(enc_norm):.3f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(encoder, decoder, attr_head):.8f}")
