# A model class in the style of image-translation frameworks: forward() stores every output in a
# field, update() steps the generator and the encoder on the first loss and then backpropagates a
# latent regression loss read from a field the encoder computed before its step.
import torch
from torch import nn

torch.manual_seed(0)


class TranslationModel:
    def __init__(self, use_latent_loss=True):
        self.generator = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 4))
        self.encoder = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
        self.opt_g = torch.optim.Adam(self.generator.parameters(), lr=0.01)
        self.opt_e = torch.optim.Adam(self.encoder.parameters(), lr=0.01)
        self.use_latent_loss = use_latent_loss

    def set_input(self, source, target):
        self.source, self.target = source, target

    def forward(self):
        self.latent = torch.randn(len(self.source), 2)
        self.output = self.generator(torch.cat([self.source, self.latent], 1))
        self.recovered = self.encoder(self.output)

    def backward_main(self):
        self.loss_main = (self.output - self.target).pow(2).mean() + self.recovered.pow(2).mean() * 0.1
        self.loss_main.backward(retain_graph=True)

    def backward_latent(self):
        self.loss_latent = (self.recovered - self.latent).abs().mean()
        self.loss_latent.backward()

    def update(self):
        self.opt_g.zero_grad()
        self.opt_e.zero_grad()
        self.backward_main()
        self.opt_g.step()
        self.opt_e.step()
        if self.use_latent_loss:
            self.opt_g.zero_grad()
            self.backward_latent()
            self.opt_g.step()

    def optimize(self):
        self.forward()
        self.update()


model = TranslationModel()
for step in range(3):
    model.set_input(torch.randn(8, 4), torch.randn(8, 4))
    model.optimize()
print(round(sum(float(p.detach().abs().sum()) for p in model.generator.parameters()), 5))
