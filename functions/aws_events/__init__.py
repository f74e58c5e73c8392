"""AWS-events function: failed launches back a group off at once; spot warnings cordon the node."""
