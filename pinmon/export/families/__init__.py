"""The exporter's metric families, one module per topic (``gpu``, ``host``, ``processes``, ``copies``,
``probe``, ``status``), built at scrape time from the exporter's cached state; ``base`` holds the builders that
skip unknown values and ``served``, which every label value goes through."""
