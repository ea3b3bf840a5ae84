"""Pure-PyTorch building blocks: attention, norms, MLPs, blocks and the models built from them."""
