"""Streaming multi-frame detector head: the top-k decoded queries of each frame are kept as a
memory queue and propagated (as extra queries) into the next frame of the same scene."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

DIM, N_QUERY, TOPK, N_TOKENS = 16, 6, 3, 10


class PropagationHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.query_embed = nn.Parameter(torch.randn(N_QUERY, DIM) * 0.5)
        self.q_proj = nn.Linear(DIM, DIM)
        self.k_proj = nn.Linear(DIM, DIM)
        self.v_proj = nn.Linear(DIM, DIM)
        self.ffn = nn.Sequential(nn.Linear(DIM, 32), nn.ReLU(), nn.Linear(32, DIM))
        self.box_head = nn.Linear(DIM, 3)
        self.cls_head = nn.Linear(DIM, 1)
        self.memory_embedding = None
        self.memory_reference = None

    def reset_memory(self):
        self.memory_embedding = None
        self.memory_reference = None

    def pre_update_memory(self, batch_size):
        if self.memory_embedding is None:
            self.memory_embedding = torch.zeros(batch_size, TOPK, DIM)
            self.memory_reference = torch.zeros(batch_size, TOPK, 3)

    def post_update_memory(self, hs, boxes, scores):
        _, topk_indexes = torch.topk(scores, TOPK, dim=1)
        rec_memory = torch.gather(hs, 1, topk_indexes[..., None].expand(-1, -1, DIM))
        rec_reference = torch.gather(boxes, 1, topk_indexes[..., None].expand(-1, -1, 3))
        self.memory_embedding = rec_memory
        self.memory_reference = rec_reference

    def forward(self, feats):
        b = feats.size(0)
        self.pre_update_memory(b)
        queries = torch.cat([self.query_embed.expand(b, -1, -1), self.memory_embedding], dim=1)
        attn = torch.softmax(self.q_proj(queries) @ self.k_proj(feats).transpose(1, 2) / DIM ** 0.5, dim=-1)
        hs = queries + attn @ self.v_proj(feats)
        hs = hs + self.ffn(hs)
        boxes = self.box_head(hs)
        boxes = torch.cat([boxes[:, :N_QUERY], boxes[:, N_QUERY:] + self.memory_reference], dim=1)
        scores = self.cls_head(hs).squeeze(-1)
        self.post_update_memory(hs, boxes, scores)
        return boxes, scores


def detection_loss(boxes, scores, gt_boxes):
    # greedy matching: every gt box is assigned to its closest prediction
    dist = torch.cdist(gt_boxes, boxes)
    match = dist.argmin(dim=2)
    matched = torch.gather(boxes, 1, match[..., None].expand(-1, -1, 3))
    target = torch.zeros_like(scores).scatter(1, match, 1.0)
    return F.l1_loss(matched, gt_boxes) + F.binary_cross_entropy_with_logits(scores, target)


def make_scene(n_frames=5, bs=4, n_obj=2):
    centers = torch.randn(bs, n_obj, 3)
    velocity = torch.randn(bs, n_obj, 3) * 0.1
    proj = torch.randn(3, DIM)
    frames = []
    for t in range(n_frames):
        gt = centers + t * velocity
        tokens = torch.randn(bs, N_TOKENS, DIM) * 0.3
        tokens[:, :n_obj] += gt @ proj
        frames.append((tokens, gt))
    return frames


head = PropagationHead()
optimizer = torch.optim.AdamW(head.parameters(), lr=2e-3, weight_decay=1e-2)
scenes = [make_scene() for _ in range(6)]

for epoch in range(3):
    total = 0.0
    for scene in scenes:
        head.reset_memory()
        for feats, gt in scene:
            boxes, scores = head(feats)
            loss = detection_loss(boxes, scores, gt)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
    print(f"epoch {epoch}: loss {total / 30:.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(head):.8f}")
