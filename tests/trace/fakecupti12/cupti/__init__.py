"""A stand-in for the ``cupti-python`` package (``from cupti import cupti``), for tests without a GPU."""
