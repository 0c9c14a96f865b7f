"""Private workarounds for XLA:CPU's slow paths, used inside the library; same numbers, faster compiled code.

``conv``         :func:`~banditkit._xla.conv.canonical_convs`: convolutions inside ``scan`` / ``while`` bodies written
                 in the layout XLA:CPU's fast kernels take (XLA does it by itself only outside loops)
``flat_random``  ``jax.random``-identical draws of N-d shapes made as one 1-d draw, reshaped (XLA:CPU compiles the
                 N-d element counter slowly), and Flax's default initialisers with them

Old public paths, deprecated: ``banditkit.convs`` and ``banditkit.rng``.
"""
