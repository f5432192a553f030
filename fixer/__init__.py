"""graphfix: find and fix PyTorch autograd graph-lifetime bugs."""

__version__ = "0.2.0"
