"""GFlowNet with the detailed-balance objective on a 2-D hypergrid; the agent keeps exponential
moving averages of the terminal / non-terminal loss terms for its progress log."""
import torch
import torch.nn as nn

torch.manual_seed(0)

H, NDIM = 7, 2
N_ACTIONS = NDIM + 1  # +1 on each dimension, or stop


def encode(states):
    return torch.cat([nn.functional.one_hot(states[:, d], H).float() for d in range(NDIM)], 1)


def log_reward(states):
    x = states.float() / (H - 1)
    r = 0.05 + 2.0 * ((x - 0.75).abs() < 0.15).all(1).float() + 1.0 * ((x - 0.2).abs() < 0.12).all(1).float()
    return r.log()


class GFlowNetAgent:
    def __init__(self, lr=1e-3, ema_alpha=0.05):
        self.model = nn.Sequential(nn.Linear(H * NDIM, 64), nn.LeakyReLU(), nn.Linear(64, 64), nn.LeakyReLU(),
                                   nn.Linear(64, N_ACTIONS + 1))
        self.opt = torch.optim.Adam(self.model.parameters(), lr=lr)
        self.ema_alpha = ema_alpha
        self.loss_ema = {"term": None, "flow": None}

    def forward_policy(self, states):
        out = self.model(encode(states))
        logits, log_flow = out[:, :N_ACTIONS], out[:, N_ACTIONS]
        invalid = torch.cat([states == H - 1, torch.zeros(states.size(0), 1, dtype=torch.bool)], 1)
        return logits.masked_fill(invalid, -1e9).log_softmax(1), log_flow

    @torch.no_grad()
    def sample_transitions(self, n_traj=16):
        states = torch.zeros(n_traj, NDIM, dtype=torch.long)
        done = torch.zeros(n_traj, dtype=torch.bool)
        trans = []
        while not done.all():
            logp, _ = self.forward_policy(states)
            actions = torch.multinomial(logp.exp(), 1).squeeze(1)
            for i in torch.nonzero(~done).squeeze(1).tolist():
                a = int(actions[i])
                if a == NDIM:
                    trans.append((states[i].clone(), a, states[i].clone(), True))
                    done[i] = True
                else:
                    nxt = states[i].clone()
                    nxt[a] += 1
                    trans.append((states[i].clone(), a, nxt, False))
                    states[i] = nxt
        s, a, s2, term = zip(*trans)
        return torch.stack(s), torch.tensor(a), torch.stack(s2), torch.tensor(term)

    def detailed_balance_losses(self, s, a, s2, term):
        logp, log_flow = self.forward_policy(s)
        logp_a = logp.gather(1, a[:, None]).squeeze(1)
        _, log_flow_next = self.forward_policy(s2)
        n_parents = (s2 > 0).sum(1).clamp(min=1).float()
        log_pb = -n_parents.log()
        flow_res = log_flow + logp_a - log_flow_next - log_pb
        term_res = log_flow + logp_a - log_reward(s)
        return {"term": (term_res[term] ** 2).mean(), "flow": (flow_res[~term] ** 2).mean()}

    @torch.no_grad()
    def update_ema(self, losses):
        for k, v in losses.items():
            prev = self.loss_ema[k]
            self.loss_ema[k] = v.detach() if prev is None else (1 - self.ema_alpha) * prev + self.ema_alpha * v

    def train_step(self):
        losses = self.detailed_balance_losses(*self.sample_transitions())
        loss = losses["term"] + losses["flow"]
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.update_ema(losses)
        return loss.item()


agent = GFlowNetAgent()
for it in range(100):
    loss = agent.train_step()
    if it % 50 == 0:
        ema = agent.loss_ema
        print(f"iter {it}: loss {loss:.4f} ema(term) {float(ema['term']):.4f} ema(flow) {float(ema['flow']):.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(agent.model):.8f}")
