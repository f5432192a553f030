"""A minimal Lightning-like training loop: the module defines ``training_step(batch, optimizer_idx)``
and ``configure_optimizers()``; the trainer runs every optimizer on every batch."""
import torch


class LiteModule(torch.nn.Module):
    def training_step(self, batch, optimizer_idx):
        raise NotImplementedError

    def configure_optimizers(self):
        raise NotImplementedError

    def on_epoch_end(self, epoch, logs):
        pass


class LiteTrainer:
    def __init__(self, max_epochs=1, gradient_clip_val=None):
        self.max_epochs = max_epochs
        self.gradient_clip_val = gradient_clip_val

    def optimizer_step(self, optimizer, loss, module):
        loss.backward()
        if self.gradient_clip_val is not None:
            torch.nn.utils.clip_grad_norm_(module.parameters(), self.gradient_clip_val)
        optimizer.step()
        optimizer.zero_grad()

    def fit(self, module, dataloader):
        optimizers = module.configure_optimizers()
        for epoch in range(self.max_epochs):
            logs = {i: 0.0 for i in range(len(optimizers))}
            for batch in dataloader:
                for opt_idx, optimizer in enumerate(optimizers):
                    output = module.training_step(batch, opt_idx)
                    self.optimizer_step(optimizer, output["loss"], module)
                    logs[opt_idx] += output["loss"].item() / len(dataloader)
            module.on_epoch_end(epoch, logs)
