"""whileai.runner: the experiment runner behind ``python -m whileai run``.

A spec is composed by Hydra from ``conf/`` (config groups) and ``recipes/``
(one experiment per file), checked with every problem at once (``schema.check``),
validated once into the typed ``schema.RecipeSpec`` and run as a sequence of
library calls (``pipeline.run_spec``). Only this package touches Hydra and OmegaConf objects;
``whileai.simulations`` keeps taking plain keyword arguments.
"""
