"""A script that attaches and then fails before its first optimizer step: `--check` exits 1 with its last line."""
import torch

import ddp_profile

model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
dp = ddp_profile.attach(model, opt, loss_fn=lambda m, b: m(b[0]).sum())
raise ValueError("bad config: --data points nowhere")
