"""The soak (``make soak``, ``python -m soak``): the demo site under a steady load and a
schedule of faults on every Redis topology, every request written down, then checked.

One process per topology (:mod:`soak.run`) starts the servers (:mod:`soak.topology`,
:mod:`soak.site`), runs the load (:mod:`soak.load`, shaped by :mod:`soak.mix`) beside
the faults (:mod:`soak.faults`) and the probes (:mod:`soak.probes`), and writes the
history (:mod:`soak.history`); :mod:`soak.checker` judges it and :mod:`soak.report` and
:mod:`soak.plot` show it. What runs and what is checked: ``docs/soak.md``.
"""
