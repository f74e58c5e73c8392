"""Stacks compose the constructs; they hold no resource details of their own."""
