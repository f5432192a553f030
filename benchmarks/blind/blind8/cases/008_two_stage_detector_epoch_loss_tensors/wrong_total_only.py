"""Toy two-stage detector (shared backbone, RPN head, RoI head) on pre-extracted region
features, trained with the usual fit_one_epoch / FasterRCNNTrainer split."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

N_CLASSES = 5
FEAT = 20


class TwoStageDetector(nn.Module):
    def __init__(self):
        super().__init__()
        self.extractor = nn.Sequential(nn.Linear(FEAT, 48), nn.ReLU(), nn.Linear(48, 48), nn.ReLU())
        self.rpn_loc = nn.Linear(48, 4)
        self.rpn_score = nn.Linear(48, 2)
        self.head = nn.Sequential(nn.Linear(48 + 4, 48), nn.ReLU())
        self.roi_loc = nn.Linear(48, 4)
        self.roi_score = nn.Linear(48, N_CLASSES)

    def forward(self, x):
        base = self.extractor(x)
        rpn_locs, rpn_scores = self.rpn_loc(base), self.rpn_score(base)
        h = self.head(torch.cat([base, rpn_locs], 1))
        return rpn_locs, rpn_scores, self.roi_loc(h), self.roi_score(h)


class FasterRCNNTrainer(nn.Module):
    def __init__(self, model, optimizer):
        super().__init__()
        self.model = model
        self.optimizer = optimizer

    def forward(self, feats, gt_locs, gt_obj, gt_labels):
        rpn_locs, rpn_scores, roi_locs, roi_scores = self.model(feats)
        rpn_loc_loss = F.smooth_l1_loss(rpn_locs, gt_locs)
        rpn_cls_loss = F.cross_entropy(rpn_scores, gt_obj)
        roi_loc_loss = F.smooth_l1_loss(roi_locs[gt_obj == 1], gt_locs[gt_obj == 1])
        roi_cls_loss = F.cross_entropy(roi_scores, gt_labels)
        losses = [rpn_loc_loss, rpn_cls_loss, roi_loc_loss, roi_cls_loss]
        return losses + [sum(losses)]

    def train_step(self, feats, gt_locs, gt_obj, gt_labels):
        self.optimizer.zero_grad()
        losses = self.forward(feats, gt_locs, gt_obj, gt_labels)
        losses[-1].backward()
        self.optimizer.step()
        return losses


def fit_one_epoch(net, train_util, epoch, gen, gen_val):
    total_loss = 0
    rpn_loc_loss = 0
    rpn_cls_loss = 0
    roi_loc_loss = 0
    roi_cls_loss = 0
    val_loss = 0
    net.train()
    for iteration, batch in enumerate(gen):
        rpn_loc, rpn_cls, roi_loc, roi_cls, total = train_util.train_step(*batch)
        total_loss += total.item()
        rpn_loc_loss += rpn_loc
        rpn_cls_loss += rpn_cls
        roi_loc_loss += roi_loc
        roi_cls_loss += roi_cls
    net.eval()
    with torch.no_grad():
        for batch in gen_val:
            val_loss += train_util.forward(*batch)[-1].item()
    n = len(gen)
    print(f"epoch {epoch}: total {total_loss / n:.4f} rpn_loc {rpn_loc_loss.item() / n:.4f} "
          f"rpn_cls {rpn_cls_loss.item() / n:.4f} roi_loc {roi_loc_loss.item() / n:.4f} "
          f"roi_cls {roi_cls_loss.item() / n:.4f} val {val_loss / len(gen_val):.4f}")


PROTOTYPES = torch.randn(N_CLASSES, FEAT)


def make_batches(n, bs=32):
    proto = PROTOTYPES
    out = []
    for _ in range(n):
        labels = torch.randint(0, N_CLASSES, (bs,))
        obj = (labels > 0).long()
        locs = torch.randn(bs, 4) * 0.5
        feats = proto[labels] + 0.5 * torch.randn(bs, FEAT)
        feats[:, :4] += locs
        out.append((feats, locs, obj, labels))
    return out


net = TwoStageDetector()
optimizer = torch.optim.Adam(net.parameters(), lr=1e-3, weight_decay=5e-4)
train_util = FasterRCNNTrainer(net, optimizer)
gen, gen_val = make_batches(40), make_batches(8)
for epoch in range(3):
    fit_one_epoch(net, train_util, epoch, gen, gen_val)


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(net):.8f}")
