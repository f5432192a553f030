"""Overhead of ``graphfix run``'s sanitizer on small CPU training loops, side by side with the
plain run and with ``torch.autograd.set_detect_anomaly(True)``: CPU time, and peak memory.

    python benchmarks/runtime_overhead.py [--steps 40] [--repeat 9] [--rss-steps 20]

Each loop (MLP, CNN, LSTM, GAN, and an actor-critic of many tiny steps: ``--steps`` episodes of
50 environment steps) runs ``--steps`` optimizer iterations; the three modes take turns
``--repeat`` times and the best run of each is kept, in CPU time of this process (one torch
thread), which other load on the machine disturbs far less than wall time. Goal: the sanitized
run at most 1.5x the plain run, and faster than anomaly mode.

Peak RSS: a small GPT-style language model (benchmarks/programs/transformer_lm.py, user-written
attention blocks) and the actor-critic loop, each mode in a fresh process (``ru_maxrss`` only
grows), ``--rss-steps`` iterations. Goal: the sanitized run at most 1.2x the plain run's peak.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from fixer.runtime.session import Session  # noqa: E402


def mlp(steps: int) -> None:
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(128, 64), torch.randint(0, 10, (128,))
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()


def cnn(steps: int) -> None:
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 7 * 7, 10),
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(32, 1, 28, 28), torch.randint(0, 10, (32,))
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()


def lstm(steps: int) -> None:
    rnn, head = nn.LSTM(16, 64, batch_first=True), nn.Linear(64, 1)
    opt = torch.optim.Adam([*rnn.parameters(), *head.parameters()], lr=1e-3)
    x, y = torch.randn(32, 20, 16), torch.randn(32, 1)
    for _ in range(steps):
        opt.zero_grad()
        out, _ = rnn(x)
        nn.functional.mse_loss(head(out[:, -1]), y).backward()
        opt.step()


def gan(steps: int) -> None:
    G = nn.Sequential(nn.Linear(16, 128), nn.ReLU(), nn.Linear(128, 64))
    D = nn.Sequential(nn.Linear(64, 128), nn.LeakyReLU(0.2), nn.Linear(128, 1))
    opt_g, opt_d = torch.optim.Adam(G.parameters(), lr=2e-4), torch.optim.Adam(D.parameters(), lr=2e-4)
    bce, real = nn.BCEWithLogitsLoss(), torch.randn(64, 64)
    ones, zeros = torch.ones(64, 1), torch.zeros(64, 1)
    for _ in range(steps):
        fake = G(torch.randn(64, 16))
        opt_d.zero_grad()
        (bce(D(real), ones) + bce(D(fake.detach()), zeros)).backward()
        opt_d.step()
        opt_g.zero_grad()
        bce(D(fake), ones).backward()
        opt_g.step()


def actor_critic(steps: int) -> None:
    """pytorch/examples' actor-critic: per environment step one forward, a softmax and a
    ``Categorical`` sample (many tiny torch calls), one update per 50-step episode."""
    from torch.distributions import Categorical

    affine, action_head, value_head = nn.Linear(4, 128), nn.Linear(128, 2), nn.Linear(128, 1)
    params = [*affine.parameters(), *action_head.parameters(), *value_head.parameters()]
    opt = torch.optim.Adam(params, lr=3e-2)
    for _ in range(steps):
        saved, rewards = [], []
        for _ in range(50):
            hidden = torch.relu(affine(torch.randn(4)))
            m = Categorical(torch.softmax(action_head(hidden), dim=-1))
            action = m.sample()
            saved.append((m.log_prob(action), value_head(hidden)))
            rewards.append(float(action.item() == 1))
        returns = torch.tensor(rewards).flip(0).cumsum(0).flip(0)
        losses = [-log_prob * (r - value.item()) + nn.functional.smooth_l1_loss(value, r.view(1)) for (log_prob, value), r in zip(saved, returns)]
        opt.zero_grad()
        torch.stack(losses).sum().backward()
        opt.step()


@contextlib.contextmanager
def anomaly():
    with torch.autograd.detect_anomaly(check_nan=False):
        yield


MODES = {"plain": contextlib.nullcontext, "sanitized": Session, "anomaly": anomaly}


def measure(loop, mode: str, steps: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        torch.manual_seed(0)
        with MODES[mode]():
            start = time.process_time()  # CPU time: other processes on a shared machine do not count
            loop(steps)
            best = min(best, time.process_time() - start)
    return best


def transformer_lm(steps: int) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent / "programs"))
    from transformer_lm import train

    train(steps)


def peak_rss(loop: str, mode: str, steps: int) -> float:
    """MB: the peak RSS of a fresh process that runs ``loop`` for ``steps`` in ``mode``."""
    import subprocess

    done = subprocess.run([sys.executable, __file__, "--peak-of", loop, mode, str(steps)], capture_output=True, text=True, check=True)
    return float(done.stdout.split()[-1])


def _peak_of(loop: str, mode: str, steps: int) -> None:
    import resource
    import warnings

    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    with MODES[mode]():
        LOOPS[loop](steps)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


LOOPS = {f.__name__: f for f in (mlp, cnn, lstm, gan, actor_critic, transformer_lm)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--rss-steps", type=int, default=20)
    parser.add_argument("--only", help="comma-separated loops to time (default: all but transformer_lm)")
    parser.add_argument("--peak-of", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peak_of:
        return _peak_of(args.peak_of[0], args.peak_of[1], int(args.peak_of[2]))
    torch.set_num_threads(1)
    import warnings

    warnings.simplefilter("ignore")  # anomaly mode warns that it is on
    names = args.only.split(",") if args.only else ["mlp", "cnn", "lstm", "gan", "actor_critic"]
    print(f"{'loop':<13} {'plain':>9} {'sanitized':>10} {'anomaly':>9}   sanitized/plain  anomaly/plain")
    for name in names:
        loop = LOOPS[name]
        loop(2)  # warm up
        times = {mode: float("inf") for mode in MODES}
        for _ in range(args.repeat):  # the modes take turns: a slow spell of the machine hits all three
            for mode in MODES:
                times[mode] = min(times[mode], measure(loop, mode, args.steps, 1))
        plain = times["plain"]
        print(
            f"{name:<13} {plain:>8.3f}s {times['sanitized']:>9.3f}s {times['anomaly']:>8.3f}s"
            f"   {times['sanitized'] / plain:>14.2f}x {times['anomaly'] / plain:>13.2f}x"
        )
    if args.rss_steps:
        print(f"\npeak RSS, {args.rss_steps} steps, MB: {'plain':>7} {'sanitized':>10} {'anomaly':>8}   sanitized/plain")
        for name in ("transformer_lm", "actor_critic"):
            peaks = {mode: peak_rss(name, mode, args.rss_steps) for mode in MODES}
            print(f"{name:<28} {peaks['plain']:>7.0f} {peaks['sanitized']:>10.0f} {peaks['anomaly']:>8.0f}   {peaks['sanitized'] / peaks['plain']:>14.2f}x")


if __name__ == "__main__":
    main()
