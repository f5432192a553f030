"""Compares the gradients of GF104_reset_on_forward_path.py before and after graphfix --fix --unsafe-fixes: the fix cuts BPTT inside one sequence."""
import importlib.util, sys, torch
def load(path):
    spec = importlib.util.spec_from_file_location("m" + str(abs(hash(path))), path)
    m = importlib.util.module_from_spec(spec)
    import io, contextlib
    with contextlib.redirect_stdout(io.StringIO()):
        spec.loader.exec_module(m)
    return m
a, b = load("GF104_reset_on_forward_path.py"), load("GF104_reset_on_forward_path_after_graphfix.py")
torch.manual_seed(1); da = a.Decoder(); db = b.Decoder(); db.load_state_dict(da.state_dict())
xs = torch.randn(5, 2, 3)
for d in (da, db):
    d(xs).pow(2).mean().backward()
print("weight_hh grad max abs diff after fix:", (da.cell.weight_hh.grad - db.cell.weight_hh.grad).abs().max().item())
