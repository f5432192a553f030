# Harness check: leaves global torch state changed, then fails.
import torch

torch.set_grad_enabled(False)
torch.set_default_dtype(torch.float64)
torch.autograd.set_detect_anomaly(True)
raise ValueError("left torch poisoned")
