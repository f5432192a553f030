"""Streaming multi-sensor forecaster trained with truncated BPTT; the LSTM state is carried in a dataclass."""
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

N_SENSORS, HIDDEN, WINDOW = 6, 32, 12


@dataclass
class StreamState:
    h: torch.Tensor
    c: torch.Tensor
    windows_seen: int = 0

    @classmethod
    def zeros(cls, batch):
        return cls(torch.zeros(1, batch, HIDDEN), torch.zeros(1, batch, HIDDEN))


class SensorLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(N_SENSORS, HIDDEN, batch_first=True)
        self.head = nn.Linear(HIDDEN, N_SENSORS)

    def forward(self, x, state):
        out, (h, c) = self.lstm(x, (state.h, state.c))
        return self.head(out), (h, c)


class Forecaster:
    def __init__(self, batch):
        self.model = SensorLSTM()
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=5e-3)
        self.state = StreamState.zeros(batch)

    def _advance(self, hc):
        self.state.h, self.state.c = hc
        self.state.windows_seen += 1

    def train_window(self, x, y):
        pred, hc = self.model(x, self.state)
        loss = F.mse_loss(pred, y)
        self.optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self._advance(hc)
        return loss.item()


def make_stream(batch=8, length=WINDOW * 30 + 1):
    t = torch.arange(length, dtype=torch.float32)
    phase = torch.rand(batch, N_SENSORS, 1) * 6.28
    freq = 0.05 + 0.1 * torch.rand(1, N_SENSORS, 1)
    sig = torch.sin(freq * t + phase) + 0.05 * torch.randn(batch, N_SENSORS, length)
    return sig.transpose(1, 2)  # (batch, time, sensors)


stream = make_stream()
forecaster = Forecaster(batch=stream.shape[0])
for start in range(0, stream.shape[1] - 1 - WINDOW + 1, WINDOW):
    x = stream[:, start:start + WINDOW]
    y = stream[:, start + 1:start + WINDOW + 1]
    loss = forecaster.train_window(x, y)
    if forecaster.state.windows_seen % 10 == 0:
        print(f"window {forecaster.state.windows_seen}: mse {loss:.5f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(forecaster.model):.8f}")
