"""Shared loss helpers for the GAN experiments."""
import torch


def interpolate(real, fake):
    alpha = torch.rand(real.size(0), 1)
    return (alpha * real + (1 - alpha) * fake).requires_grad_(True)


def input_gradients(critic, samples, create_graph=False):
    """Gradient of the critic output w.r.t. its input samples (also used for logging gradient norms)."""
    scores = critic(samples)
    (grads,) = torch.autograd.grad(outputs=scores, inputs=samples, grad_outputs=torch.ones_like(scores),
                                   create_graph=create_graph, retain_graph=True)
    return grads


def gradient_penalty(critic, real, fake, create_graph=False):
    """WGAN-GP two-sided penalty (||grad_x D(x_hat)|| - 1)^2 on random interpolates."""
    grads = input_gradients(critic, interpolate(real, fake), create_graph=create_graph)
    return ((grads.norm(2, dim=1) - 1) ** 2).mean()


def critic_grad_norm(critic, samples):
    return input_gradients(critic, samples.detach().requires_grad_(True)).norm(2, dim=1).mean().item()
