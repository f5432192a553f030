# GF107 false positive: the later autograd.grad differentiates WITH RESPECT TO the tensors derived
# from the first gradient (test-time fine-tuning of fast weights); it never walks into the first
# gradient's graph, and nothing backpropagates to the original weights. create_graph is waste.
import torch

torch.manual_seed(0)
w = torch.randn(3, 2, requires_grad=True)
xs, ys = torch.randn(5, 3), torch.randn(5, 2)

def finetune(steps=3, lr=0.1):
    loss = ((xs @ w - ys) ** 2).mean()
    grad = torch.autograd.grad(loss, [w])        # graphfix: GF107 wants create_graph=True
    fast = [w - lr * grad[0]]
    for _ in range(steps):
        loss = ((xs @ fast[0] - ys) ** 2).mean()
        grad = torch.autograd.grad(loss, fast)   # w.r.t. the fast weights themselves
        fast = [fast[0] - lr * grad[0]]
    with torch.no_grad():
        return ((xs @ fast[0] - ys) ** 2).mean().item()

print(round(finetune(), 6))
