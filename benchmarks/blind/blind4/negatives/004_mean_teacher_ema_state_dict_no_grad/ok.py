"""Mean-teacher semi-supervised classification: the teacher is an exponential moving average of the
student's weights, kept as a dict of tensors and evaluated functionally."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call

torch.manual_seed(0)

IN_DIM, N_CLASSES = 12, 4


class Student(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(IN_DIM, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, N_CLASSES))

    def forward(self, x):
        return self.net(x)


class ExponentialMovingAverage:
    def __init__(self, model, decay=0.95):
        self.decay = decay
        self.shadow = {name: p.detach().clone() for name, p in model.named_parameters()}

    @torch.no_grad()
    def update(self, model):
        for name, p in model.named_parameters():
            self.shadow[name] = self.decay * self.shadow[name] + (1 - self.decay) * p

    def predict(self, model, x):
        with torch.no_grad():
            return functional_call(model, self.shadow, (x,))


def batches(n, gen):
    w = torch.randn(IN_DIM, N_CLASSES, generator=torch.Generator().manual_seed(9))
    for _ in range(n):
        x_lab = torch.randn(16, IN_DIM, generator=gen)
        x_unl = torch.randn(48, IN_DIM, generator=gen)
        yield x_lab, (x_lab @ w).argmax(1), x_unl


student = Student()
ema = ExponentialMovingAverage(student)
optimizer = torch.optim.SGD(student.parameters(), lr=0.05, momentum=0.9)
gen = torch.Generator().manual_seed(4)
for step, (x_lab, y_lab, x_unl) in enumerate(batches(150, gen)):
    noisy = x_unl + 0.1 * torch.randn(x_unl.shape, generator=gen)
    teacher_probs = F.softmax(ema.predict(student, x_unl), dim=1)
    consistency = F.mse_loss(F.softmax(student(noisy), dim=1), teacher_probs)
    loss = F.cross_entropy(student(x_lab), y_lab) + 2.0 * consistency
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    ema.update(student)
    if step % 50 == 0:
        print(f"step {step}: loss {loss.item():.4f}")


def checksum(module, shadow):
    return (sum(float(p.detach().double().abs().sum()) for p in module.parameters())
            + sum(float(t.double().abs().sum()) for t in shadow.values()))


print(f"CHECKSUM {checksum(student, ema.shadow):.8f}")
