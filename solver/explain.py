"""Stub for the first test; replaced by the real explanation module."""
def explain_infeasible(catalogue, query, space):
    return None
