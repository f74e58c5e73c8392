"""Force-scale-down function: an operator's manual `aws lambda invoke` drains and removes nodes."""
