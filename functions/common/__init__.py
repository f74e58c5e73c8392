"""What the reconcile, force-scale-down and AWS-events handlers share: Powertools and dependency wiring."""
