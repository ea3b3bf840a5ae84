"""Plotly figure builders: pure functions from arrays and labels to figures (no model, no Streamlit)."""
