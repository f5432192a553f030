"""Wasserstein auto-encoder (WAE-MMD): reconstruction loss plus an MMD penalty between encoded codes
and samples of the prior."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

X_DIM, Z_DIM, BATCH = 16, 4, 32
LAMBDA_MMD = 10.0


def imq_kernel(a, b, scale=2.0 * Z_DIM):
    d = (a[:, None, :] - b[None, :, :]).pow(2).sum(-1)
    return scale / (scale + d)


def mmd_penalty(z_q, z_p):
    n = z_q.size(0)
    off = 1.0 - torch.eye(n)
    k_qq = (imq_kernel(z_q, z_q) * off).sum() / (n * (n - 1))
    k_pp = (imq_kernel(z_p, z_p) * off).sum() / (n * (n - 1))
    k_qp = imq_kernel(z_q, z_p).mean()
    return k_qq + k_pp - 2 * k_qp


encoder = nn.Sequential(nn.Linear(X_DIM, 32), nn.ReLU(), nn.Linear(32, Z_DIM))
decoder = nn.Sequential(nn.Linear(Z_DIM, 32), nn.ReLU(), nn.Linear(32, X_DIM))
enc_optim = torch.optim.Adam(encoder.parameters(), lr=1e-3)
dec_optim = torch.optim.Adam(decoder.parameters(), lr=1e-3)

basis = torch.randn(Z_DIM, X_DIM)


def sample_batch():
    return torch.tanh(torch.randn(BATCH, Z_DIM) @ basis) + 0.05 * torch.randn(BATCH, X_DIM)


for step in range(120):
    images = sample_batch()
    enc_optim.zero_grad()
    dec_optim.zero_grad()

    z_tilde = encoder(images)
    x_recon = decoder(z_tilde)
    recon_loss = F.mse_loss(x_recon, images)
    recon_loss.backward()

    z_fake = torch.randn(BATCH, Z_DIM)
    mmd_loss = LAMBDA_MMD * mmd_penalty(z_tilde.detach(), z_fake)
    mmd_loss.backward()

    enc_optim.step()
    dec_optim.step()
    if step % 40 == 0:
        print(f"step {step}: recon {recon_loss.item():.4f} mmd {mmd_loss.item():.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(encoder, decoder):.8f}")
