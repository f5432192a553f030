"""Post-training quantisation by block reconstruction: learnable rounding offsets of a 4-bit block
are optimised so that its output matches the full-precision block on cached calibration data."""
import torch
import torch.nn as nn

torch.manual_seed(0)

ZETA, GAMMA = 1.1, -0.1


class RoundingQuantizer(nn.Module):
    def __init__(self, weight, n_bits=4):
        super().__init__()
        self.levels = 2 ** n_bits - 1
        w_min, w_max = weight.min().item(), weight.max().item()
        self.delta = (w_max - w_min) / self.levels
        self.zero_point = round(-w_min / self.delta)
        self.register_buffer("w_floor", torch.floor(weight / self.delta))
        rest = weight / self.delta - self.w_floor
        self.alpha = nn.Parameter(-torch.log((ZETA - GAMMA) / (rest - GAMMA) - 1))
        self.soft_targets = True

    def rectified_sigmoid(self):
        return torch.clamp(torch.sigmoid(self.alpha) * (ZETA - GAMMA) + GAMMA, 0, 1)

    def forward(self):
        offset = self.rectified_sigmoid() if self.soft_targets else (self.alpha >= 0).float()
        w_int = torch.clamp(self.w_floor + offset + self.zero_point, 0, self.levels)
        return (w_int - self.zero_point) * self.delta


class QuantLinear(nn.Module):
    def __init__(self, linear):
        super().__init__()
        self.quantizer = RoundingQuantizer(linear.weight.detach())
        self.register_buffer("bias", linear.bias.detach().clone())

    def forward(self, x):
        return nn.functional.linear(x, self.quantizer(), self.bias)


class ResidualBlock(nn.Module):
    def __init__(self, fc1, fc2):
        super().__init__()
        self.fc1, self.fc2 = fc1, fc2

    def forward(self, x):
        return torch.relu(x + self.fc2(torch.relu(self.fc1(x))))


class LinearTempDecay:
    def __init__(self, t_max, rel_start_decay=0.2, start_b=20, end_b=2):
        self.t_max, self.start_decay = t_max, rel_start_decay * t_max
        self.start_b, self.end_b = start_b, end_b

    def __call__(self, t):
        if t < self.start_decay:
            return self.start_b
        rel_t = (t - self.start_decay) / (self.t_max - self.start_decay)
        return self.end_b + (self.start_b - self.end_b) * max(0.0, 1 - rel_t)


class ReconstructionLoss:
    def __init__(self, block, max_count, weight=0.01, warmup=0.2):
        self.block, self.weight, self.max_count = block, weight, max_count
        self.warmup = warmup
        self.temp_decay = LinearTempDecay(max_count)
        self.count = 0

    def __call__(self, pred, tgt):
        self.count += 1
        rec_loss = (pred - tgt).pow(2).sum(1).mean()
        b = self.temp_decay(self.count)
        round_loss = 0.0
        if self.count >= self.warmup * self.max_count:
            for m in self.block.modules():
                if isinstance(m, QuantLinear):
                    h = m.quantizer.rectified_sigmoid()
                    round_loss = round_loss + self.weight * (1 - ((h - 0.5).abs() * 2).pow(b)).sum()
        if self.count % 100 == 0:
            print(f"iter {self.count}: rec {rec_loss.item():.5f} round {float(round_loss):.4f} b {b:.1f}")
        return rec_loss + round_loss


def block_reconstruction(qblock, fp_block, cali_data, iters=300, batch_size=32, lr=4e-2):
    with torch.no_grad():
        cached_inps, cached_outs = cali_data, fp_block(cali_data)
    alphas = [m.quantizer.alpha for m in qblock.modules() if isinstance(m, QuantLinear)]
    optimizer = torch.optim.Adam(alphas, lr=lr)
    loss_func = ReconstructionLoss(qblock, max_count=iters)
    for i in range(iters):
        idx = torch.randperm(cali_data.size(0))[:batch_size]
        cur_inp, cur_out = cached_inps[idx], cached_outs[idx]
        optimizer.zero_grad()
        out_quant = qblock(cur_inp)
        err = loss_func(out_quant, cur_out)
        err.backward()
        optimizer.step()
    for m in qblock.modules():
        if isinstance(m, QuantLinear):
            m.quantizer.soft_targets = False


fp_block = ResidualBlock(nn.Linear(16, 32), nn.Linear(32, 16))
qblock = ResidualBlock(QuantLinear(fp_block.fc1), QuantLinear(fp_block.fc2))
cali_data = torch.randn(256, 16)
block_reconstruction(qblock, fp_block, cali_data)
with torch.no_grad():
    print(f"hard-rounded block error {(qblock(cali_data) - fp_block(cali_data)).pow(2).mean().item():.6f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(qblock):.8f}")
