"""whileai: turn simulated agent rollouts into better tool-using LLM agents.

The product surface is ``import whileai.simulations as wai``; the platform that
stores runs, datasets and models lives in :mod:`whileai.platform`.
"""

__version__ = "0.1.0"
