"""Hooks the trainer of outputs_handed_to_hooks.py fires by name."""


class Totals:
    """Adds up every entry it is given, per name, over the whole run."""

    def __init__(self):
        self.totals = {}

    def after_step(self, values):
        for name, value in values.items():
            self.totals[name] = self.totals.get(name, 0.0) + value
