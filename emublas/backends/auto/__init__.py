"""The ``auto`` backend: per call, the fastest backend that meets the accuracy asked for.

``backend``
    The adapter (options, routing, :func:`~.backend.last_run`).
``model``
    The accuracy model and the per-call decision (:func:`~.model.decide`).
``tables``
    The measured cost tables: JSON form, loading, which one applies (written by
    ``emublas calibrate``, shipped in ``emublas/data``).
"""
