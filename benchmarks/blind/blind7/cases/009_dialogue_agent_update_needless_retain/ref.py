"""Dialogue policy trained first by supervised learning on dialogue acts, then fine-tuned with
REINFORCE against a simulated user; both updates live in the agent class."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

STATE, ACTS, BATCH = 10, 6, 32


class DialoguePolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.GRUCell(STATE, 32)
        self.act_head = nn.Linear(32, ACTS)

    def forward(self, turns):
        h = torch.zeros(turns.size(0), 32)
        for t in range(turns.size(1)):
            h = self.encoder(turns[:, t], h)
        return self.act_head(h)


class Agent:
    def __init__(self, grad_clip=5.0):
        self.policy = DialoguePolicy()
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=3e-3)
        self.grad_clip = grad_clip

    def update(self, update_loss):
        self.optimizer.zero_grad()
        update_loss.backward()
        torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.grad_clip)
        self.optimizer.step()

    def sl_step(self, turns, gold_acts):
        logits = self.policy(turns)
        loss = F.cross_entropy(logits, gold_acts)
        self.update(loss)
        return loss.item()

    def rl_step(self, turns, user_simulator):
        logits = self.policy(turns)
        dist = torch.distributions.Categorical(logits=logits)
        acts = dist.sample()
        reward = user_simulator(turns, acts)
        baseline = reward.mean()
        rl_loss = -((reward - baseline) * dist.log_prob(acts)).mean() - 0.01 * dist.entropy().mean()
        self.update(rl_loss)
        return reward.mean().item()


proj = torch.randn(STATE, ACTS)


def dialogue_batch():
    turns = torch.randn(BATCH, 3, STATE)
    gold = (turns[:, -1] @ proj).argmax(-1)
    return turns, gold


def user_simulator(turns, acts):
    gold = (turns[:, -1] @ proj).argmax(-1)
    return (acts == gold).float() - 0.1 * (acts == (gold + 1) % ACTS).float()


agent = Agent()
for it in range(40):
    sl = agent.sl_step(*dialogue_batch())
for it in range(40):
    r = agent.rl_step(dialogue_batch()[0], user_simulator)
print(f"last SL loss {sl:.4f}, last RL reward {r:.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(agent.policy):.8f}")
