"""Training callbacks: hooks called by the Trainer at epoch and batch boundaries."""


class Callback:
    def begin_epoch(self, trainer, epoch):
        pass

    def end_batch(self, trainer, output):
        pass

    def end_epoch(self, trainer, epoch):
        pass


class MetricHistory(Callback):
    """Averages every '*loss' entry of the batch outputs over an epoch and keeps the per-epoch history."""

    def __init__(self):
        self.history = []
        self.sums, self.count = {}, 0

    def begin_epoch(self, trainer, epoch):
        self.sums, self.count = {}, 0

    def end_batch(self, trainer, output):
        for key, value in output.items():
            if key.endswith("loss"):
                self.sums[key] = self.sums.get(key, 0.0) + value
        self.count += 1

    def end_epoch(self, trainer, epoch):
        self.history.append({key: total / self.count for key, total in self.sums.items()})


class Printer(Callback):
    def __init__(self, history):
        self.history = history

    def end_epoch(self, trainer, epoch):
        last = self.history.history[-1]
        print(f"epoch {epoch}: " + " ".join(f"{k} {float(v):.5f}" for k, v in sorted(last.items())))
