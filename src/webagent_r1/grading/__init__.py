"""Grading: what an evaluator sees and returns (``base.py``: ``EvalContext``, ``EvalResult``,
``SiteBackend``, ``EnvError``) and the graders of the embedded suite (``embedded.py``).

WebArena-Lite's graders need its sites, judge and helpers, and so live with that source
(``sources/webarena/grading.py``); MiniWoB++ pages grade themselves (``sources/miniwob.py``).
"""
