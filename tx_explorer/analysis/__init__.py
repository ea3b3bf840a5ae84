"""Measurements on models and attention maps: pure PyTorch/numpy, no UI."""
