"""A small Composer-style trainer: models expose forward(batch) and loss(outputs, batch);
loss() may return a single tensor or a tuple of loss terms."""
import torch


class Trainer:
    def __init__(self, model, optimizer, train_dataloader, max_epochs=1, grad_clip_norm=None):
        self.model = model
        self.optimizer = optimizer
        self.train_dataloader = train_dataloader
        self.max_epochs = max_epochs
        self.grad_clip_norm = grad_clip_norm
        self.history = []

    def _train_microbatch(self, batch):
        outputs = self.model(batch)
        losses = self.model.loss(outputs, batch)
        total_loss = 0.0
        if isinstance(losses, (tuple, list)):
            for loss in losses:
                loss.backward()
                total_loss += loss.item()
        else:
            losses.backward()
            total_loss = losses.item()
        return total_loss

    def _train_batch(self, batch):
        self.optimizer.zero_grad()
        total_loss = self._train_microbatch(batch)
        if self.grad_clip_norm is not None:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip_norm)
        self.optimizer.step()
        return total_loss

    def fit(self):
        self.model.train()
        for epoch in range(self.max_epochs):
            epoch_loss = 0.0
            for batch in self.train_dataloader:
                epoch_loss += self._train_batch(batch)
            self.history.append(epoch_loss / len(self.train_dataloader))
            print(f"epoch {epoch}: train loss {self.history[-1]:.5f}")
