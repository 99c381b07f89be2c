"""The whileai platform: the store, the HTTP API, the job runner, run pages and the serving endpoint.

The SDK reaches it only through :mod:`whileai.simulations._client`.
"""
