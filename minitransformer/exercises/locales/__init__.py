"""The checkers' messages, one module per language, named by its code.

Each module defines ``MESSAGES``: a dict from message id to text with
``str.format`` fields. ``en`` is complete; any other language may leave ids
out, and those are printed in English. See :mod:`minitransformer.exercises`.
"""
