"""Webhook function: GPU pod admissions, FailedScheduling events and pokes wake the reconcile early."""
