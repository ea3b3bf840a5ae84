"""Transformer Explorer: attention models in plain PyTorch, and the numbers behind every picture.

The compute packages (``attention``, ``masks``, ``trace``, ``modules``, ``analysis`` …) import only torch
and numpy; ``tx_explorer.viz`` builds Plotly figures; ``tx_explorer.ui`` is the only module that imports
Streamlit.
"""

__version__ = "0.1.0"
