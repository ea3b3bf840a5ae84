"""Data the project generates or finds on any machine: corpora, tokenizers, translation pairs, images."""
