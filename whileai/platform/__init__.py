"""The whileai platform: the store, the HTTP API, the job runner, run pages and the serving endpoint.

It imports nothing of the SDK; the SDK reaches it only through its client seam
(:mod:`whileai.domain.client`: HTTP, or the embedded app from :mod:`whileai.platform.embedded`).
"""
