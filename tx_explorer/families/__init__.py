"""Model families: what each kind of model loads into, and the loader that reads its bundle.

One module per family: :mod:`~tx_explorer.families.text` (``TextModel``), :mod:`~tx_explorer.families.moe`
(``MoEBundle``), :mod:`~tx_explorer.families.translation` (``Translator``), :mod:`~tx_explorer.families.images`
(``ImageClassifier``), :mod:`~tx_explorer.families.variants` (the block variants' ``Results``) and
:mod:`~tx_explorer.families.positions` (the position lab's results). The registry,
:mod:`tx_explorer.models`, names each model's family and loader; a family never imports the registry.
"""
