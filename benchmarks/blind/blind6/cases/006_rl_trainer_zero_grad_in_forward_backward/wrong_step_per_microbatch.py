"""Policy-gradient trainer exposing a forward_backward(microbatch) / optim_step() API; the
controller accumulates the gradients of several micro-batches before each optimizer step."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

OBS, ACTIONS = 10, 4


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(OBS, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, ACTIONS))

    def forward(self, obs):
        return self.net(obs)


class PolicyTrainer:
    def __init__(self, policy, lr=3e-3, max_norm=1.0, num_microbatches=4):
        self.policy = policy
        self.optimizer = torch.optim.AdamW(policy.parameters(), lr=lr, weight_decay=0.0)
        self.max_norm = max_norm
        self.num_microbatches = num_microbatches

    def forward_backward(self, microbatch):
        obs, actions, advantages = microbatch
        self.optimizer.zero_grad()
        logp = F.log_softmax(self.policy(obs), dim=-1).gather(1, actions[:, None]).squeeze(1)
        loss = -(advantages * logp).mean() / self.num_microbatches
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def optim_step(self):
        grad_norm = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_norm)
        self.optimizer.step()
        return float(grad_norm)


def rollout(policy, n=48):
    obs = torch.randn(n, OBS)
    with torch.no_grad():
        actions = torch.distributions.Categorical(logits=policy(obs)).sample()
    reward = (actions == obs[:, :ACTIONS].argmax(1)).float()
    advantages = reward - reward.mean()
    return obs, actions, advantages


policy = Policy()
trainer = PolicyTrainer(policy)
for step in range(40):
    obs, actions, advantages = rollout(policy)
    microbatches = [(obs[i::4], actions[i::4], advantages[i::4]) for i in range(trainer.num_microbatches)]
    loss = sum(trainer.forward_backward(mb) for mb in microbatches)
    grad_norm = trainer.optim_step()
    if step % 10 == 0:
        print(f"step {step}: loss {loss:.4f} grad_norm {grad_norm:.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(policy):.8f}")
