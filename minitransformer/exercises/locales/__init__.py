"""The checkers' messages, one module per language, named by its code.

Each module defines ``MESSAGES``: a dict from message id to text with
``str.format`` fields. ``en`` and ``zh`` are complete; another language may
leave ids out, and those are printed in English. See :mod:`minitransformer.exercises`.
"""
