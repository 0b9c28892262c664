"""Experiments (#27): what a variant may patch, the stash, the plan, settling, the state machine."""
