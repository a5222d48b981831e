"""What an operator sees from outside the process: Prometheus metrics (``metrics.py``).

Nothing here is imported unless asked for (``--metrics``, ``--metrics-listen``,
``AcpHost(metrics=True)``), so a server without it pays nothing: no module, no
hook, no timer. When on, the hot path gains plain integer and float
arithmetic on objects the process already has; the ``prometheus_client``
objects are built from those at scrape time (``metrics.AcpCollector``).
"""
