"""Copy weights from timm / transformers models into our modules (and prove the outputs match)."""
