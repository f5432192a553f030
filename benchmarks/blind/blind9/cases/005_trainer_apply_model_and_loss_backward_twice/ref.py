"""Minimal callback-driven trainer (inferno-style) for a small regression network."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Callback:
    def begin_of_training_iteration(self, trainer, **kw):
        pass

    def after_model_and_loss_is_applied(self, trainer, **kw):
        pass

    def end_of_training_iteration(self, trainer, **kw):
        pass


class GradientNormLogger(Callback):
    """Records the global gradient norm after the loss has been backpropagated."""

    def __init__(self):
        self.norms = []

    def end_of_training_iteration(self, trainer, **kw):
        total = 0.0
        for p in trainer.model.parameters():
            if p.grad is not None:
                total += float(p.grad.pow(2).sum())
        self.norms.append(total ** 0.5)


class Trainer:
    def __init__(self, model, criterion, optimizer, callbacks=()):
        self.model, self.criterion, self.optimizer = model, criterion, optimizer
        self.callbacks = list(callbacks)
        self.iteration_count = 0

    def call(self, event, **kw):
        for cb in self.callbacks:
            getattr(cb, event)(self, **kw)

    def apply_model_and_loss(self, inputs, target, backward=True):
        prediction = self.model(inputs)
        loss = self.criterion(prediction, target)
        if backward:
            loss.backward()
        return prediction, loss

    def train_for(self, loader, num_epochs):
        self.model.train()
        for epoch in range(num_epochs):
            for inputs, target in loader:
                self.call("begin_of_training_iteration")
                self.optimizer.zero_grad()
                prediction, loss = self.apply_model_and_loss(inputs, target, backward=False)
                self.call("after_model_and_loss_is_applied", prediction=prediction, loss=loss)
                # backward outside of apply_model_and_loss, so callbacks can act on the loss first
                loss.backward()
                self.call("end_of_training_iteration")
                self.optimizer.step()
                self.iteration_count += 1
            print(f"epoch {epoch}: last loss {loss.item():.5f}")


def make_loader(n_batches=25, bs=32):
    w = torch.randn(10, 1)
    out = []
    for _ in range(n_batches):
        x = torch.randn(bs, 10)
        out.append((x, torch.tanh(x @ w) + 0.1 * x[:, :1]))
    return out


model = nn.Sequential(nn.Linear(10, 64), nn.Tanh(), nn.Linear(64, 1))
logger = GradientNormLogger()
trainer = Trainer(model, nn.MSELoss(), torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), [logger])
trainer.train_for(make_loader(), num_epochs=3)
print(f"mean grad norm {sum(logger.norms) / len(logger.norms):.5f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
