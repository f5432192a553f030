"""Self-supervised depth model wrapper: training_step returns the losses, the epoch loop keeps every
batch output to compute epoch-level averages at the end of the epoch."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class DepthNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())
        self.dec = nn.Conv2d(8, 1, 3, padding=1)

    def forward(self, rgb):
        return F.softplus(self.dec(self.enc(rgb))) + 0.1


class ModelWrapper:
    def __init__(self, smoothness_weight=0.05):
        self.depth_net = DepthNet()
        self.optimizer = torch.optim.Adam(self.depth_net.parameters(), lr=2e-3)
        self.smoothness_weight = smoothness_weight

    def training_step(self, batch):
        depth = self.depth_net(batch["rgb"])
        photometric = (depth - batch["target_depth"]).abs().mean()
        dx = (depth[..., :, 1:] - depth[..., :, :-1]).abs().mean()
        dy = (depth[..., 1:, :] - depth[..., :-1, :]).abs().mean()
        smoothness = dx + dy
        loss = photometric + self.smoothness_weight * smoothness
        return {"loss": loss, "metrics": {"photometric_loss": photometric, "smoothness_loss": smoothness}}

    def training_epoch_end(self, output_batches):
        avg = {"avg_train-loss": torch.stack([o["loss"] for o in output_batches]).mean()}
        for key in output_batches[0]["metrics"]:
            avg["avg_train-" + key] = torch.stack([o["metrics"][key] for o in output_batches]).mean()
        return {k: round(float(v), 4) for k, v in avg.items()}


def make_loader(n=40, bs=2):
    loader = []
    for _ in range(n):
        rgb = torch.rand(bs, 3, 12, 12)
        target = 1.0 + rgb.mean(1, keepdim=True) * 2
        loader.append({"rgb": rgb, "target_depth": target})
    return loader


def train(wrapper, loader, epochs):
    for epoch in range(epochs):
        outputs = []
        for batch in loader:
            wrapper.optimizer.zero_grad()
            output = wrapper.training_step(batch)
            output["loss"].backward()
            wrapper.optimizer.step()
            outputs.append({"loss": output["loss"].detach(),
                            "metrics": {k: v.detach() for k, v in output["metrics"].items()}})
        print(f"epoch {epoch}: {wrapper.training_epoch_end(outputs)}")


wrapper = ModelWrapper()
train(wrapper, make_loader(), epochs=2)


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(wrapper.depth_net):.8f}")
