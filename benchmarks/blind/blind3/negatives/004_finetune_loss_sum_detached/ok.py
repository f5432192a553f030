"""Fine-tuning loop in the style of an LLM fine-tuning template: gradient accumulation,
learning-rate warmup, and a running loss sum logged every few optimizer steps."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

VOCAB, CTX = 20, 8


class TinyCausalLM(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, d)
        self.pos = nn.Parameter(torch.zeros(CTX, d))
        self.mix = nn.Linear(d, d)
        self.lm_head = nn.Linear(d, VOCAB)

    def forward(self, input_ids, labels=None):
        h = self.emb(input_ids) + self.pos[: input_ids.size(1)]
        # causal mean over the prefix
        w = torch.tril(torch.ones(input_ids.size(1), input_ids.size(1)))
        w = w / w.sum(1, keepdim=True)
        h = h + torch.tanh(self.mix(w @ h))
        logits = self.lm_head(h)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1))
        return logits, loss


def training_function(model, batches, num_epochs=2, grad_accum=4, log_every=5, lr=3e-3, warmup=5):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup))
    step = 0
    for epoch in range(num_epochs):
        model.train()
        loss_sum = torch.zeros(())
        for i, (input_ids, labels) in enumerate(batches):
            _, loss = model(input_ids, labels)
            (loss / grad_accum).backward()
            loss_sum += loss.detach()
            if (i + 1) % grad_accum == 0:
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
                step += 1
                if step % log_every == 0:
                    print(f"epoch {epoch} step {step}: avg loss {(loss_sum / (log_every * grad_accum)).item():.4f}")
                    loss_sum = torch.zeros(())


def make_batches(n=40, bs=16):
    out = []
    for _ in range(n):
        start = torch.randint(0, VOCAB, (bs, 1))
        step = torch.randint(1, 3, (bs, 1))
        ids = (start + step * torch.arange(CTX)[None, :]) % VOCAB
        out.append((ids, ids))
    return out


model = TinyCausalLM()
training_function(model, make_batches())


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
