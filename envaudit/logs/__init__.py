"""Audit a training run from its logged rollouts (``envaudit logs``): records in, findings out.

``schema`` holds the generic episode/step schema every reader maps onto (``LoggedRun``);
``generic`` reads it from JSONL, Parquet or CSV; ``readers`` holds one module per trainer's rollout
dump; ``audit.run_logs`` turns a run into a report (``records`` makes the probes' records of it,
``analyses`` runs the probes' record analyses, ``drift`` the drift over training, ``replay`` the
replay against an env).
"""
