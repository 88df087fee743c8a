"""dpml's PLD accountant as Opacus's accountant (needs torch and opacus; not run in CI).

    pip install ./python torch opacus
    python python/examples/opacus_accountant.py

Opacus attaches the accountant's hook to the DP optimizer, so every step is recorded by dpml;
``get_epsilon`` then uses dpml's PLD accountant (tighter than RDP).
"""

import torch
from opacus import PrivacyEngine

from dpml.accounting import PLDAccountant

torch.manual_seed(0)
x = torch.randn(1024, 10)
y = (x[:, 0] > 0).long()
data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=64)
model = torch.nn.Sequential(torch.nn.Linear(10, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

engine = PrivacyEngine()
# The drop-in: Opacus calls accountant.get_optimizer_hook_fn(...) in make_private.
engine.accountant = PLDAccountant()
model, optimizer, data = engine.make_private(
    module=model, optimizer=optimizer, data_loader=data, noise_multiplier=1.1, max_grad_norm=1.0
)
for epoch in range(3):
    for xb, yb in data:
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(xb), yb).backward()
        optimizer.step()
    print(f"epoch {epoch + 1}: epsilon = {engine.get_epsilon(1e-5):.3f} (dpml PLD), "
          f"history {engine.accountant.history}")
