# Harness check: global torch state is the default one.
import torch

assert torch.is_grad_enabled()
assert torch.get_default_dtype() == torch.float32
assert not torch.is_anomaly_enabled()
