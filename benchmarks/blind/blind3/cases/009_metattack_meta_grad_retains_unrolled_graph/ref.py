"""Metattack-style poisoning of a small graph: the surrogate GCN's training is unrolled
(create_graph=True) so that the self-training attack loss can be differentiated w.r.t. the
adjacency perturbations; one edge is flipped per meta-gradient."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

N_NODES, N_FEAT, N_CLASS, N_HID = 24, 10, 3, 8


def normalize_adj_tensor(adj):
    mx = adj + torch.eye(adj.size(0))
    r_inv = mx.sum(1).pow(-0.5)
    return r_inv[:, None] * mx * r_inv[None, :]


class Metattack:
    def __init__(self, nnodes, train_iters=20, lr=0.1, momentum=0.9, lambda_=0.5):
        self.train_iters, self.lr, self.momentum, self.lambda_ = train_iters, lr, momentum, lambda_
        self.adj_changes = nn.Parameter(torch.zeros(nnodes, nnodes))
        self.weights = [torch.empty(N_FEAT, N_HID), torch.empty(N_HID, N_CLASS)]
        self.w_velocities = [torch.zeros(N_FEAT, N_HID), torch.zeros(N_HID, N_CLASS)]

    def _initialize(self):
        for w in self.weights:
            stdv = 1.0 / math.sqrt(w.size(1))
            w.data.uniform_(-stdv, stdv)

    def train_surrogate(self, features, adj, labels, idx_train, epochs=60):
        adj_norm = normalize_adj_tensor(adj)
        w1 = nn.Parameter(torch.randn(N_FEAT, N_HID) * 0.3)
        w2 = nn.Parameter(torch.randn(N_HID, N_CLASS) * 0.3)
        opt = torch.optim.Adam([w1, w2], lr=0.05)
        for _ in range(epochs):
            out = adj_norm @ torch.relu(adj_norm @ features @ w1) @ w2
            loss = F.cross_entropy(out[idx_train], labels[idx_train])
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            return (adj_norm @ torch.relu(adj_norm @ features @ w1) @ w2).argmax(1)

    def get_modified_adj(self, ori_adj):
        changes_square = self.adj_changes - torch.diag(torch.diag(self.adj_changes, 0))
        changes_symm = torch.clamp(changes_square + changes_square.t(), -1, 1)
        return changes_symm + ori_adj

    def _gcn(self, features, adj_norm):
        hidden = torch.relu(adj_norm @ features @ self.weights[0])
        return F.log_softmax(adj_norm @ hidden @ self.weights[1], dim=1)

    def inner_train(self, features, adj_norm, idx_train, labels):
        self._initialize()
        for ix in range(len(self.weights)):
            self.weights[ix] = self.weights[ix].detach().requires_grad_(True)
            self.w_velocities[ix] = self.w_velocities[ix].detach().zero_().requires_grad_(True)
        for _ in range(self.train_iters):
            output = self._gcn(features, adj_norm)
            loss_labeled = F.nll_loss(output[idx_train], labels[idx_train])
            weight_grads = torch.autograd.grad(loss_labeled, self.weights, create_graph=True)
            self.w_velocities = [self.momentum * v + g for v, g in zip(self.w_velocities, weight_grads)]
            self.weights = [w - self.lr * v for w, v in zip(self.weights, self.w_velocities)]

    def get_meta_grad(self, features, adj_norm, idx_train, idx_unlabeled, labels, labels_self_training):
        output = self._gcn(features, adj_norm)
        loss_labeled = F.nll_loss(output[idx_train], labels[idx_train])
        loss_unlabeled = F.nll_loss(output[idx_unlabeled], labels_self_training[idx_unlabeled])
        attack_loss = self.lambda_ * loss_labeled + (1 - self.lambda_) * loss_unlabeled
        adj_grad = torch.autograd.grad(attack_loss, self.adj_changes)[0]
        print(f"  attack loss {attack_loss.item():.4f}")
        return adj_grad

    def attack(self, features, ori_adj, labels, idx_train, idx_unlabeled, n_perturbations):
        labels_self_training = self.train_surrogate(features, ori_adj, labels, idx_train)
        for i in range(n_perturbations):
            modified_adj = self.get_modified_adj(ori_adj)
            adj_norm = normalize_adj_tensor(modified_adj)
            self.inner_train(features, adj_norm, idx_train, labels)
            adj_grad = self.get_meta_grad(features, adj_norm, idx_train, idx_unlabeled, labels, labels_self_training)
            with torch.no_grad():
                adj_meta_grad = adj_grad * (-2 * modified_adj + 1)
                adj_meta_grad -= adj_meta_grad.min()
                adj_meta_grad -= torch.diag(torch.diag(adj_meta_grad, 0))
                row, col = divmod(int(torch.argmax(adj_meta_grad)), ori_adj.size(0))
                self.adj_changes.data[row][col] += -2 * modified_adj[row][col] + 1
                self.adj_changes.data[col][row] += -2 * modified_adj[row][col] + 1
            print(f"perturbation {i}: flip edge ({row}, {col})")
        return self.get_modified_adj(ori_adj).detach()


def make_graph():
    labels = torch.arange(N_NODES) % N_CLASS
    same = (labels[:, None] == labels[None, :]).float()
    probs = 0.35 * same + 0.04 * (1 - same)
    upper = torch.triu((torch.rand(N_NODES, N_NODES) < probs).float(), diagonal=1)
    adj = upper + upper.t()
    centers = torch.randn(N_CLASS, N_FEAT)
    features = centers[labels] + 1.5 * torch.randn(N_NODES, N_FEAT)
    perm = torch.randperm(N_NODES)
    return features, adj, labels, perm[:8], perm[8:]


features, adj, labels, idx_train, idx_unlabeled = make_graph()
attacker = Metattack(N_NODES)
modified_adj = attacker.attack(features, adj, labels, idx_train, idx_unlabeled, n_perturbations=6)

checksum = float(modified_adj.double().abs().sum()) + sum(float(w.detach().double().abs().sum()) for w in attacker.weights)
print(f"CHECKSUM {checksum:.8f}")
