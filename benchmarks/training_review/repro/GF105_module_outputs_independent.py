"""ok: one forward call returns two heads built on separate bodies (the observation is data, so
nothing that saved tensors is shared); the actor's backward frees only the actor's graph, the
critic's backward walks only the critic's. Outputs of one module call do not share a graph by
being returned together."""
import torch
from torch import nn


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.actor_body, self.critic_body = nn.Linear(4, 8), nn.Linear(4, 8)
        self.pi, self.v = nn.Linear(8, 2), nn.Linear(8, 1)

    def forward(self, obs):
        return {"logp": torch.log_softmax(self.pi(torch.tanh(self.actor_body(obs))), -1),
                "v": self.v(torch.tanh(self.critic_body(obs)))}


torch.manual_seed(0)
network = ActorCritic()
actor_opt = torch.optim.SGD([*network.actor_body.parameters(), *network.pi.parameters()], lr=0.1)
critic_opt = torch.optim.SGD([*network.critic_body.parameters(), *network.v.parameters()], lr=0.1)
for _ in range(3):
    obs, adv, ret = torch.randn(5, 4), torch.randn(5), torch.randn(5, 1)
    prediction = network(obs)
    policy_loss = -(prediction["logp"][:, 0] * adv).mean()
    value_loss = (ret - prediction["v"]).pow(2).mean()
    actor_opt.zero_grad()
    policy_loss.backward()
    actor_opt.step()
    critic_opt.zero_grad()
    value_loss.backward()
    critic_opt.step()
print("ok")
