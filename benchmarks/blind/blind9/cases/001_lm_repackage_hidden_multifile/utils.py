"""Data helpers for the word-level language model (truncated BPTT)."""
import torch


def make_corpus(n_tokens=1000, vocab=24, seed=1):
    g = torch.Generator().manual_seed(seed)
    # a noisy periodic token stream: next token mostly (t + 3) % vocab
    toks = [0]
    for _ in range(n_tokens - 1):
        nxt = (toks[-1] + 3) % vocab
        if torch.rand(1, generator=g).item() < 0.15:
            nxt = int(torch.randint(vocab, (1,), generator=g))
        toks.append(nxt)
    return torch.tensor(toks)


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous()


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].reshape(-1)


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return torch.as_tensor(h)
    return tuple(repackage_hidden(v) for v in h)
