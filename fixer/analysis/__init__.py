"""Shared analysis of training code: torch names, scopes and loops, backward and optimizer calls,
and which values carry an autograd graph. Rules stay small by asking these modules."""
