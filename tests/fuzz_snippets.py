"""Buggy training-loop snippets for the fuzz generator, one bug shape per rule.

Each snippet is written with 4-space indentation; the generator re-indents it with the file's
indent unit and splices it in. Every identifier of a snippet ends with the marker `_mN` (written
`_M` here), and its first and last lines mention the marker, so the lines a fix may touch are
found again in any text: from the first to the last line that carries the marker.
`{deep}` may become a long elif chain, `{sum}` a long `+ loss` sum (up to ~1,000: CPython
compiles them). `{pre}` marks a simple statement that may get a non-ASCII statement in front of it (`x = "é"; `),
so that fixed columns come after multi-byte characters.
"""

from __future__ import annotations

# (expected code, template); variants of one shape share the code.
SNIPPETS: list[tuple[str, str]] = [
    ("GF301", """\
net_M = nn.Linear(3, 1); opt_M = torch.optim.SGD(net_M.parameters(), lr=0.1)
total_M = 0.0
for x_M in batches_M:
    opt_M.zero_grad()
    loss_M = net_M(x_M).sum()
    loss_M.backward()
    {deep}
    opt_M.step()
    {pre}total_M += loss_M{sum}
"""),
    ("GF301", """\
net_M = nn.Linear(3, 1)
opt_M = torch.optim.SGD(net_M.parameters(), lr=0.1)
hist_M = []
for x_M in batches_M: opt_M.zero_grad(); loss_M = net_M(x_M).sum(); loss_M.backward(); opt_M.step(); hist_M.append(loss_M)
"""),
    ("GF302", """\
net_M = nn.Linear(3, 1)
opt_M = torch.optim.SGD(net_M.parameters(), lr=0.1)
for x_M in batches_M:
    opt_M.zero_grad()
    loss_M = net_M(x_M).sum()
    {pre}loss_M.backward(retain_graph=True)
    opt_M.step()
"""),
    ("GF302", """\
net_M = nn.Linear(3, 1)
opt_M = torch.optim.SGD(net_M.parameters(), lr=0.1)
for x_M in batches_M:
    opt_M.zero_grad()
    loss_M = net_M(x_M).sum()
    loss_M \\
        .backward(retain_graph=\\
            True)
    opt_M.step()
"""),
    ("GF106", """\
net_M = nn.Linear(5, 2)
loss_M = net_M(torch.randn(5)).sum()
{pre}loss_M.backward()
loss_M.backward()
"""),
    ("GF201", """\
net_M = nn.Linear(3, 1)
opt_M = torch.optim.SGD(net_M.parameters(), lr=0.1)
for x_M in batches_M:
    loss_M = net_M(x_M).sum()
    loss_M.backward()
    {pre}opt_M.zero_grad()
    opt_M.step()
"""),
    ("GF201", """\
net_M = nn.Linear(3, 1)
opt_M = torch.optim.SGD(net_M.parameters(), lr=0.1)
for x_M in batches_M: loss_M = net_M(x_M).sum(); loss_M.backward(); opt_M.zero_grad(); opt_M.step()
"""),
    ("GF202", """\
net_M = nn.Linear(3, 1)
opt_M = torch.optim.Adam(net_M.parameters(), lr=0.05)
for step_M in range(20):
    opt_M.zero_grad()
    loss_M = net_M(torch.randn(4, 3)).sum()
    {pre}opt_M.step()
    loss_M.backward()
"""),
    ("GF203", """\
net_M = nn.Linear(3, 1)
opt_M = torch.optim.Adam(net_M.parameters(), lr=1e-2)
for epoch_M in range(3):
    opt_M.zero_grad()
    for x_M in batches_M:
        loss_M = net_M(x_M).sum()
        loss_M.backward()
        {pre}opt_M.step()
"""),
    ("GF101", """\
net_M = nn.Linear(3, 1)
opt_M = torch.optim.SGD(net_M.parameters(), lr=0.1)
total_M = 0
for x_M in batches_M:
    loss_M = net_M(x_M).sum()
    {pre}total_M += loss_M
    opt_M.zero_grad()
    total_M.backward()
    opt_M.step()
"""),
    ("GF102", """\
embed_M = nn.Embedding(10, 4)
heads_M = [nn.Linear(4, 1) for _ in range(3)]
hidden_M = embed_M(torch.tensor([1, 5, 7]))
for head_M in heads_M:
    score_M = head_M(hidden_M).sum()
    {pre}score_M.backward()
"""),
    ("GF103", """\
gen_M = nn.Linear(2, 3)
disc_M = nn.Linear(3, 1)
gopt_M = torch.optim.Adam(gen_M.parameters(), lr=1e-3)
dopt_M = torch.optim.Adam(disc_M.parameters(), lr=1e-3)
for step_M in range(3):
    real_M = torch.randn(4, 3)
    fake_M = gen_M(torch.randn(4, 2))
    dopt_M.zero_grad()
    {pre}dloss_M = disc_M(fake_M).mean() - disc_M(real_M).mean()
    dloss_M.backward()
    dopt_M.step()
    gopt_M.zero_grad()
    gloss_M = -disc_M(fake_M).mean()
    gloss_M.backward()
    gopt_M.step()
"""),
    ("GF104", """\
class Enc_M(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.mean_M = torch.zeros(3)

    def forward(self, x):
        h = torch.relu(self.fc(x))
        {pre}self.mean_M = self.mean_M * 0.9 + 0.1 * torch.mean(h, dim=0)
        return h


enc_M = Enc_M()
opt_M = torch.optim.SGD(enc_M.parameters(), lr=0.1)
for step_M in range(5):
    loss_M = enc_M(torch.randn(8, 4)).sum()
    opt_M.zero_grad()
    loss_M.backward()
    opt_M.step()
"""),
    ("GF105", """\
w_M = torch.randn(3, 3, requires_grad=True)
hid_M = torch.sigmoid(torch.randn(5, 3) @ w_M)
first_M = hid_M[:, 0] * 2
second_M = hid_M.sum()
{pre}torch.autograd.backward(first_M, grad_tensors=torch.ones(5))
torch.autograd.backward(second_M)
"""),
    ("GF107", """\
net_M = nn.Sequential(nn.Linear(3, 6), nn.Tanh(), nn.Linear(6, 1))
opt_M = torch.optim.SGD(net_M.parameters(), lr=0.05)
for x_M, y_M in data_M:
    loss_M = nn.functional.mse_loss(net_M(x_M), y_M)
    {pre}grads_M = torch.autograd.grad(loss_M, list(net_M.parameters()), retain_graph=True)
    pen_M = sum(g.pow(2).sum() for g in grads_M)
    opt_M.zero_grad()
    (loss_M + 0.1 * pen_M).backward()
    opt_M.step()
"""),
]
