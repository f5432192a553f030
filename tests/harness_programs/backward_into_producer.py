import torch

producer = torch.nn.Linear(2, 2)
consumer = torch.nn.Linear(2, 1)
made = producer(torch.ones(4, 2))
consumer(made).sum().backward()
producer.zero_grad()
