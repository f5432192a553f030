"""A policy-gradient learner that scores one collected batch with its value network once, in
``attach_baselines``, and then takes several update epochs over the batch: the baselines in the
batch's field carry the value network's graph, and the second epoch's backward walks it again.
The value network is trained by its own regression loss, built afresh every epoch; the gradient
the policy loss sent it through the baselines at the first epoch is the bug's. The expert
detaches the baselines where they are stored."""
from dataclasses import dataclass
from typing import Optional

import torch

torch.manual_seed(0)


@dataclass
class Batch:
    obs: torch.Tensor
    picked: torch.Tensor
    returns: torch.Tensor
    baselines: Optional[torch.Tensor] = None


class Learner:
    def __init__(self):
        self.policy = torch.nn.Linear(4, 3)
        self.value = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
        self.opt = torch.optim.SGD([*self.policy.parameters(), *self.value.parameters()], lr=0.05)

    def attach_baselines(self, batch):
        batch.baselines = self.value(batch.obs).squeeze(1)

    def update(self, batch, epochs=3):
        self.attach_baselines(batch)
        for _ in range(epochs):
            logp = torch.log_softmax(self.policy(batch.obs), 1).gather(1, batch.picked[:, None]).squeeze(1)
            policy_loss = -(logp * (batch.returns - batch.baselines)).mean()
            value_loss = (self.value(batch.obs).squeeze(1) - batch.returns).pow(2).mean()
            self.opt.zero_grad()
            (policy_loss + value_loss).backward()
            self.opt.step()


learner = Learner()
for round_ in range(2):
    obs = torch.randn(16, 4)
    learner.update(Batch(obs, torch.randint(0, 3, (16,)), obs.sum(1)))
print("done", learner.policy.weight.sum().item(), learner.value[0].weight.sum().item())
