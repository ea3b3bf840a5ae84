"""Home page: the lecture's three-word causal example beside the map of the lecture."""

from __future__ import annotations

from tx_explorer.views import Panel, masks, texts


def example(*, lang: str = "en") -> Panel:
    """Who attends to whom under the causal mask in "Attention is very"."""
    panel, _ = masks.example(0, lang=lang)
    panel.figure.update_layout(title_text=texts("home", lang)("example_title"))
    return Panel("home_example", panel.figure, panel.data)
