"""Audit a training run from its logged rollouts (``envaudit logs``): records in, findings out.

``schema`` holds the generic episode/step schema every reader maps onto (``LoggedRun``);
``readers`` holds one module per trainer's rollout dump.
"""
