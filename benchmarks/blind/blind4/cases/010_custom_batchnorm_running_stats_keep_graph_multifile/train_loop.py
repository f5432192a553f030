"""Generic supervised training loop with per-epoch validation."""
import torch
import torch.nn.functional as F


def evaluate(model, val_batches):
    model.eval()
    with torch.no_grad():
        correct = total = 0
        for x, y in val_batches:
            correct += int((model(x).argmax(1) == y).sum())
            total += len(y)
    model.train()
    return correct / total


def fit(model, optimizer, train_batches, val_batches, epochs):
    model.train()
    for epoch in range(epochs):
        running = 0.0
        for x, y in train_batches:
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running += loss.item()
        acc = evaluate(model, val_batches)
        print(f"epoch {epoch}: train loss {running / len(train_batches):.4f} val acc {acc:.3f}")
